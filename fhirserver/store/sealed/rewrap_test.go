package sealed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// ownerKind is a record kind the sealed store did not seal (the keys'
// owner keeps such records beside the sealed ones); the re-wrap skips it.
const ownerKind = "owner-plain"

func skipOwner(kind string) bool { return kind == ownerKind }

// rotationFixture is a sealed store over SQLite with keys from src:
// resources with history and a tombstone, sealed records and a plain one.
type rotationFixture struct {
	s     store.Store
	inner *sqlite.Store
	src   *keySource
	keys  *Keys
	ids   []string
}

func newRotationFixture(t *testing.T, resources int) *rotationFixture {
	t.Helper()
	inner := openSQLite(t, filepath.Join(t.TempDir(), "w.db"))
	src := newKeySource()
	s, keys := loadedStore(t, inner, src, &fakeClock{t: t0})
	t.Cleanup(func() { s.Close() })
	f := &rotationFixture{s: s, inner: inner, src: src, keys: keys}
	for i := range resources {
		id := fmt.Sprintf("p%03d", i)
		f.ids = append(f.ids, id)
		for v := int64(1); v <= 2; v++ {
			w := plainWrite("Patient", id, v, fmt.Sprintf(`{"resourceType":"Patient","id":%q,"v":%d}`, id, v))
			w.Index = &search.Rows{Keys: []string{"identifier" + keySep + "EMP-" + id}}
			mustPut(t, s, w)
		}
	}
	mustPut(t, s, plainWrite("Observation", "gone", 1, `{"resourceType":"Observation","id":"gone"}`),
		store.Write{Type: "Observation", ID: "gone", Version: 2, LastUpdated: t0.Add(3 * time.Second), Method: store.MethodDelete, Deleted: true})
	rec := s.(store.Records)
	for i := range 3 {
		if err := rec.PutRecord(t.Context(), store.Record{Kind: "idempotency", ID: fmt.Sprint(i), Version: 1, Value: []byte("answer " + fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := inner.PutRecord(t.Context(), store.Record{Kind: ownerKind, ID: "x", Version: 1, Value: []byte("not sealed by the store")}); err != nil {
		t.Fatal(err)
	}
	return f
}

// promote adds data key 2 and makes it current, in the source and in the
// store's copy.
func (f *rotationFixture) promote(t *testing.T) *crypt.Keyring {
	t.Helper()
	f.src.change(func(s *keySource) { s.data[2], s.dataCurrent = randomKey(), 2 })
	if err := f.keys.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f.keys.Rings().Data
}

// keyIDs counts the stored bodies and sealed record values by key id.
func (f *rotationFixture) keyIDs(t *testing.T) map[uint32]int {
	t.Helper()
	out := map[uint32]int{}
	cursor := ""
	for {
		page, err := f.inner.History(t.Context(), store.HistoryQuery{Count: 50, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			if v.Deleted {
				continue
			}
			kid, err := crypt.SealedKeyID(v.Body)
			if err != nil {
				t.Fatal(err)
			}
			out[kid]++
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	list, err := f.inner.ListRecords(t.Context(), "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		kid, err := crypt.SealedKeyID(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[kid]++
	}
	return out
}

// rewrapAll pages through the store from cursor; it returns the pages'
// sums.
func rewrapAll(t *testing.T, ctx context.Context, inner store.Store, ring *crypt.Keyring, cursor string, count int) (RewrapPage, error) {
	t.Helper()
	var sum RewrapPage
	for {
		p, err := RewrapBodies(ctx, inner, ring, cursor, count)
		if err != nil {
			sum.Next = cursor
			return sum, err
		}
		sum.Seen += p.Seen
		sum.Rewrapped += p.Rewrapped
		sum.Changed += p.Changed
		if cursor = p.Next; cursor == "" {
			return sum, nil
		}
	}
}

// TestRewrapMovesEveryValue: after a promotion, a re-wrap moves every
// body (history included) and every sealed record value to the new key,
// skips tombstones and the owner's records, changes nothing that is read
// or searched, and a second pass finds nothing left.
func TestRewrapMovesEveryValue(t *testing.T) {
	f := newRotationFixture(t, 7)
	before := readAll(t, f)
	ring := f.promote(t)
	sum, err := rewrapAll(t, t.Context(), f.inner, ring, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Seen != 16 || sum.Rewrapped != 15 || sum.Changed != 0 {
		t.Fatalf("re-wrap: %+v, want 16 seen (15 bodies and a tombstone), 15 re-wrapped", sum)
	}
	recs, err := RewrapRecords(t.Context(), f.inner, ring, skipOwner)
	if err != nil || recs.Seen != 3 || recs.Rewrapped != 3 {
		t.Fatalf("records: %+v, %v; want 3 seen and re-wrapped", recs, err)
	}
	if got := f.keyIDs(t); got[1] != 0 || got[2] != 18 {
		t.Fatalf("values by key after the re-wrap: %v, want 18 under key 2", got)
	}
	if owner, err := f.inner.GetRecord(t.Context(), ownerKind, "x"); err != nil || string(owner.Value) != "not sealed by the store" {
		t.Fatalf("the owner's record: %v, %v", owner, err)
	}
	if after := readAll(t, f); after != before {
		t.Fatalf("what the store answers changed:\n%s\nwant\n%s", after, before)
	}
	again, err := rewrapAll(t, t.Context(), f.inner, ring, "", 100)
	if err != nil || again.Rewrapped != 0 {
		t.Fatalf("a second pass: %+v, %v; want nothing re-wrapped", again, err)
	}

	// Key 1 retired: everything still opens.
	f.src.change(func(s *keySource) { delete(s.data, 1) })
	if err := f.keys.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := readAll(t, f); after != before {
		t.Fatalf("after key 1 was retired:\n%s\nwant\n%s", after, before)
	}
}

// readAll is what the sealed store answers: every version read, the
// records, and a search per identifier.
func readAll(t *testing.T, f *rotationFixture) string {
	t.Helper()
	var b strings.Builder
	for _, id := range f.ids {
		for v := int64(1); v <= 2; v++ {
			got, err := f.s.VRead(t.Context(), "Patient", id, v)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s v%d %s\n", id, v, got.Body)
		}
		fmt.Fprintf(&b, "search %s: %v\n", id, find(t, f.s, "identifier"+keySep+"EMP-"+id))
	}
	list, err := f.s.(store.Records).ListRecords(t.Context(), "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		fmt.Fprintf(&b, "record %s v%d %s\n", r.ID, r.Version, r.Value)
	}
	return b.String()
}

// erasingStore rewrites a version (as an erasure would, through the
// sealed store) right after it has served a history page: between the
// re-wrap's read and its write.
type erasingStore struct {
	*sqlite.Store
	erase func()
	once  sync.Once
}

func (e *erasingStore) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	page, err := e.Store.History(ctx, q)
	if err == nil {
		e.once.Do(e.erase)
	}
	return page, err
}

// TestRewrapLeavesConcurrentChanges: a body rewritten between the
// re-wrap's read and its write keeps the rewritten content: the write
// back is a compare-and-swap, so an erasure is never undone.
func TestRewrapLeavesConcurrentChanges(t *testing.T) {
	f := newRotationFixture(t, 2)
	ring := f.promote(t)
	erased := plainWrite("Patient", "p000", 1, `{"resourceType":"Patient","id":"p000","erased":true}`)
	e := &erasingStore{Store: f.inner, erase: func() {
		if err := f.s.(store.Rewriter).Rewrite(t.Context(), erased); err != nil {
			t.Error(err)
		}
	}}
	sum, err := rewrapAll(t, t.Context(), e, ring, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Changed != 1 || sum.Rewrapped != 4 {
		t.Fatalf("re-wrap: %+v, want 4 re-wrapped and 1 changed meanwhile", sum)
	}
	got, err := f.s.VRead(t.Context(), "Patient", "p000", 1)
	if err != nil || !bytes.Equal(got.Body, erased.Body) {
		t.Fatalf("the erased version reads %s, %v: the re-wrap undid the erasure", got.Body, err)
	}
	if _, err := RewrapRecords(t.Context(), f.inner, ring, skipOwner); err != nil {
		t.Fatal(err)
	}
	if kids := f.keyIDs(t); kids[1] != 0 {
		t.Fatalf("values by key: %v, want none under key 1", kids)
	}
}

// TestRewrapErrors: a body that is no sealed value, or is under a key
// the ring lacks, stops the re-wrap with an error that names the
// version and quotes none of its bytes; a store that cannot rewrite in
// place is refused.
func TestRewrapErrors(t *testing.T) {
	f := newRotationFixture(t, 1)
	ring := f.promote(t)
	plain := plainWrite("Patient", "plain", 1, `{"resourceType":"Patient","id":"plain","name":"Canary Zq"}`)
	mustPut(t, f.inner, plain)
	_, err := rewrapAll(t, t.Context(), f.inner, ring, "", 10)
	if err == nil || !strings.Contains(err.Error(), "Patient/plain version 1") || strings.Contains(err.Error(), "Canary") {
		t.Fatalf("a plain body: %v", err)
	}
	if err := f.inner.Rewrite(t.Context(), store.Write{Type: "Patient", ID: "plain", Version: 1, Body: mustSealUnder(t, 7)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rewrapAll(t, t.Context(), f.inner, ring, "", 10); !errors.Is(err, crypt.ErrUnknownKey) || !strings.Contains(err.Error(), "data key 7") {
		t.Fatalf("a body under a key the ring lacks: %v", err)
	}
	if _, err := RewrapBodies(t.Context(), noRewrite{f.inner}, ring, "", 10); err == nil {
		t.Fatal("a store without BodyRewriter was accepted")
	}
}

type noRewrite struct{ store.Store }

func mustSealUnder(t *testing.T, id uint32) []byte {
	t.Helper()
	k, err := crypt.NewKeyring(map[uint32][]byte{id: randomKey()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Seal([]byte("{}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRewrapUnderConcurrentReads: readers and a writer run against the
// sealed store while the re-wrap pages through it; the re-wrap is
// cancelled half way (a kill, as far as the store can tell) and resumed
// from the last cursor it reported. Every read succeeds, every value
// ends under the new key, and every search finds what it found before.
func TestRewrapUnderConcurrentReads(t *testing.T) {
	f := newRotationFixture(t, 60)
	before := readAll(t, f)
	ring := f.promote(t)

	stop := make(chan struct{})
	var reads, failures atomic.Int64
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := f.ids[i%len(f.ids)]
				_, err := f.s.VRead(context.Background(), "Patient", id, int64(1+i%2))
				if err == nil {
					_, err = f.s.Search(context.Background(), &search.Query{Types: []string{"Patient"}, Where: []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{"identifier" + keySep + "EMP-" + id}}}}}})
				}
				reads.Add(1)
				if err != nil {
					failures.Add(1)
					t.Errorf("read %s during the re-wrap: %v", id, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // new resources, sealed under the new key
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w := plainWrite("Encounter", fmt.Sprintf("e%d", i), 1, fmt.Sprintf(`{"resourceType":"Encounter","id":"e%d"}`, i))
			if err := f.s.Put(context.Background(), w); err != nil {
				t.Errorf("write during the re-wrap: %v", err)
				return
			}
		}
	}()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cursor, pages := "", 0
	for {
		p, err := RewrapBodies(ctx, f.inner, ring, cursor, 7)
		if err != nil {
			if ctx.Err() == nil {
				t.Fatal(err)
			}
			break // killed: resume from cursor
		}
		if cursor = p.Next; cursor == "" {
			t.Fatal("the re-wrap finished before it was cancelled")
		}
		if pages++; pages == 5 {
			cancel()
		}
	}
	if _, err := rewrapAll(t, t.Context(), f.inner, ring, cursor, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := RewrapRecords(t.Context(), f.inner, ring, skipOwner); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if failures.Load() != 0 || reads.Load() == 0 {
		t.Fatalf("%d of %d reads failed", failures.Load(), reads.Load())
	}
	if kids := f.keyIDs(t); kids[1] != 0 {
		t.Fatalf("values by key after the resumed re-wrap: %v, want none under key 1", kids)
	}
	if after := readAll(t, f); after != before {
		t.Fatalf("what the store answers changed:\n%s\nwant\n%s", after, before)
	}
}
