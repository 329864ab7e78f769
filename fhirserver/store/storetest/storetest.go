// Package storetest is the conformance suite of store.Store: every backend
// runs it from its own tests, so they all honour the same contract.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mybackend.Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite tests only what store.go promises. Expected results are derived
// from the contract (the writes the test made and their LastUpdated values),
// never from how a backend happens to behave.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Run runs every conformance test as a subtest of t. open must return a
// fresh, empty store each time it is called (once per subtest) and must not
// close it: the suite closes every store it opens, exactly once. Run gives
// no Options.Reopen, so the test of a sequence shared between handles
// fails: backends call RunWith with it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	RunWith(t, open, Options{})
}

// Options adapt the suite to a backend that cannot show some behaviour
// (a wire-compatible stand-in for the production server, say).
type Options struct {
	// NotRun maps "Group/Test" to why the backend cannot run it. Those
	// tests are skipped with that reason, and NotRun reports them, so
	// that nothing is left out silently.
	NotRun map[string]string
	// Reopen opens a second handle on the data of s, as another process
	// (or a restart) would: a new connection to the same file or
	// database. The tests of state shared between handles (the
	// Sequence group) use it; the suite closes the handle it returns.
	// Without it those tests fail: every backend must provide it.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Groups, when set, names the only groups to run ("Search",
	// "Records", …): a backend that runs the suite again under another
	// setting runs the groups that setting can change, not all of them.
	// An unknown name fails the test.
	Groups []string
}

// RunWith is Run with options.
func RunWith(t *testing.T, open func(t *testing.T) store.Store, o Options) {
	t.Helper()
	groups := []group{
		{"CRUD", crudTests},
		{"History", historyTests},
		{"Concurrency", concurrencyTests},
		{"Transact", transactTests},
		{"Lifecycle", lifecycleTests},
		{"Search", searchTests},
		{"Purge", purgeTests},
		{"Records", recordsTests},
		{"Sequence", sequenceTests},
		{"Rewrite", rewriteTests},
		{"BodyRewrite", bodyRewriteTests},
	}
	for _, name := range o.Groups {
		if !slices.ContainsFunc(groups, func(g group) bool { return g.name == name }) {
			t.Fatalf("storetest: no group %q", name)
		}
	}
	for _, g := range groups {
		if o.Groups != nil && !slices.Contains(o.Groups, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					if why, ok := o.NotRun[g.name+"/"+tc.name]; ok {
						t.Skipf("not run on this backend: %s", why)
					}
					h := newHandle(t, open)
					h.reopen = o.Reopen
					tc.run(t, h)
				})
			}
		})
	}
}

// group is a named list of subtests.
type group struct {
	name  string
	tests []test
}

// test is one conformance subtest; its name says what it proves.
type test struct {
	name string
	run  func(t *testing.T, h *handle)
}

// handle is the store under test plus the bookkeeping that lets the Close
// test close it without the cleanup closing it a second time.
type handle struct {
	store.Store
	closeOnce sync.Once
	closeErr  error
	// reopen is Options.Reopen.
	reopen func(t *testing.T, s store.Store) store.Store
}

func newHandle(t *testing.T, open func(t *testing.T) store.Store) *handle {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("storetest: open returned a nil store")
	}
	h := &handle{Store: s}
	t.Cleanup(func() {
		if err := h.close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

func (h *handle) close() error {
	h.closeOnce.Do(func() { h.closeErr = h.Store.Close() })
	return h.closeErr
}

// ctx bounds every call of a test, so that a backend that hangs fails the
// test instead of stalling the whole run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// base is an arbitrary fixed instant; tests place versions at offsets from it
// so that expected orders and filters follow from the test data alone.
var base = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// at is base plus n seconds.
func at(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

// body is a distinct JSON document per version, as the FHIR layer would
// store it.
func body(typ, id string, version int64) []byte {
	return fmt.Appendf(nil, `{"resourceType":%q,"id":%q,"meta":{"versionId":"%d"}}`, typ, id, version)
}

// write builds version `version` of typ/id at lu: a create for version 1, an
// update otherwise.
func write(typ, id string, version int64, lu time.Time) store.Write {
	m := store.MethodUpdate
	if version == 1 {
		m = store.MethodCreate
	}
	return store.Write{Type: typ, ID: id, Version: version, LastUpdated: lu, Method: m, Body: body(typ, id, version)}
}

// tombstone builds a delete of typ/id as version `version`.
func tombstone(typ, id string, version int64, lu time.Time) store.Write {
	return store.Write{Type: typ, ID: id, Version: version, LastUpdated: lu, Method: store.MethodDelete, Deleted: true}
}

func mustPut(t *testing.T, s store.Writer, ws ...store.Write) {
	t.Helper()
	for _, w := range ws {
		if err := s.Put(ctx(t), w); err != nil {
			t.Fatalf("Put %s/%s v%d: %v", w.Type, w.ID, w.Version, err)
		}
	}
}

func mustRead(t *testing.T, s store.Reader, typ, id string) *store.Version {
	t.Helper()
	v, err := s.Read(ctx(t), typ, id)
	if err != nil {
		t.Fatalf("Read %s/%s: %v", typ, id, err)
	}
	return v
}

func mustVRead(t *testing.T, s store.Reader, typ, id string, version int64) *store.Version {
	t.Helper()
	v, err := s.VRead(ctx(t), typ, id, version)
	if err != nil {
		t.Fatalf("VRead %s/%s/_history/%d: %v", typ, id, version, err)
	}
	return v
}

// wantErr fails unless err matches target through errors.Is.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one matching %v", what, err, target)
	}
}

// sameVersion reports how got differs from the write it should hold, or ""
// when it holds exactly that write (body byte for byte).
func sameVersion(got *store.Version, w store.Write) string {
	switch {
	case got == nil:
		return "nil version"
	case got.Type != w.Type || got.ID != w.ID || got.Version != w.Version:
		return fmt.Sprintf("got %s/%s v%d, want %s/%s v%d", got.Type, got.ID, got.Version, w.Type, w.ID, w.Version)
	case !got.LastUpdated.Equal(w.LastUpdated):
		return fmt.Sprintf("%s/%s v%d: LastUpdated %v, want %v", w.Type, w.ID, w.Version, got.LastUpdated, w.LastUpdated)
	case got.Method != w.Method:
		return fmt.Sprintf("%s/%s v%d: Method %q, want %q", w.Type, w.ID, w.Version, got.Method, w.Method)
	case got.Deleted != w.Deleted:
		return fmt.Sprintf("%s/%s v%d: Deleted %v, want %v", w.Type, w.ID, w.Version, got.Deleted, w.Deleted)
	case !bytes.Equal(got.Body, w.Body):
		return fmt.Sprintf("%s/%s v%d: Body %q, want %q", w.Type, w.ID, w.Version, got.Body, w.Body)
	}
	return ""
}

func wantVersion(t *testing.T, what string, got *store.Version, w store.Write) {
	t.Helper()
	if d := sameVersion(got, w); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
}

func ref(v *store.Version) string {
	return fmt.Sprintf("%s/%s/_history/%d", v.Type, v.ID, v.Version)
}
