package fhirserver_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// TestReindexPageResumes: resources stored without index rows are
// reindexed page by page, each page by a new server (a job restarted
// between pages) carrying on from the cursor of the last: every resource
// is reindexed once, and a search finds them all.
func TestReindexPageResumes(t *testing.T) {
	h := newHarness(t)
	lu := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		id := fmt.Sprintf("r%d", i)
		body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"meta":{"versionId":"1","lastUpdated":"2026-01-05T10:00:00Z"},"name":[{"family":"Rowless"}]}`, id)
		if err := h.store.Put(t.Context(), store.Write{Type: "Patient", ID: id, Version: 1, LastUpdated: lu, Method: store.MethodCreate, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	total := func() float64 {
		r := h.do("GET", "/Patient?family=rowless&_total=accurate", nil)
		var b map[string]any
		if err := json.Unmarshal(r.body, &b); err != nil || r.status != 200 {
			t.Fatalf("search: %d %s", r.status, r.body)
		}
		n, _ := b["total"].(float64)
		return n
	}
	if n := total(); n != 0 {
		t.Fatalf("before the reindex the search finds %v", n)
	}
	cursor, seen, applied := "", 0, 0
	for pages := 0; ; pages++ {
		srv, err := fhirserver.New(h.cfg, h.store)
		if err != nil {
			t.Fatal(err)
		}
		step, err := srv.ReindexPage(t.Context(), "Patient", cursor, 2, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		seen, applied = seen+step.Seen, applied+step.Applied
		if cursor = step.Next; cursor == "" {
			if pages != 2 {
				t.Errorf("%d pages of 2 for 5 resources, want 3", pages+1)
			}
			break
		}
	}
	if seen != 5 || applied != 5 {
		t.Fatalf("seen %d, applied %d; want 5 and 5", seen, applied)
	}
	if n := total(); n != 5 {
		t.Fatalf("after the reindex the search finds %v, want 5", n)
	}
}

// TestReindexPageUpdatedBefore: with a bound, only the resources last
// updated before it are reindexed (found by their _lastUpdated rows).
func TestReindexPageUpdatedBefore(t *testing.T) {
	h := newHarness(t)
	for i := range 4 {
		lu := time.Date(2026, 1, 5, 10, i, 0, 0, time.UTC)
		body := fmt.Sprintf(`{"resourceType":"Patient","id":"b%d","meta":{"versionId":"1","lastUpdated":%q},"name":[{"family":"Bounded"}]}`, i, lu.Format(time.RFC3339))
		if err := h.store.Put(t.Context(), store.Write{Type: "Patient", ID: fmt.Sprintf("b%d", i), Version: 1, LastUpdated: lu, Method: store.MethodCreate, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := fhirserver.New(h.cfg, h.store)
	if err != nil {
		t.Fatal(err)
	}
	// The bound is a search on _lastUpdated: the resources need their rows.
	if step, err := srv.ReindexPage(t.Context(), "Patient", "", 10, time.Time{}); err != nil || step.Applied != 4 {
		t.Fatalf("ReindexPage without a bound: %+v, %v", step, err)
	}
	step, err := srv.ReindexPage(t.Context(), "Patient", "", 10, time.Date(2026, 1, 5, 10, 2, 0, 0, time.UTC))
	if err != nil || step.Seen != 2 || step.Applied != 2 || step.Next != "" {
		t.Fatalf("ReindexPage before 10:02: %+v, %v; want the 2 resources of 10:00 and 10:01", step, err)
	}
}
