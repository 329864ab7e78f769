package fhirserver_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// hookStore runs before() once, at the next Transact or Put, before the
// store's writer is taken: what another request does while a write waits.
type hookStore struct {
	store.Store
	armed  atomic.Bool
	before func()
}

func (s *hookStore) Transact(ctx context.Context, fn func(tx store.Tx) error) error {
	if s.armed.CompareAndSwap(true, false) {
		s.before()
	}
	return s.Store.Transact(ctx, fn)
}

func (s *hookStore) Reindex(ctx context.Context, u []store.IndexUpdate) (int, error) {
	return s.Store.(store.Indexer).Reindex(ctx, u)
}

func (s *hookStore) Put(ctx context.Context, w store.Write) error {
	if s.armed.CompareAndSwap(true, false) {
		s.before()
	}
	return s.Store.Put(ctx, w)
}

// A transaction's rows are extracted before it takes the store's writer. A
// SearchParameter activated while it waits makes them stale: the entries
// are extracted again, so a resource committed after the parameter became
// active is indexed by it.
func TestTransactionWaitingWhileASearchParameterIsActivated(t *testing.T) {
	hs := &hookStore{Store: testStore(t)}
	h := newHarnessOn(t, hs)
	needsTransactions(t, h)
	hs.before = func() {
		if r := h.do("POST", "/SearchParameter", []byte(maritalParam)); r.status != http.StatusCreated {
			t.Errorf("create SearchParameter: %d %s", r.status, r.body)
		}
	}
	hs.armed.Store(true)
	b := bundleOf("transaction", postEntry(1, "Patient", marriedPatient("x")))
	res := responseEntries(t, h.do("POST", "", b), "transaction-response")
	expectStatuses(t, res, ints(201))
	_, id, _ := located(t, res[0].location)
	got := h.matchIDs(t, "Patient", "marital=http://terminology.hl7.org/CodeSystem/v3-MaritalStatus|M")
	if !slices.Contains(got, id) {
		t.Errorf("Patient/%s, committed after the SearchParameter was active, is not indexed by it: found %v", id, got)
	}
}

// The same for a single create, whose rows are extracted before the
// store's write.
func TestCreateWaitingWhileASearchParameterIsActivated(t *testing.T) {
	hs := &hookStore{Store: testStore(t)}
	h := newHarnessOn(t, hs)
	hs.before = func() {
		if r := h.do("POST", "/SearchParameter", []byte(maritalParam)); r.status != http.StatusCreated {
			t.Errorf("create SearchParameter: %d %s", r.status, r.body)
		}
	}
	hs.armed.Store(true)
	r := h.do("POST", "/Patient", marriedPatient("x"))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	_, id, _ := located(t, r.header.Get("Location"))
	got := h.matchIDs(t, "Patient", "marital=http://terminology.hl7.org/CodeSystem/v3-MaritalStatus|M")
	if !slices.Contains(got, id) {
		t.Errorf("Patient/%s, committed after the SearchParameter was active, is not indexed by it: found %v", id, got)
	}
}
