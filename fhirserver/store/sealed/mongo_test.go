package sealed

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	kmongo "github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
	"github.com/kiln-fhir/kiln/internal/canarytest"
)

// TestConformanceOnMongo runs the conformance suite against the sealed
// store over MongoDB, on the server MONGODB_URI names (skipped, saying
// so, without one), with the tests the sealed store refuses by design
// and those the MongoDB store's own suite does not run on FerretDB.
func TestConformanceOnMongo(t *testing.T) {
	srv := mongotest.Server(t)
	notRun := maps.Clone(refusedBySuite)
	if srv.FerretDB {
		notRun["Concurrency/ReadCASRetryLosesNoUpdate"] = "FerretDB loses concurrent compare-and-swap updates (not run by the MongoDB store's suite either)"
		notRun["Concurrency/RacingSameVersionOneWins"] = "FerretDB lets two racing updates of one version succeed (not run by the MongoDB store's suite either)"
	}
	keys := newTestKeys(t)
	cfg := keys.config("workforce")
	cfg.OpaqueID = anyID
	var mu sync.Mutex
	databases := map[store.Store]string{}
	open := func(t *testing.T, name string) store.Store {
		inner, err := kmongo.Open(t.Context(), kmongo.Config{URI: mongotest.URI(t), Database: name})
		if err != nil {
			t.Fatalf("open the MongoDB store: %v", err)
		}
		s := wrap(t, inner, cfg)
		if got, want := store.CapabilitiesOf(s, store.Capabilities), store.CapabilitiesOf(inner, store.Capabilities); !slices.Equal(got, want) {
			t.Fatalf("the sealed store has %v, MongoDB's %v", got, want)
		}
		mu.Lock()
		databases[s] = name
		mu.Unlock()
		return s
	}
	storetest.RunWith(t, func(t *testing.T) store.Store {
		name := mongotest.NewName()
		t.Cleanup(func() { mongotest.Drop(t, name) })
		return open(t, name)
	}, storetest.Options{
		NotRun: notRun,
		Reopen: func(t *testing.T, s store.Store) store.Store {
			mu.Lock()
			name := databases[s]
			mu.Unlock()
			return open(t, name)
		},
	})
}

// TestCanariesOnMongo: the canary values written through the sealed
// store over MongoDB are in no document of its database, as raw BSON
// (and, as the control, they are when written to the bare store).
func TestCanariesOnMongo(t *testing.T) {
	uri := mongotest.URI(t)
	for _, sealed := range []bool{true, false} {
		name := mongotest.NewName()
		t.Cleanup(func() { mongotest.Drop(t, name) })
		var s store.Store
		inner, err := kmongo.Open(t.Context(), kmongo.Config{URI: uri, Database: name})
		if err != nil {
			t.Fatal(err)
		}
		s = inner
		if sealed {
			s = wrap(t, inner, newTestKeys(t).config("workforce"))
		}
		writeCanaries(t, s, sealed)
		s.Close()
		hits := documentHits(t, uri, name)
		if sealed && len(hits) > 0 {
			t.Errorf("canaries readable in the MongoDB documents: %v", hits)
		}
		if !sealed {
			for _, c := range canaries {
				if !slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, c+": ") }) {
					t.Errorf("the bare store hid %q: the canary search is broken (hits %v)", c, hits)
				}
			}
		}
	}
}

// documentHits lists the canaries found in the raw BSON of any document
// of database name.
func documentHits(t *testing.T, uri, name string) []string {
	t.Helper()
	return canarytest.SweepMongo(t, uri, canaryValues(), 1, name)
}
