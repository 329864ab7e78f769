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
		step, err := srv.ReindexPage(t.Context(), "Patient", cursor, 2)
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
