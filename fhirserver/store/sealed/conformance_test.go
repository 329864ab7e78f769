package sealed

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
)

// refusedBySuite are the conformance tests that search by prefix, by
// range or by sort value: the sealed store refuses those searches by
// design (TestRefusals), so these tests cannot pass. Their equality
// cases run in TestEqualitySearch.
var refusedBySuite = map[string]string{
	"Search/Keys":                            "prefix and :contains matches are refused (the blind index holds keyed hashes of whole values)",
	"Search/Dates":                           "date comparisons are refused (no date rows but _lastUpdated's)",
	"Search/Numbers":                         "number comparisons are refused (no number rows)",
	"Search/MissingChainsAndHas":             "one case chains to a prefix match, which is refused",
	"Search/TombstonesAndUpdatesReplaceRows": "its cases search by prefix and by date, which are refused",
	"Search/SortOrders":                      "_sort by a parameter's values is refused (sort rows keep no values)",
	"Search/PagingForwardAndBack":            "it pages the sort cases, refused",
	"Search/PagingStableWhileInserting":      "it sorts by a parameter's values, refused",
	"Search/CountZeroAndTotals":              "it counts a prefix match, refused",
	"Search/GarbageCursorIsErrBadCursor":     "its cursors come from a _sort by a string, refused",
}

// TestConformance runs the store conformance suite against the sealed
// store over SQLite.
func TestConformance(t *testing.T) {
	keys := newTestKeys(t)
	cfg := keys.config("workforce")
	cfg.OpaqueID = anyID
	var mu sync.Mutex
	paths := map[store.Store]string{}
	open := func(t *testing.T, path string) store.Store {
		s := wrap(t, openSQLite(t, path), cfg)
		mu.Lock()
		paths[s] = path
		mu.Unlock()
		return s
	}
	storetest.RunWith(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "workforce.db"))
	}, storetest.Options{
		NotRun: refusedBySuite,
		Reopen: func(t *testing.T, s store.Store) store.Store {
			mu.Lock()
			path := paths[s]
			mu.Unlock()
			return open(t, path)
		},
	})
}

// TestCapabilitiesOfSQLite: over SQLite, the sealed store and its
// transactions have every optional capability SQLite's have, no more.
func TestCapabilitiesOfSQLite(t *testing.T) {
	inner := openSQLite(t, filepath.Join(t.TempDir(), "caps.db"))
	s := wrap(t, inner, newTestKeys(t).config("workforce"))
	defer s.Close()
	if d := store.Dropped(inner, s, store.Capabilities); len(d) != 0 {
		t.Errorf("the sealed store dropped %v", d)
	}
	if got, want := store.CapabilitiesOf(s, store.Capabilities), store.CapabilitiesOf(inner, store.Capabilities); !slices.Equal(got, want) {
		t.Errorf("the sealed store has %v, SQLite %v", got, want)
	}
	var innerTx, sealedTx []string
	if err := inner.Transact(t.Context(), func(tx store.Tx) error {
		innerTx = store.CapabilitiesOf(tx, store.TxCapabilities)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(t.Context(), func(tx store.Tx) error {
		sealedTx = store.CapabilitiesOf(tx, store.TxCapabilities)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(innerTx) == 0 || !slices.Equal(sealedTx, innerTx) {
		t.Errorf("the sealed transaction has %v, SQLite's %v", sealedTx, innerTx)
	}
}

// everyCapability is a store type with all optional capabilities, for
// type checks only (its SQLite store is nil).
type everyCapability struct{ *sqlite.Store }

func (everyCapability) Secret(context.Context, string, int) ([]byte, error) { return nil, nil }

// TestCapabilitiesOfEverySet: for each set of optional capabilities, a
// store with exactly that set, wrapped, keeps exactly that set. The
// inner stores are the sealed store's own types (combos), each checked
// first to have its set.
func TestCapabilitiesOfEverySet(t *testing.T) {
	if len(capabilityNames) != len(store.Capabilities) {
		t.Fatalf("the sealed store knows %d optional capabilities, store.Capabilities lists %d: add the new one to caps.go and run go generate", len(capabilityNames), len(store.Capabilities))
	}
	for i, c := range store.Capabilities {
		if capabilityNames[i] != c.Name() {
			t.Fatalf("capability %d is %s in store.Capabilities, %s in caps.go", i, c.Name(), capabilityNames[i])
		}
	}
	if len(combos) != 1<<len(capabilityNames) {
		t.Fatalf("caps_gen.go has %d sets, want %d: run go generate", len(combos), 1<<len(capabilityNames))
	}
	keys := newTestKeys(t)
	full := &core{inner: everyCapability{}}
	full.view = view{p: keys.params(t, "workforce")}
	if got := capabilityMask(everyCapability{}); got != len(combos)-1 {
		t.Fatalf("the test's full store has mask %#x", got)
	}
	for m, makeStore := range combos {
		var want []string
		for i, name := range capabilityNames {
			if m&(1<<i) != 0 {
				want = append(want, name)
			}
		}
		inner := makeStore(full)
		if got := store.CapabilitiesOf(inner, store.Capabilities); !slices.Equal(got, want) {
			t.Fatalf("set %#x: the type has %v, want %v", m, got, want)
		}
		outer := wrap(t, inner, keys.config("workforce"))
		if got := store.CapabilitiesOf(outer, store.Capabilities); !slices.Equal(got, want) {
			t.Errorf("set %#x: the sealed store has %v, want %v", m, got, want)
		}
	}
}

// TestTxCapabilities: the sealed transaction knows every optional
// capability of a transaction's view.
func TestTxCapabilities(t *testing.T) {
	known := []reflect.Type{reflect.TypeFor[store.Rewriter]()}
	if !slices.Equal(store.TxCapabilities, known) {
		t.Fatalf("store.TxCapabilities is %v; the sealed store's Transact passes on %v: add the new one", store.TxCapabilities, known)
	}
}
