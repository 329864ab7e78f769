package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// recordsTests prove the store.Records contract. A backend that does not
// implement store.Records skips them.
var recordsTests = []test{
	{"CreateAndReadBackByteForByte", testRecordRoundTrip},
	{"CompareAndSwapVersions", testRecordCAS},
	{"CreateOfExistingIsConflict", testRecordCreateExisting},
	{"ExpiredIsInvisibleAndRecreatable", testRecordExpired},
	{"ListOrderedByIDSkipsExpiredAndOtherKinds", testRecordList},
	{"DeleteIsIdempotent", testRecordDelete},
	{"InvalidRecordsRejected", testRecordInvalid},
	{"CancelledContextWritesNothing", testRecordCancelled},
}

// recordsOf returns the store as store.Records, which every backend is.
func recordsOf(t *testing.T, h *handle) store.Records {
	t.Helper()
	r, ok := h.Store.(store.Records)
	if !ok {
		t.Fatalf("the backend (%T) does not implement store.Records, which every backend must", h.Store)
	}
	return r
}

func mustPutRecord(t *testing.T, s store.Records, rs ...store.Record) {
	t.Helper()
	for _, r := range rs {
		if err := s.PutRecord(ctx(t), r); err != nil {
			t.Fatalf("PutRecord %s/%s v%d: %v", r.Kind, r.ID, r.Version, err)
		}
	}
}

func mustGetRecord(t *testing.T, s store.Records, kind, id string) *store.Record {
	t.Helper()
	r, err := s.GetRecord(ctx(t), kind, id)
	if err != nil {
		t.Fatalf("GetRecord %s/%s: %v", kind, id, err)
	}
	return r
}

func wantRecordNotFound(t *testing.T, s store.Records, kind, id string) {
	t.Helper()
	r, err := s.GetRecord(ctx(t), kind, id)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRecord %s/%s: got %+v, %v; want ErrNotFound", kind, id, r, err)
	}
}

// sameRecord reports how got differs from want ("" when it does not).
// Backends keep expiries to the microsecond, rounded down.
func sameRecord(got *store.Record, want store.Record) string {
	wantExp := want.Expires
	if !wantExp.IsZero() {
		wantExp = wantExp.Truncate(time.Microsecond)
	}
	switch {
	case got == nil:
		return "nil record"
	case got.Kind != want.Kind || got.ID != want.ID || got.Version != want.Version:
		return fmt.Sprintf("got %s/%s v%d, want %s/%s v%d", got.Kind, got.ID, got.Version, want.Kind, want.ID, want.Version)
	case !bytes.Equal(got.Value, want.Value):
		return fmt.Sprintf("%s/%s v%d: Value %q, want %q", want.Kind, want.ID, want.Version, got.Value, want.Value)
	case got.Expires.IsZero() != wantExp.IsZero() || !got.Expires.Equal(wantExp):
		return fmt.Sprintf("%s/%s v%d: Expires %v, want %v", want.Kind, want.ID, want.Version, got.Expires, wantExp)
	}
	return ""
}

func wantRecord(t *testing.T, what string, got *store.Record, want store.Record) {
	t.Helper()
	if d := sameRecord(got, want); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
}

// testRecordRoundTrip proves values come back byte for byte (binary
// bytes included) with their version and expiry.
func testRecordRoundTrip(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	rs := []store.Record{
		{Kind: "user", ID: "alice@example.org", Version: 1, Value: []byte(`{"name":"Alice","roles":["clinician"]}`)},
		{Kind: "key", ID: "k1", Version: 1, Value: binary},
		{Kind: "token", ID: "t\u00e9-1", Version: 1, Value: []byte{0}, Expires: time.Now().Add(time.Hour).Add(123 * time.Nanosecond)},
	}
	mustPutRecord(t, s, rs...)
	for _, r := range rs {
		got := mustGetRecord(t, s, r.Kind, r.ID)
		wantRecord(t, "GetRecord after create", got, r)
		if !got.Expires.IsZero() && got.Expires.Location() != time.UTC {
			t.Errorf("GetRecord %s/%s: Expires in %v, want UTC", r.Kind, r.ID, got.Expires.Location())
		}
	}
	wantRecordNotFound(t, s, "user", "bob@example.org")
	wantRecordNotFound(t, s, "client", "alice@example.org")
}

