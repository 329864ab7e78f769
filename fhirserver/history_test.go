package fhirserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
)

// clock is a settable time source for tests of _since and _at.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(s string) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// followPages walks a history Bundle's next links and returns the fullUrl
// and version of every entry, in order.
func (h *harness) followPages(t *testing.T, path string) (entries []string, pages int) {
	t.Helper()
	url := path
	for url != "" && pages < 100 {
		r := h.do("GET", url, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, r.status, r.body)
		}
		pages++
		versions := entryVersions(t, r)
		for i, e := range bundleEntries(t, r) {
			full := e["fullUrl"].(string)
			entries = append(entries, full[strings.LastIndex(full, "/")+1:]+"@"+versions[i])
		}
		url = ""
		for _, l := range r.json(t)["link"].([]any) {
			if l.(map[string]any)["relation"] == "next" {
				url = l.(map[string]any)["url"].(string)
			}
		}
	}
	return entries, pages
}

func TestHistoryPagingVisitsEveryVersionOnce(t *testing.T) {
	h := newHarness(t)
	body := fixture(t, "patient.json")
	for _, id := range []string{"a", "b", "c"} {
		for range 3 {
			h.do("PUT", "/Patient/"+id, withID(body, id))
		}
	}
	h.do("PUT", "/Observation/o1", withID(fixture(t, "observation.json"), "o1"))

	all, pages := h.followPages(t, "/_history?_count=4")
	want := []string{"o1@1", "c@3", "c@2", "c@1", "b@3", "b@2", "b@1", "a@3", "a@2", "a@1"}
	if !slices.Equal(all, want) || pages != 3 {
		t.Errorf("system history %v in %d pages; want %v in 3", all, pages, want)
	}
	typ, _ := h.followPages(t, "/Patient/_history?_count=2")
	if !slices.Equal(typ, want[1:]) {
		t.Errorf("type history %v; want %v", typ, want[1:])
	}
	inst, _ := h.followPages(t, "/Patient/b/_history?_count=1")
	if !slices.Equal(inst, []string{"b@3", "b@2", "b@1"}) {
		t.Errorf("instance history %v", inst)
	}
}

// A client paging through history while others write sees neither
// duplicates nor gaps among the versions that existed when it started.
func TestHistoryPagingIsStableUnderWrites(t *testing.T) {
	h := newHarness(t)
	body := fixture(t, "patient.json")
	for i := range 6 {
		id := fmt.Sprintf("p%d", i)
		h.do("PUT", "/Patient/"+id, withID(body, id))
	}
	first := h.do("GET", "/Patient/_history?_count=3", nil)
	var next string
	for _, l := range first.json(t)["link"].([]any) {
		if l.(map[string]any)["relation"] == "next" {
			next = l.(map[string]any)["url"].(string)
		}
	}
	h.do("PUT", "/Patient/p9", withID(body, "p9")) // written between pages
	rest, _ := h.followPages(t, next)
	if !slices.Equal(rest, []string{"p2@1", "p1@1", "p0@1"}) {
		t.Errorf("second page after a concurrent write: %v", rest)
	}
}

func TestHistorySinceAndAt(t *testing.T) {
	c := &clock{}
	h := newHarness(t, func(cfg *fhirserver.Config) { cfg.Now = c.now })
	body := withID(fixture(t, "patient.json"), "x")
	c.set("2024-01-10T00:00:00Z")
	h.do("PUT", "/Patient/x", body) // v1
	c.set("2024-03-10T00:00:00Z")
	h.do("PUT", "/Patient/x", body) // v2
	c.set("2024-05-10T00:00:00Z")
	h.do("PUT", "/Patient/x", body) // v3
	c.set("2024-06-01T00:00:00Z")

	tests := []struct {
		query string
		want  []string
	}{
		{"_since=2024-03-10T00:00:00Z", []string{"x@3", "x@2"}},
		{"_since=2024-03-10T00:00:01Z", []string{"x@3"}},
		{"_since=2025-01-01T00:00:00Z", nil},
		// Current at that instant: v2 (written in March, replaced in May).
		{"_at=2024-04-01T00:00:00Z", []string{"x@2"}},
		// During February the current version was v1 throughout.
		{"_at=2024-02", []string{"x@1"}},
		// During March: v1 until the 10th, then v2.
		{"_at=2024-03", []string{"x@2", "x@1"}},
		{"_at=2023", nil},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			h.t = t
			got, _ := h.followPages(t, "/Patient/x/_history?"+tc.query)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.query, got, tc.want)
			}
		})
	}
}
