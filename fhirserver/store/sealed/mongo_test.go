package sealed

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	kmongo "github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
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
				if !slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, c+" in ") }) {
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
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	db := c.Database(name)
	colls, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var hits []string
	docs := 0
	for _, coll := range colls {
		cur, err := db.Collection(coll).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			docs++
			data := asciiLower(cur.Current)
			for _, canary := range canaries {
				for _, n := range needles(canary) {
					if bytes.Contains(data, n) {
						hits = append(hits, fmt.Sprintf("%s in %s", canary, coll))
						break
					}
				}
			}
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		cur.Close(ctx)
	}
	if docs == 0 {
		t.Fatalf("no document in %s", name)
	}
	return hits
}