// testRecordCAS proves PutRecord applies only Version == current+1 and a
// rejected write leaves the record alone.
func testRecordCAS(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	v1 := store.Record{Kind: "client", ID: "c1", Version: 1, Value: []byte("one")}
	mustPutRecord(t, s, v1)
	v2 := store.Record{Kind: "client", ID: "c1", Version: 2, Value: []byte("two"), Expires: time.Now().Add(time.Hour)}
	mustPutRecord(t, s, v2)
	wantRecord(t, "GetRecord after update", mustGetRecord(t, s, "client", "c1"), v2)

	for _, st := range []struct {
		what string
		r    store.Record
	}{
		{"stale update (Version 2 while current is 2)", store.Record{Kind: "client", ID: "c1", Version: 2, Value: []byte("stale")}},
		{"skip a version (Version 4 while current is 2)", store.Record{Kind: "client", ID: "c1", Version: 4, Value: []byte("skip")}},
		{"update of an absent record (Version 2)", store.Record{Kind: "client", ID: "c2", Version: 2, Value: []byte("absent")}},
	} {
		wantErr(t, st.what, s.PutRecord(ctx(t), st.r), store.ErrConflict)
	}
	wantRecord(t, "GetRecord after rejected writes", mustGetRecord(t, s, "client", "c1"), v2)
	wantRecordNotFound(t, s, "client", "c2")

	// Clearing the expiry is an update like any other.
	v3 := store.Record{Kind: "client", ID: "c1", Version: 3, Value: []byte("three")}
	mustPutRecord(t, s, v3)
	wantRecord(t, "GetRecord after clearing the expiry", mustGetRecord(t, s, "client", "c1"), v3)
}

// testRecordCreateExisting proves a second create of an id (live, with or
// without an expiry) is ErrConflict, and that the same id under another
// kind is another record.
func testRecordCreateExisting(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	a := store.Record{Kind: "user", ID: "u1", Version: 1, Value: []byte("first")}
	b := store.Record{Kind: "user", ID: "u2", Version: 1, Value: []byte("first"), Expires: time.Now().Add(time.Hour)}
	mustPutRecord(t, s, a, b)
	for _, r := range []store.Record{a, b} {
		again := r
		again.Value = []byte("second")
		wantErr(t, "create of existing "+r.ID, s.PutRecord(ctx(t), again), store.ErrConflict)
		wantRecord(t, "GetRecord after rejected create", mustGetRecord(t, s, r.Kind, r.ID), r)
	}
	other := store.Record{Kind: "client", ID: "u1", Version: 1, Value: []byte("client")}
	mustPutRecord(t, s, other)
	wantRecord(t, "GetRecord of the same id under another kind", mustGetRecord(t, s, "client", "u1"), other)
	wantRecord(t, "GetRecord of the first kind", mustGetRecord(t, s, "user", "u1"), a)
}

