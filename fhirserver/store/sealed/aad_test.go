package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func plainWrite(typ, id string, version int64, body string) store.Write {
	m := store.MethodUpdate
	if version == 1 {
		m = store.MethodCreate
	}
	return store.Write{Type: typ, ID: id, Version: version, LastUpdated: t0.Add(time.Duration(version) * time.Second), Method: m, Body: []byte(body)}
}

func mustPut(t *testing.T, s store.Writer, ws ...store.Write) {
	t.Helper()
	for _, w := range ws {
		if err := s.Put(t.Context(), w); err != nil {
			t.Fatalf("Put %s/%s v%d: %v", w.Type, w.ID, w.Version, err)
		}
	}
}

// wantNoOpen fails unless err is a crypt.ErrOpen (the value did not
// authenticate) and got is nil.
func wantNoOpen(t *testing.T, what string, got *store.Version, err error) {
	t.Helper()
	if !errors.Is(err, crypt.ErrOpen) {
		t.Errorf("%s: error %v, want crypt.ErrOpen", what, err)
	}
	if got != nil {
		t.Errorf("%s: returned %+v", what, got)
	}
}

// TestBodiesAreBoundToTheirPlace: a sealed body copied to another id,
// version, type or partition does not open there; neither does a record
// value moved to another record, nor one moved into a resource.
func TestBodiesAreBoundToTheirPlace(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	s, inner := sealedSQLite(t, dir, keys.config("workforce"))
	ctx := t.Context()
	a1 := plainWrite("Patient", "a", 1, `{"resourceType":"Patient","id":"a","name":[{"family":"First"}]}`)
	a2 := plainWrite("Patient", "a", 2, `{"resourceType":"Patient","id":"a","name":[{"family":"Second"}]}`)
	b1 := plainWrite("Patient", "b", 1, `{"resourceType":"Patient","id":"b"}`)
	mustPut(t, s, a1, a2, b1)

	raw := func(typ, id string, version int64) []byte {
		t.Helper()
		v, err := inner.VRead(ctx, typ, id, version)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(v.Body, []byte("First")) || bytes.Contains(v.Body, []byte("Second")) {
			t.Fatalf("%s/%s v%d is stored in plain", typ, id, version)
		}
		return v.Body
	}
	sealedA1, sealedA2 := raw("Patient", "a", 1), raw("Patient", "a", 2)
	if got, err := s.VRead(ctx, "Patient", "a", 1); err != nil || !bytes.Equal(got.Body, a1.Body) {
		t.Fatalf("VRead a v1: %v, %v", got, err)
	}

	// Another id: b's version 2 holds a's version 2 body.
	moved := plainWrite("Patient", "b", 2, "")
	moved.Body = sealedA2
	mustPut(t, inner, moved)
	got, err := s.Read(ctx, "Patient", "b")
	wantNoOpen(t, "a's body under another id", got, err)

	// Another version: a's version 1 rewritten with its version 2 body.
	rw := plainWrite("Patient", "a", 1, "")
	rw.Body = sealedA2
	if err := inner.Rewrite(ctx, rw); err != nil {
		t.Fatal(err)
	}
	got, err = s.VRead(ctx, "Patient", "a", 1)
	wantNoOpen(t, "version 2's body as version 1", got, err)

	// Another type: an Observation with a's id and version.
	other := plainWrite("Observation", "a", 1, "")
	other.Body = sealedA1
	mustPut(t, inner, other)
	got, err = s.Read(ctx, "Observation", "a")
	wantNoOpen(t, "a Patient's body as an Observation", got, err)

	// Another partition: the same keys and file, opened as "clinical".
	elsewhere := wrap(t, inner, keys.config("clinical"))
	got, err = elsewhere.Read(ctx, "Patient", "a")
	wantNoOpen(t, "a workforce body read as clinical", got, err)
	if got, err := s.Read(ctx, "Patient", "a"); err != nil || !bytes.Equal(got.Body, a2.Body) {
		t.Fatalf("Read a in its own partition: %v, %v", got, err)
	}

	// A failure is an error of the whole read, search or history page,
	// never a body returned as it was stored.
	if _, err := s.History(ctx, store.HistoryQuery{Type: "Patient", Count: 10}); !errors.Is(err, crypt.ErrOpen) {
		t.Errorf("History over a moved body: %v, want crypt.ErrOpen", err)
	}
	if _, err := s.Search(ctx, &search.Query{Types: []string{"Patient"}, Count: 10}); !errors.Is(err, crypt.ErrOpen) {
		t.Errorf("Search over a moved body: %v, want crypt.ErrOpen", err)
	}

	// A tampered byte, and a body that is not sealed at all.
	tampered := plainWrite("Patient", "c", 1, "")
	tampered.Body = bytes.Clone(sealedA1)
	tampered.Body[len(tampered.Body)-1] ^= 1
	plain := plainWrite("Patient", "d", 1, `{"resourceType":"Patient","id":"d"}`)
	mustPut(t, inner, tampered, plain)
	got, err = s.Read(ctx, "Patient", "c")
	wantNoOpen(t, "a tampered body", got, err)
	if got, err := s.Read(ctx, "Patient", "d"); !errors.Is(err, crypt.ErrMalformed) || got != nil {
		t.Errorf("a plain body: %v, %v; want crypt.ErrMalformed", got, err)
	}

	// Under keys the partition does not have.
	strangers := wrap(t, inner, newTestKeys(t).config("workforce"))
	if _, err := strangers.Read(ctx, "Patient", "b"); err == nil {
		t.Error("a body opened under other keys")
	}

	// Records: a value under another id, and a record value as a body.
	recs, innerRecs := s.(store.Records), store.Records(inner)
	if err := recs.PutRecord(ctx, store.Record{Kind: "idempotency", ID: "k1", Version: 1, Value: []byte(`{"employee_id":"EMP-1"}`)}); err != nil {
		t.Fatal(err)
	}
	r, err := innerRecs.GetRecord(ctx, "idempotency", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(r.Value, []byte("EMP-1")) {
		t.Fatal("a record value is stored in plain")
	}
	if err := innerRecs.PutRecord(ctx, store.Record{Kind: "idempotency", ID: "k2", Version: 1, Value: r.Value}); err != nil {
		t.Fatal(err)
	}
	if _, err := recs.GetRecord(ctx, "idempotency", "k2"); !errors.Is(err, crypt.ErrOpen) {
		t.Errorf("a record value under another id: %v, want crypt.ErrOpen", err)
	}
	if _, err := recs.ListRecords(ctx, "idempotency"); !errors.Is(err, crypt.ErrOpen) {
		t.Errorf("listing a moved record value: %v, want crypt.ErrOpen", err)
	}
	asBody := plainWrite("Basic", "k1", 1, "")
	asBody.Body = r.Value
	mustPut(t, inner, asBody)
	got, err = s.Read(ctx, "Basic", "k1")
	wantNoOpen(t, "a record value as a body", got, err)
}

// TestSealedValuesCarryTheirKeyID: every stored body says which data key
// wraps it, so a rotation can Rewrap it in place; a rewrapped body opens
// where it was, under the new key.
func TestSealedValuesCarryTheirKeyID(t *testing.T) {
	k1, k2 := randomKey(), randomKey()
	old, _ := crypt.NewKeyring(map[uint32][]byte{1: k1})
	rotated, _ := crypt.NewKeyring(map[uint32][]byte{1: k1, 2: k2})
	keys := newTestKeys(t)
	cfg := keys.config("workforce")
	cfg.Keyring = old
	s, inner := sealedSQLite(t, t.TempDir(), cfg)
	ctx := t.Context()
	w := plainWrite("Patient", "a", 1, `{"resourceType":"Patient","id":"a"}`)
	mustPut(t, s, w)
	v, err := inner.Read(ctx, "Patient", "a")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := crypt.SealedKeyID(v.Body); err != nil || id != 1 {
		t.Fatalf("key id %d, %v; want 1", id, err)
	}
	body, err := rotated.Rewrap(v.Body)
	if err != nil {
		t.Fatal(err)
	}
	rw := w
	rw.Body = body
	if err := inner.Rewrite(ctx, rw); err != nil {
		t.Fatal(err)
	}
	cfg.Keyring = rotated
	after := wrap(t, inner, cfg)
	got, err := after.Read(ctx, "Patient", "a")
	if err != nil || !bytes.Equal(got.Body, w.Body) {
		t.Fatalf("Read after the rewrap: %v, %v", got, err)
	}
	if v, _ := inner.Read(ctx, "Patient", "a"); v != nil {
		if id, _ := crypt.SealedKeyID(v.Body); id != 2 {
			t.Errorf("key id %d after the rewrap, want 2", id)
		}
	}
}

// TestStoredKeysAreTagged: what the inner store indexes are the tags of
// the current blind key (and plain references), whatever writes them:
// Put, Rewrite, Reindex; the plain keys find nothing there.
func TestStoredKeysAreTagged(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	s, inner := sealedSQLite(t, dir, keys.config("workforce"))
	ctx := t.Context()
	const ref = "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a99"
	rows := func(family string) *search.Rows {
		return &search.Rows{Keys: []string{"family" + keySep + family, "general-practitioner" + keySep + "Practitioner/" + ref}}
	}
	a := plainWrite("Patient", "a", 1, `{"resourceType":"Patient","id":"a"}`)
	a.Index = rows("put")
	b := plainWrite("Patient", "b", 1, `{"resourceType":"Patient","id":"b"}`)
	b.Index = rows("rewritten-before")
	c := plainWrite("Patient", "c", 1, `{"resourceType":"Patient","id":"c"}`)
	mustPut(t, s, a, b, c)
	b.Index = rows("rewritten")
	if err := s.(store.Rewriter).Rewrite(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n, err := s.(store.Indexer).Reindex(ctx, []store.IndexUpdate{{Type: "Patient", ID: "c", Version: 1, Rows: rows("reindexed")}}); err != nil || n != 1 {
		t.Fatalf("Reindex: %d, %v", n, err)
	}
	blind := keys.blind
	for id, family := range map[string]string{"a": "put", "b": "rewritten", "c": "reindexed"} {
		k := "family" + keySep + family
		if got := find(t, inner, k); len(got) != 0 {
			t.Errorf("the plain key %q finds %v in the inner store", k, got)
		}
		tag := blind.tag(keys.blind.CurrentID(), k)
		if kid, ok := TagKeyID(tag); !ok || kid != keys.blind.CurrentID() {
			t.Errorf("TagKeyID(%q) = %d, %v", tag, kid, ok)
		}
		if got := find(t, inner, tag); len(got) != 1 || got[0] != "Patient/"+id {
			t.Errorf("the tag of %q finds %v in the inner store, want Patient/%s", k, got, id)
		}
		if got := find(t, s, k); len(got) != 1 || got[0] != "Patient/"+id {
			t.Errorf("%q finds %v through the sealed store, want Patient/%s", k, got, id)
		}
	}
	refKey := "general-practitioner" + keySep + "Practitioner/" + ref
	if got := find(t, inner, refKey); len(got) != 3 {
		t.Errorf("the plain reference key finds %v in the inner store, want all three", got)
	}
	if _, ok := TagKeyID(refKey); ok {
		t.Errorf("TagKeyID takes the plain reference %q for a tag", refKey)
	}
}

// find runs a search for the index key k on s (the sealed store, or the
// inner one to see what is stored).
func find(t *testing.T, s store.Searcher, k string) []string {
	t.Helper()
	page, err := s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Count: 100,
		Where: []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{k}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return refsOf(page.Matches)
}

// TestBlindKeyRotation: after a blind key is added, new rows carry its
// tags, old rows (not yet rebuilt) are still found, and a reindex moves
// them to the new key.
func TestBlindKeyRotation(t *testing.T) {
	b1 := randomKey()
	keys := newTestKeys(t)
	blind1, _ := NewBlindKeys(map[uint32][]byte{1: b1})
	blind2, _ := NewBlindKeys(map[uint32][]byte{1: b1, 2: randomKey()})
	cfg := keys.config("workforce")
	cfg.Blind = blind1
	dir := t.TempDir()
	before, inner := sealedSQLite(t, dir, cfg)
	old := plainWrite("Patient", "old", 1, `{"resourceType":"Patient","id":"old"}`)
	old.Index = &search.Rows{Keys: []string{"identifier" + keySep + "EMP-1"}}
	mustPut(t, before, old)

	cfg.Blind = blind2
	after := wrap(t, inner, cfg)
	fresh := plainWrite("Patient", "new", 1, `{"resourceType":"Patient","id":"new"}`)
	fresh.Index = &search.Rows{Keys: []string{"identifier" + keySep + "EMP-1"}}
	mustPut(t, after, fresh)

	k := "identifier" + keySep + "EMP-1"
	if got := find(t, after, k); strings.Join(got, ",") != "Patient/old,Patient/new" {
		t.Errorf("during the rebuild %q finds %v, want both", k, got)
	}
	if got := find(t, inner, blind2.tag(2, k)); strings.Join(got, ",") != "Patient/new" {
		t.Errorf("the new key's tag finds %v, want the new resource only", got)
	}
	if _, err := after.(store.Indexer).Reindex(t.Context(), []store.IndexUpdate{{Type: "Patient", ID: "old", Version: 1, Rows: old.Index}}); err != nil {
		t.Fatal(err)
	}
	if got := find(t, inner, blind2.tag(1, k)); len(got) != 0 {
		t.Errorf("after the rebuild the old key's tag still finds %v", got)
	}
	if got := find(t, after, k); len(got) != 2 {
		t.Errorf("after the rebuild %q finds %v, want both", k, got)
	}
}
