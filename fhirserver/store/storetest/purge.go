package storetest

import (
	"errors"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var purgeTests = []test{
	{"RemovesEveryVersionOfOldResourcesOnly", testPurge},
}

// testPurge: resources whose current version is older than the cut-off go
// with all their versions and index rows, at most limit per call; newer
// ones and other types stay.
func testPurge(t *testing.T, s *handle) {
	p, ok := s.Store.(store.Purger)
	if !ok {
		t.Fatalf("the backend (%T) does not implement store.Purger, which every backend must", s.Store)
	}
	a := indexed("AuditEvent", "a", 1, search.Rows{Keys: []string{"type" + sep + "rest"}})
	b1 := write("AuditEvent", "b", 1, at(2))
	b2 := write("AuditEvent", "b", 2, at(5))
	c := indexed("AuditEvent", "c", 10, search.Rows{Keys: []string{"type" + sep + "rest"}})
	other := write("Patient", "p", 1, at(1))
	mustPut(t, s, a, b1, b2, c, other)

	n, err := p.Purge(ctx(t), "AuditEvent", at(6), 1)
	if err != nil || n != 1 {
		t.Fatalf("Purge limit 1: %d, %v; want 1", n, err)
	}
	n, err = p.Purge(ctx(t), "AuditEvent", at(6), 10)
	if err != nil || n != 1 {
		t.Fatalf("Purge the rest: %d, %v; want 1", n, err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Read(ctx(t), "AuditEvent", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Read AuditEvent/%s after the purge: %v", id, err)
		}
	}
	if _, err := s.VRead(ctx(t), "AuditEvent", "b", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("VRead of a purged version: %v", err)
	}
	wantVersion(t, "AuditEvent/c stays", mustRead(t, s, "AuditEvent", "c"), c)
	wantVersion(t, "another type stays", mustRead(t, s, "Patient", "p"), other)
	page, err := s.History(ctx(t), store.HistoryQuery{Type: "AuditEvent", Count: 10})
	if err != nil || len(page.Versions) != 1 || page.Versions[0].ID != "c" {
		t.Fatalf("history after the purge: %v, %v", page, err)
	}
	res, err := s.Search(ctx(t), &search.Query{Types: []string{"AuditEvent"}, Count: 10,
		Where: []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{"type" + sep + "rest"}}}}}})
	if err != nil || len(res.Matches) != 1 || res.Matches[0].ID != "c" {
		t.Fatalf("search after the purge: %v, %v", res, err)
	}
	if n, err := p.Purge(ctx(t), "AuditEvent", at(6), 10); err != nil || n != 0 {
		t.Errorf("a second purge: %d, %v; want 0", n, err)
	}
}
