package store_test

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// TestBackendCapabilities: each backend implements the optional
// capabilities it is meant to, and no other. A capability added to
// store.Capabilities must be placed in this table, for both backends.
func TestBackendCapabilities(t *testing.T) {
	for _, c := range []struct {
		backend string
		store   reflect.Type
		want    []string
	}{
		{"sqlite", reflect.TypeFor[*sqlite.Store](), []string{"Indexer", "Records", "Sequencer", "Rewriter", "Forgetter", "Purger", "BodyRewriter"}},
		{"mongo", reflect.TypeFor[*mongo.Store](), []string{"Indexer", "Records", "Sequencer", "Rewriter", "Purger", "SecretKeeper", "BodyRewriter"}},
	} {
		if !c.store.Implements(reflect.TypeFor[store.Store]()) {
			t.Errorf("%s: %v is not a store.Store", c.backend, c.store)
		}
		var got []string
		for _, capability := range store.Capabilities {
			if c.store.Implements(capability) {
				got = append(got, capability.Name())
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s implements %v, want %v", c.backend, got, c.want)
		}
	}
}

// TestTxCapabilities: the SQLite transaction's view rewrites in place,
// which erasure inside a transaction needs. (MongoDB's is checked by the
// conformance suite's rewrite tests, against a server.)
func TestTxCapabilities(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	if err := st.Transact(t.Context(), func(tx store.Tx) error {
		got = store.CapabilitiesOf(tx, store.TxCapabilities)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Rewriter"}; !slices.Equal(got, want) {
		t.Errorf("the SQLite Tx implements %v, want %v", got, want)
	}
}

// embedding wraps a store the easy way, which keeps only the methods of
// store.Store: every optional capability is lost.
type embedding struct{ store.Store }

// forwarding wraps a SQLite store keeping its whole method set.
type forwarding struct{ *sqlite.Store }

// TestDroppedCapabilities: a wrapper that hides its inner store's
// capabilities is caught, one that forwards them passes.
func TestDroppedCapabilities(t *testing.T) {
	inner := (*sqlite.Store)(nil)
	if got, want := store.Dropped(inner, embedding{}, store.Capabilities), store.CapabilitiesOf(inner, store.Capabilities); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("an embedding wrapper dropped %v, want every capability of SQLite %v", got, want)
	}
	if got := store.Dropped(inner, forwarding{}, store.Capabilities); len(got) != 0 {
		t.Errorf("a forwarding wrapper dropped %v, want none", got)
	}
}