// testRecordExpired proves an expired record is absent for every method:
// GetRecord, ListRecords and PutRecord's compare-and-swap (only Version 1
// applies, and replaces it).
func testRecordExpired(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	gone := store.Record{Kind: "jti", ID: "gone", Version: 1, Value: []byte("x"), Expires: time.Now().Add(-time.Second)}
	mustPutRecord(t, s, gone)
	wantRecordNotFound(t, s, "jti", "gone")

	// Updated to version 3 while live, then expired: still counts as absent.
	old := store.Record{Kind: "jti", ID: "old", Version: 1, Value: []byte("v1")}
	mustPutRecord(t, s, old)
	old2 := store.Record{Kind: "jti", ID: "old", Version: 2, Value: []byte("v2"), Expires: time.Now().Add(-time.Millisecond)}
	mustPutRecord(t, s, old2)
	wantRecordNotFound(t, s, "jti", "old")

	// Live, then absent once its time has passed, with no write between.
	// The put and the get must both land within the record's life, which
	// on a loaded CI machine under the race detector can take more than
	// 50 ms: the life starts at 100 ms and doubles until they do, so a
	// quiet machine waits a tenth of a second, not a second.
	var soon store.Record
	for life := 100 * time.Millisecond; ; life *= 2 {
		soon = store.Record{Kind: "jti", ID: fmt.Sprint("soon", life.Milliseconds()), Version: 1, Value: []byte("y"), Expires: time.Now().Add(life)}
		mustPutRecord(t, s, soon)
		got, err := s.GetRecord(ctx(t), "jti", soon.ID)
		if time.Now().Before(soon.Expires) {
			if err != nil {
				t.Fatalf("GetRecord before expiry: %v", err)
			}
			wantRecord(t, "GetRecord before expiry", got, soon)
			break
		}
		if life > 5*time.Second {
			t.Fatalf("a put and a get took more than %v", life)
		}
	}
	time.Sleep(time.Until(soon.Expires) + 50*time.Millisecond)
	wantRecordNotFound(t, s, "jti", soon.ID)

	list, err := s.ListRecords(ctx(t), "jti")
	if err != nil {
		t.Fatalf("ListRecords: %v", err)
	}
	if len(list) != 0 {
		t.Fatalf("ListRecords of expired records: got %d records (first %s), want none", len(list), list[0].ID)
	}

	for _, id := range []string{"gone", "old", soon.ID} {
		wantErr(t, "update of expired "+id, s.PutRecord(ctx(t), store.Record{Kind: "jti", ID: id, Version: 2, Value: []byte("z")}), store.ErrConflict)
		wantRecordNotFound(t, s, "jti", id)
		fresh := store.Record{Kind: "jti", ID: id, Version: 1, Value: []byte("fresh " + id)}
		mustPutRecord(t, s, fresh)
		wantRecord(t, "GetRecord after re-create of expired "+id, mustGetRecord(t, s, "jti", id), fresh)
		next := store.Record{Kind: "jti", ID: id, Version: 2, Value: []byte("next " + id)}
		mustPutRecord(t, s, next)
		wantRecord(t, "GetRecord after update of re-created "+id, mustGetRecord(t, s, "jti", id), next)
	}
}

// testRecordList proves ListRecords returns the live records of one kind,
// ordered by ID in byte order.
func testRecordList(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	live := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Second)
	put := []store.Record{
		{Kind: "key", ID: "b", Version: 1, Value: []byte("b")},
		{Kind: "key", ID: "a", Version: 1, Value: []byte("a"), Expires: live},
		{Kind: "key", ID: "c", Version: 1, Value: []byte("c")},
		{Kind: "key", ID: "B", Version: 1, Value: []byte("B")},
		{Kind: "key", ID: "a0", Version: 1, Value: []byte("a0")},
		{Kind: "key", ID: "aa", Version: 1, Value: []byte("expired"), Expires: past},
		{Kind: "key2", ID: "a1", Version: 1, Value: []byte("other kind")},
		{Kind: "ke", ID: "a2", Version: 1, Value: []byte("prefix kind")},
	}
	mustPutRecord(t, s, put...)
	// b gets a second version: the list holds current versions.
	b2 := store.Record{Kind: "key", ID: "b", Version: 2, Value: []byte("b2")}
	mustPutRecord(t, s, b2)

	want := []store.Record{put[3], put[1], put[4], b2, put[2]} // B a a0 b c
	got, err := s.ListRecords(ctx(t), "key")
	if err != nil {
		t.Fatalf("ListRecords: %v", err)
	}
	ids := func(rs []*store.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	var wantIDs []string
	for _, r := range want {
		wantIDs = append(wantIDs, r.ID)
	}
	if !slices.Equal(ids(got), wantIDs) {
		t.Fatalf("ListRecords(key): got ids %q, want %q", ids(got), wantIDs)
	}
	for i, r := range got {
		wantRecord(t, fmt.Sprintf("ListRecords(key)[%d]", i), r, want[i])
	}

	none, err := s.ListRecords(ctx(t), "nothing")
	if err != nil {
		t.Fatalf("ListRecords of an unknown kind: %v", err)
	}
	if len(none) != 0 {
		t.Fatalf("ListRecords of an unknown kind: got %q, want none", ids(none))
	}
}

