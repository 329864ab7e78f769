package storetest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// bodyRewriteTests prove the store.BodyRewriter contract (the in-place
// replacement a key rotation makes). A backend without it skips them.
var bodyRewriteTests = []test{
	{"ReplacesTheBodyAlone", testReplaceBodyAlone},
	{"SkipsChangedMissingAndTombstones", testReplaceBodySkips},
	{"RecordValuesKeepVersionAndExpiry", testReplaceRecordValues},
	{"KindsAndCounts", testKindsAndCounts},
	{"InvalidReplacementsRefused", testReplaceInvalid},
}

func bodyRewriterOf(t *testing.T, h *handle) store.BodyRewriter {
	t.Helper()
	b, ok := h.Store.(store.BodyRewriter)
	if !ok {
		t.Skipf("the backend (%T) does not implement store.BodyRewriter", h.Store)
	}
	return b
}

func replaced(tag string, typ, id string, version int64) []byte {
	return append(body(typ, id, version)[:0:0], `{"replaced":"`+tag+`"}`...)
}

// testReplaceBodyAlone: the bodies of an old and of the current version
// are replaced; numbers, times, methods, the history order and the index
// rows (the current version's found by its old key, the old version's
// rows not back) stay as they were.
func testReplaceBodyAlone(t *testing.T, h *handle) {
	b := bodyRewriterOf(t, h)
	v1, v2 := write("Patient", "a", 1, at(1)), write("Patient", "a", 2, at(2))
	v1.Index, v2.Index = keyRows("family"+sep+"one"), keyRows("family"+sep+"two")
	other := write("Patient", "b", 1, at(3))
	mustPut(t, h, v1, v2, other)
	n, err := b.RewriteBodies(ctx(t), []store.Replacement{
		{Type: "Patient", ID: "a", Version: 1, Old: v1.Body, New: replaced("a1", "Patient", "a", 1)},
		{Type: "Patient", ID: "a", Version: 2, Old: v2.Body, New: replaced("a2", "Patient", "a", 2)},
	})
	if err != nil || n != 2 {
		t.Fatalf("RewriteBodies = %d, %v; want 2, nil", n, err)
	}
	for _, c := range []struct {
		w    store.Write
		want []byte
	}{{v1, replaced("a1", "Patient", "a", 1)}, {v2, replaced("a2", "Patient", "a", 2)}, {other, other.Body}} {
		got := mustVRead(t, h, c.w.Type, c.w.ID, c.w.Version)
		if !bytes.Equal(got.Body, c.want) || !got.LastUpdated.Equal(c.w.LastUpdated) || got.Method != c.w.Method || got.Deleted {
			t.Errorf("VRead %s/%s v%d = %s %v %s %v, want %s at %v by %s", c.w.Type, c.w.ID, c.w.Version,
				got.Body, got.LastUpdated, got.Method, got.Deleted, c.want, c.w.LastUpdated, c.w.Method)
		}
	}
	if cur := mustRead(t, h, "Patient", "a"); cur.Version != 2 || !bytes.Equal(cur.Body, replaced("a2", "Patient", "a", 2)) {
		t.Errorf("Read = v%d %s, want v2 with the new body", cur.Version, cur.Body)
	}
	page, err := h.History(ctx(t), store.HistoryQuery{Type: "Patient", ID: "a", Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for _, v := range page.Versions {
		order = append(order, v.Version)
	}
	if !slices.Equal(order, []int64{2, 1}) {
		t.Errorf("history after the replacement: versions %v, want [2 1]", order)
	}
	sameSet(t, "search by the current version's key (its rows stay)", found(t, h, keyQuery("Patient", "family"+sep+"two")), []string{"Patient/a"})
	sameSet(t, "search by the old version's key", found(t, h, keyQuery("Patient", "family"+sep+"one")), nil)
}

// testReplaceBodySkips: a replacement whose old bytes differ from the
// stored body, of a version that does not exist, or of a tombstone, is
// skipped; the others in the same call apply.
func testReplaceBodySkips(t *testing.T, h *handle) {
	b := bodyRewriterOf(t, h)
	v1 := write("Observation", "o", 1, at(1))
	gone := tombstone("Observation", "o", 2, at(2))
	mustPut(t, h, v1, gone)
	n, err := b.RewriteBodies(ctx(t), []store.Replacement{
		{Type: "Observation", ID: "o", Version: 1, Old: []byte(`{"not":"it"}`), New: []byte(`{"x":1}`)},
		{Type: "Observation", ID: "o", Version: 2, Old: v1.Body, New: []byte(`{"x":2}`)},
		{Type: "Observation", ID: "o", Version: 3, Old: v1.Body, New: []byte(`{"x":3}`)},
		{Type: "Observation", ID: "nobody", Version: 1, Old: v1.Body, New: []byte(`{"x":4}`)},
	})
	if err != nil || n != 0 {
		t.Fatalf("RewriteBodies of stale, tombstone and missing versions = %d, %v; want 0, nil", n, err)
	}
	if got := mustVRead(t, h, "Observation", "o", 1); !bytes.Equal(got.Body, v1.Body) {
		t.Errorf("a replacement with other old bytes applied: %s", got.Body)
	}
	if got := mustVRead(t, h, "Observation", "o", 2); !got.Deleted || len(got.Body) != 0 {
		t.Errorf("the tombstone became %+v", got)
	}
	if _, err := h.VRead(ctx(t), "Observation", "o", 3); err == nil {
		t.Error("a replacement created version 3")
	}
	n, err = b.RewriteBodies(ctx(t), []store.Replacement{
		{Type: "Observation", ID: "o", Version: 1, Old: []byte(`{"not":"it"}`), New: []byte(`{"x":1}`)},
		{Type: "Observation", ID: "o", Version: 1, Old: v1.Body, New: []byte(`{"x":5}`)},
	})
	if err != nil || n != 1 {
		t.Fatalf("RewriteBodies of one stale and one good replacement = %d, %v; want 1, nil", n, err)
	}
	if got := mustVRead(t, h, "Observation", "o", 1); string(got.Body) != `{"x":5}` {
		t.Errorf("body %s, want {\"x\":5}", got.Body)
	}
}

// testReplaceRecordValues: a record's value is replaced when its version
// and value are still the ones named; the version and expiry stay, and a
// later PutRecord of the next version still succeeds.
func testReplaceRecordValues(t *testing.T, h *handle) {
	b := bodyRewriterOf(t, h)
	rec := recordsOf(t, h)
	exp := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	a := store.Record{Kind: "k1", ID: "a", Version: 1, Value: []byte("va")}
	a2 := a
	a2.Version, a2.Value, a2.Expires = 2, []byte("va2"), exp
	c := store.Record{Kind: "k1", ID: "c", Version: 1, Value: []byte("vc")}
	dead := store.Record{Kind: "k1", ID: "dead", Version: 1, Value: []byte("vd"), Expires: time.Now().Add(-time.Minute)}
	mustPutRecord(t, rec, a, a2, c, dead)
	n, err := b.RewriteRecordValues(ctx(t), []store.Replacement{
		{Type: "k1", ID: "a", Version: 2, Old: []byte("va2"), New: []byte("new a")},
		{Type: "k1", ID: "c", Version: 1, Old: []byte("other"), New: []byte("new c")},
		{Type: "k1", ID: "c", Version: 2, Old: []byte("vc"), New: []byte("new c")},
		{Type: "k1", ID: "dead", Version: 1, Old: []byte("vd"), New: []byte("new d")},
		{Type: "k1", ID: "none", Version: 1, Old: []byte("x"), New: []byte("y")},
	})
	if err != nil || n != 1 {
		t.Fatalf("RewriteRecordValues = %d, %v; want 1, nil", n, err)
	}
	wantRecord(t, "the replaced record", mustGetRecord(t, rec, "k1", "a"), store.Record{Kind: "k1", ID: "a", Version: 2, Value: []byte("new a"), Expires: exp})
	wantRecord(t, "a record named with other old bytes or version", mustGetRecord(t, rec, "k1", "c"), c)
	wantRecordNotFound(t, rec, "k1", "dead")
	mustPutRecord(t, rec, store.Record{Kind: "k1", ID: "a", Version: 3, Value: []byte("va3")})
}

// testKindsAndCounts: RecordKinds lists each kind once, ascending;
// CountVersions counts every version, tombstones included.
func testKindsAndCounts(t *testing.T, h *handle) {
	b := bodyRewriterOf(t, h)
	if n, err := b.CountVersions(ctx(t)); err != nil || n != 0 {
		t.Fatalf("CountVersions of an empty store = %d, %v", n, err)
	}
	if kinds, err := b.RecordKinds(ctx(t)); err != nil || len(kinds) != 0 {
		t.Fatalf("RecordKinds of an empty store = %v, %v", kinds, err)
	}
	mustPut(t, h, write("Patient", "a", 1, at(1)), write("Patient", "a", 2, at(2)), tombstone("Patient", "a", 3, at(3)),
		write("Observation", "o", 1, at(4)))
	rec := recordsOf(t, h)
	mustPutRecord(t, rec, store.Record{Kind: "zeta", ID: "1", Version: 1, Value: []byte("z")},
		store.Record{Kind: "alpha", ID: "1", Version: 1, Value: []byte("a")},
		store.Record{Kind: "alpha", ID: "2", Version: 1, Value: []byte("a")},
		store.Record{Kind: "Mid", ID: "1", Version: 1, Value: []byte("m")})
	if n, err := b.CountVersions(ctx(t)); err != nil || n != 4 {
		t.Errorf("CountVersions = %d, %v; want 4", n, err)
	}
	kinds, err := b.RecordKinds(ctx(t))
	if err != nil || !slices.Equal(kinds, []string{"Mid", "alpha", "zeta"}) {
		t.Errorf("RecordKinds = %v, %v; want [Mid alpha zeta]", kinds, err)
	}
}

// testReplaceInvalid: a replacement without type, id, version or bytes
// is a caller bug: an error, and nothing of the call applies.
func testReplaceInvalid(t *testing.T, h *handle) {
	b := bodyRewriterOf(t, h)
	v1 := write("Patient", "a", 1, at(1))
	mustPut(t, h, v1)
	good := store.Replacement{Type: "Patient", ID: "a", Version: 1, Old: v1.Body, New: []byte(`{"x":1}`)}
	for _, bad := range []store.Replacement{
		{ID: "a", Version: 1, Old: v1.Body, New: []byte("x")},
		{Type: "Patient", Version: 1, Old: v1.Body, New: []byte("x")},
		{Type: "Patient", ID: "a", Old: v1.Body, New: []byte("x")},
		{Type: "Patient", ID: "a", Version: 1, New: []byte("x")},
		{Type: "Patient", ID: "a", Version: 1, Old: v1.Body},
	} {
		if _, err := b.RewriteBodies(ctx(t), []store.Replacement{good, bad}); err == nil {
			t.Errorf("RewriteBodies accepted %+v", bad)
		}
		if _, err := b.RewriteRecordValues(ctx(t), []store.Replacement{bad}); err == nil {
			t.Errorf("RewriteRecordValues accepted %+v", bad)
		}
	}
	if got := mustVRead(t, h, "Patient", "a", 1); !bytes.Equal(got.Body, v1.Body) {
		t.Errorf("a call with an invalid replacement applied another: %s", got.Body)
	}
}
