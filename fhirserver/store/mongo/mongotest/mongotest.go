// Package mongotest opens throwaway MongoDB stores for tests: a fresh
// database per store on the server MONGODB_URI names, dropped afterwards.
// It also keeps the list of tests a server cannot run (FerretDB, the
// stand-in CI uses, lacks transactions and more), printed by Report so
// that nothing is skipped silently.
package mongotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	kmongo "github.com/kiln-fhir/kiln/fhirserver/store/mongo"
)

// URI is MONGODB_URI; tests skip when it is empty (make test has no
// server; make test-mongo refuses to run without one).
func URI(t testing.TB) string {
	t.Helper()
	u := os.Getenv("MONGODB_URI")
	if u == "" {
		t.Skip("MONGODB_URI is not set: the MongoDB store tests need a server (see make test-mongo)")
	}
	return u
}

// Open returns a store on a new database, dropped when the test ends.
func Open(t testing.TB) *kmongo.Store {
	t.Helper()
	uri := URI(t)
	name := NewName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := kmongo.Open(ctx, kmongo.Config{URI: uri, Database: name})
	if err != nil {
		t.Fatalf("open the MongoDB store at MONGODB_URI: %v", err)
	}
	t.Cleanup(func() { Drop(t, name) })
	return st
}

// NewName is a fresh database name (or prefix) for one test.
func NewName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "kiln_test_" + hex.EncodeToString(b)
}

// Drop drops database name on the server at MONGODB_URI.
func Drop(t testing.TB, name string) {
	uri := URI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Logf("drop %s: %v", name, err)
		return
	}
	defer c.Disconnect(ctx)
	if err := c.Database(name).Drop(ctx); err != nil {
		t.Logf("drop %s: %v", name, err)
	}
}

// Server says what the server at MONGODB_URI offers.
func Server(t testing.TB) kmongo.Server {
	t.Helper()
	st := Open(t)
	defer st.Close()
	return st.Server()
}

var (
	mu     sync.Mutex
	notRun = map[string]string{}
)

// NotRun records that test was not run, and why.
func NotRun(test, why string) {
	mu.Lock()
	defer mu.Unlock()
	notRun[test] = why
}

// Report prints the tests that were not run to w, and appends them to the
// file KILN_NOT_RUN names if it is set: go test shows a passing package's
// output only with -v, so make test-mongo prints that file at the end.
func Report(w io.Writer) {
	mu.Lock()
	defer mu.Unlock()
	if len(notRun) == 0 {
		return
	}
	if path := os.Getenv("KILN_NOT_RUN"); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			defer f.Close()
			w = io.MultiWriter(w, f)
		}
	}
	fmt.Fprintf(w, "\nNOT RUN on this MongoDB-wire server (%d):\n", len(notRun))
	names := make([]string, 0, len(notRun))
	for n := range notRun {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  - %s: %s\n", n, notRun[n])
	}
}
