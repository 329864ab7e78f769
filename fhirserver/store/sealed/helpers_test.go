package sealed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// testKeys are one partition's keys for a test run: a data-key ring and a
// blind-index ring, random and distinct.
type testKeys struct {
	ring  *crypt.Keyring
	blind *BlindKeys
}

func randomKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	ring, err := crypt.NewKeyring(map[uint32][]byte{1: randomKey()})
	if err != nil {
		t.Fatal(err)
	}
	blind, err := NewBlindKeys(map[uint32][]byte{1: randomKey()})
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{ring, blind}
}

// anyID lets every id stay plain in references, as the conformance
// suite's ids ("p1", "org1") are not UUIDs.
func anyID(string) bool { return true }

// params are the store's settings over these keys, for tests of its
// internals.
func (k testKeys) params(t testing.TB, partition string) *params {
	t.Helper()
	keys, err := FixedKeys(Rings{Data: k.ring, Blind: k.blind})
	if err != nil {
		t.Fatal(err)
	}
	return &params{partition: partition, keys: keys, opaque: IsUUID}
}

func (k testKeys) config(partition string) Config {
	return Config{Partition: partition, Keyring: k.ring, Blind: k.blind}
}

// openSQLite opens a SQLite store at path; the caller closes it.
func openSQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	return s
}

// wrap wraps inner with cfg, failing the test on an error.
func wrap(t testing.TB, inner store.Store, cfg Config) store.Store {
	t.Helper()
	s, err := New(inner, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// sealedSQLite is a sealed store over a new SQLite file in dir, with the
// inner store for looking at what was stored. The test closes it.
func sealedSQLite(t testing.TB, dir string, cfg Config) (store.Store, *sqlite.Store) {
	t.Helper()
	inner := openSQLite(t, filepath.Join(dir, "workforce.db"))
	s := wrap(t, inner, cfg)
	t.Cleanup(func() { s.Close() })
	return s, inner
}

var (
	registryOnce sync.Once
	registry     *search.Registry
	registryErr  error
)

// testRegistry is the core search registry, built once.
func testRegistry(t testing.TB) *search.Registry {
	t.Helper()
	registryOnce.Do(func() { registry, registryErr = search.NewRegistry() })
	if registryErr != nil {
		t.Fatal(registryErr)
	}
	return registry
}

// resourceWrite is version of the resource JSON body, with the index rows
// the FHIR service would extract from it.
func resourceWrite(t testing.TB, body string, version int64, lu time.Time) store.Write {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(body)))
	d.UseNumber()
	var res map[string]any
	if err := d.Decode(&res); err != nil {
		t.Fatalf("resource JSON: %v", err)
	}
	typ, _ := res["resourceType"].(string)
	id, _ := res["id"].(string)
	rows, err := testRegistry(t).ExtractRows(context.Background(), typ, res)
	if err != nil {
		t.Fatalf("ExtractRows %s: %v", typ, err)
	}
	m := store.MethodUpdate
	if version == 1 {
		m = store.MethodCreate
	}
	return store.Write{Type: typ, ID: id, Version: version, LastUpdated: lu, Method: m, Body: []byte(body), Index: &rows}
}

// parse parses a search on types as the FHIR service would.
func parse(t testing.TB, types []string, query string) *search.Query {
	t.Helper()
	vals, err := url.ParseQuery(query)
	if err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	p, err := testRegistry(t).Parse(types, vals, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatalf("Parse %q: %v", query, err)
	}
	return p.Query
}