// testRecordDelete proves DeleteRecord removes one record, is no error on
// an absent one, and a deleted record can be created again as version 1.
func testRecordDelete(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	if err := s.DeleteRecord(ctx(t), "refresh", "never"); err != nil {
		t.Fatalf("DeleteRecord of an absent record: %v", err)
	}
	r := store.Record{Kind: "refresh", ID: "r1", Version: 1, Value: []byte("r1")}
	keep := store.Record{Kind: "refresh", ID: "r2", Version: 1, Value: []byte("r2")}
	mustPutRecord(t, s, r, keep, store.Record{Kind: "refresh", ID: "r1", Version: 2, Value: []byte("r1 v2")})
	for i := range 2 {
		if err := s.DeleteRecord(ctx(t), "refresh", "r1"); err != nil {
			t.Fatalf("DeleteRecord #%d: %v", i+1, err)
		}
		wantRecordNotFound(t, s, "refresh", "r1")
	}
	wantRecord(t, "GetRecord of the record not deleted", mustGetRecord(t, s, "refresh", "r2"), keep)
	list, err := s.ListRecords(ctx(t), "refresh")
	if err != nil {
		t.Fatalf("ListRecords: %v", err)
	}
	if len(list) != 1 || list[0].ID != "r2" {
		t.Fatalf("ListRecords after delete: got %d records, want r2 only", len(list))
	}
	again := store.Record{Kind: "refresh", ID: "r1", Version: 1, Value: []byte("again")}
	mustPutRecord(t, s, again)
	wantRecord(t, "GetRecord after re-create", mustGetRecord(t, s, "refresh", "r1"), again)
}

// testRecordInvalid proves malformed records fail with a plain error
// (neither ErrConflict nor ErrNotFound) and store nothing.
func testRecordInvalid(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	for _, c := range []struct {
		what string
		r    store.Record
	}{
		{"empty kind", store.Record{Kind: "", ID: "x", Version: 1, Value: []byte("v")}},
		{"empty id", store.Record{Kind: "bad", ID: "", Version: 1, Value: []byte("v")}},
		{"empty value", store.Record{Kind: "bad", ID: "x", Version: 1, Value: []byte{}}},
		{"nil value", store.Record{Kind: "bad", ID: "x", Version: 1}},
		{"version 0", store.Record{Kind: "bad", ID: "x", Version: 0, Value: []byte("v")}},
		{"negative version", store.Record{Kind: "bad", ID: "x", Version: -1, Value: []byte("v")}},
		{"U+001F in kind", store.Record{Kind: "bad\x1fx", ID: "x", Version: 1, Value: []byte("v")}},
	} {
		err := s.PutRecord(ctx(t), c.r)
		if err == nil {
			t.Fatalf("PutRecord with %s: no error", c.what)
		}
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("PutRecord with %s: got %v, want a plain error", c.what, err)
		}
	}
	wantRecordNotFound(t, s, "bad", "x")
	list, err := s.ListRecords(ctx(t), "bad")
	if err != nil {
		t.Fatalf("ListRecords: %v", err)
	}
	if len(list) != 0 {
		t.Fatalf("ListRecords after rejected writes: got %d records, want none", len(list))
	}
}

// testRecordCancelled proves a call with a cancelled context fails with an
// error matching context.Canceled and changes nothing.
func testRecordCancelled(t *testing.T, h *handle) {
	s := recordsOf(t, h)
	kept := store.Record{Kind: "user", ID: "kept", Version: 1, Value: []byte("kept")}
	mustPutRecord(t, s, kept)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	wantErr(t, "PutRecord (create) with a cancelled context",
		s.PutRecord(c, store.Record{Kind: "user", ID: "new", Version: 1, Value: []byte("new")}), context.Canceled)
	wantErr(t, "PutRecord (update) with a cancelled context",
		s.PutRecord(c, store.Record{Kind: "user", ID: "kept", Version: 2, Value: []byte("v2")}), context.Canceled)
	wantErr(t, "DeleteRecord with a cancelled context", s.DeleteRecord(c, "user", "kept"), context.Canceled)
	_, err := s.GetRecord(c, "user", "kept")
	wantErr(t, "GetRecord with a cancelled context", err, context.Canceled)
	_, err = s.ListRecords(c, "user")
	wantErr(t, "ListRecords with a cancelled context", err, context.Canceled)

	wantRecordNotFound(t, s, "user", "new")
	wantRecord(t, "GetRecord after cancelled writes", mustGetRecord(t, s, "user", "kept"), kept)
}
