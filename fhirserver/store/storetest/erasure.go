package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// sequenceTests prove the store.Sequencer contract, which every backend
// implements.
var sequenceTests = []test{
	{"CountsFromOnePerName", testSequenceCounts},
	{"ConcurrentCallersGetDistinctValues", testSequenceConcurrent},
	{"SharedAcrossHandlesAndRestarts", testSequenceShared},
}

// rewriteTests prove the store.Rewriter contract (the erasure's in-place
// rewrite), which every backend implements on its Store and its Tx.
var rewriteTests = []test{
	{"OldVersionKeepsItsPlace", testRewriteOld},
	{"CurrentVersionReplacesIndexRows", testRewriteCurrent},
	{"InsideTransactRollsBackOrCommits", testRewriteTransact},
	{"MissingVersionTombstoneAndInvalid", testRewriteErrors},
}

func sequencerOf(t *testing.T, s store.Store) store.Sequencer {
	t.Helper()
	q, ok := s.(store.Sequencer)
	if !ok {
		t.Fatalf("the backend (%T) does not implement store.Sequencer, which every backend must", s)
	}
	return q
}

func rewriterOf(t *testing.T, s any) store.Rewriter {
	t.Helper()
	r, ok := s.(store.Rewriter)
	if !ok {
		t.Fatalf("%T does not implement store.Rewriter, which every backend's Store and Tx must", s)
	}
	return r
}

func mustNext(t *testing.T, q store.Sequencer, name string) int64 {
	t.Helper()
	v, err := q.NextValue(ctx(t), name)
	if err != nil {
		t.Fatalf("NextValue %q: %v", name, err)
	}
	return v
}

// testSequenceCounts: a counter starts at 1 and counts up by one when
// nothing fails; names are independent; an empty name is refused.
func testSequenceCounts(t *testing.T, h *handle) {
	q := sequencerOf(t, h.Store)
	for want := int64(1); want <= 3; want++ {
		if got := mustNext(t, q, "patient"); got != want {
			t.Fatalf("NextValue patient: %d, want %d", got, want)
		}
	}
	if got := mustNext(t, q, "employee"); got != 1 {
		t.Fatalf("NextValue of another name: %d, want 1", got)
	}
	if got := mustNext(t, q, "patient"); got != 4 {
		t.Fatalf("NextValue patient after another name: %d, want 4", got)
	}
	if _, err := q.NextValue(ctx(t), ""); err == nil {
		t.Fatalf("NextValue of an empty name: no error")
	}
}

// takeConcurrently has workers goroutines take n values each from the
// sequencers (round robin) and returns every value taken.
func takeConcurrently(t *testing.T, qs []store.Sequencer, name string, workers, n int) []int64 {
	t.Helper()
	var (
		mu   sync.Mutex
		all  []int64
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	for g := range workers {
		q := qs[g%len(qs)]
		wg.Go(func() {
			mine := make([]int64, 0, n)
			for range n {
				v, err := q.NextValue(ctx(t), name)
				if err != nil {
					errs <- fmt.Errorf("worker %d: NextValue: %w", g, err)
					return
				}
				mine = append(mine, v)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return all
}

// wantDistinct fails unless the values are positive and pairwise distinct.
func wantDistinct(t *testing.T, what string, vs []int64) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(vs))
	for i, v := range sorted {
		if v < 1 {
			t.Fatalf("%s: value %d, want >= 1", what, v)
		}
		if i > 0 && sorted[i-1] == v {
			t.Fatalf("%s: value %d handed out twice", what, v)
		}
	}
}

// testSequenceConcurrent: 32 goroutines taking values at once never get
// the same one, and the counter goes on above all of them.
func testSequenceConcurrent(t *testing.T, h *handle) {
	const workers, n = 32, 10
	q := sequencerOf(t, h.Store)
	all := takeConcurrently(t, []store.Sequencer{q}, "patient", workers, n)
	if len(all) != workers*n {
		t.Fatalf("%d values, want %d", len(all), workers*n)
	}
	wantDistinct(t, "32 concurrent callers", all)
	if next := mustNext(t, q, "patient"); next <= slices.Max(all) {
		t.Fatalf("NextValue after the burst: %d, not above %d", next, slices.Max(all))
	}
}

// testSequenceShared: a second handle on the same data (another process,
// or the server after a restart) continues the sequence, concurrently
// with the first and after the first is closed, never repeating a value.
func testSequenceShared(t *testing.T, h *handle) {
	if h.reopen == nil {
		t.Fatalf("the backend gave no Options.Reopen: the state shared between handles cannot be tested")
	}
	q1 := sequencerOf(t, h.Store)
	first := []int64{mustNext(t, q1, "patient"), mustNext(t, q1, "patient")}

	s2 := h.reopen(t, h.Store)
	if s2 == nil {
		t.Fatal("Reopen returned a nil store")
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s2.Close()
		}
	})
	q2 := sequencerOf(t, s2)
	if v := mustNext(t, q2, "patient"); v <= first[1] {
		t.Fatalf("NextValue on a second handle: %d, want a value above %d", v, first[1])
	} else {
		first = append(first, v)
	}

	all := append(first, takeConcurrently(t, []store.Sequencer{q1, q2}, "patient", 32, 10)...)
	wantDistinct(t, "two handles", all)

	// A restart: the first handle goes away, the second carries on.
	if err := h.close(); err != nil {
		t.Fatalf("Close the first handle: %v", err)
	}
	if v := mustNext(t, q2, "patient"); v <= slices.Max(all) {
		t.Fatalf("NextValue after the first handle closed: %d, not above %d", v, slices.Max(all))
	}
	closed = true
	if err := s2.Close(); err != nil {
		t.Fatalf("Close the second handle: %v", err)
	}
}

// rewritten is w with another body (and, when rows is not nil, those
// index rows), as an erasure would send it; LastUpdated and Method are
// deliberately off, as Rewrite must ignore them.
func rewritten(w store.Write, tag string, rows *search.Rows) store.Write {
	r := w
	r.Body = fmt.Appendf(nil, `{"resourceType":%q,"id":%q,"meta":{"versionId":"%d"},"erased":%q}`, w.Type, w.ID, w.Version, tag)
	r.Index = rows
	r.LastUpdated = w.LastUpdated.Add(12345678)
	r.Method = store.MethodPatch
	return r
}

// kept is what a rewritten version reads back as: the write with the new
// body and everything else as stored.
func kept(orig, rw store.Write) store.Write {
	k := orig
	k.Body = rw.Body
	return k
}

func keyRows(keys ...string) *search.Rows {
	return &search.Rows{Keys: slices.Sorted(slices.Values(keys)), Sorts: []search.SortRow{sortRow("family", keys[0])}}
}

func keyQuery(typ, k string) search.Query { return where([]string{typ}, one(key(k))) }

// testRewriteOld: rewriting an old version changes what VRead and history
// show for it (same LastUpdated, Method and place), and nothing of the
// current version: Read, and search through the current rows (the rows
// given with the rewrite of an old version are ignored).
func testRewriteOld(t *testing.T, h *handle) {
	rw := rewriterOf(t, h.Store)
	v1 := write("Patient", "a", 1, at(1))
	v1.Index = keyRows("family" + sep + "smith")
	v2 := write("Patient", "a", 2, at(2))
	v2.Index = keyRows("family" + sep + "smith")
	other := write("Patient", "b", 1, at(3))
	mustPut(t, h, v1, v2, other)

	r1 := rewritten(v1, "old", keyRows("family"+sep+"ghost"))
	if err := rw.Rewrite(ctx(t), r1); err != nil {
		t.Fatalf("Rewrite v1: %v", err)
	}
	wantVersion(t, "VRead v1 after the rewrite", mustVRead(t, h, "Patient", "a", 1), kept(v1, r1))
	wantVersion(t, "VRead v2 after rewriting v1", mustVRead(t, h, "Patient", "a", 2), v2)
	wantVersion(t, "Read after rewriting v1", mustRead(t, h, "Patient", "a"), v2)
	q := store.HistoryQuery{Type: "Patient", ID: "a", Count: 1}
	wantHistory(t, q, collect(t, h, q), []store.Write{v2, kept(v1, r1)})
	q = store.HistoryQuery{Type: "Patient", Count: 10}
	wantHistory(t, q, collect(t, h, q), []store.Write{other, v2, kept(v1, r1)})
	sameSet(t, "search by the current rows", found(t, h, keyQuery("Patient", "family"+sep+"smith")), []string{"Patient/a"})
	sameSet(t, "search by the rows of a rewritten old version", found(t, h, keyQuery("Patient", "family"+sep+"ghost")), nil)

	// A second rewrite of the same version replaces the first.
	r1b := rewritten(v1, "again", nil)
	if err := rw.Rewrite(ctx(t), r1b); err != nil {
		t.Fatalf("Rewrite v1 again: %v", err)
	}
	wantVersion(t, "VRead v1 after the second rewrite", mustVRead(t, h, "Patient", "a", 1), kept(v1, r1b))
}

// testRewriteCurrent: rewriting the current version changes Read, VRead
// and history, and replaces its index rows: the new content is found, the
// old is not. Updates after it carry on from the rewritten version.
func testRewriteCurrent(t *testing.T, h *handle) {
	rw := rewriterOf(t, h.Store)
	v1 := write("Patient", "a", 1, at(1))
	v1.Index = keyRows("family"+sep+"smith", "phone"+sep+"555")
	v2 := write("Patient", "a", 2, at(2))
	v2.Index = keyRows("family"+sep+"smith", "phone"+sep+"555")
	mustPut(t, h, v1, v2)

	r2 := rewritten(v2, "current", keyRows("family"+sep+"anonymous"))
	if err := rw.Rewrite(ctx(t), r2); err != nil {
		t.Fatalf("Rewrite v2: %v", err)
	}
	wantVersion(t, "Read after the rewrite", mustRead(t, h, "Patient", "a"), kept(v2, r2))
	wantVersion(t, "VRead v2 after the rewrite", mustVRead(t, h, "Patient", "a", 2), kept(v2, r2))
	wantVersion(t, "VRead v1 after rewriting v2", mustVRead(t, h, "Patient", "a", 1), v1)
	q := store.HistoryQuery{Type: "Patient", ID: "a", Count: 10}
	wantHistory(t, q, collect(t, h, q), []store.Write{kept(v2, r2), v1})

	sameSet(t, "search by the new content", found(t, h, keyQuery("Patient", "family"+sep+"anonymous")), []string{"Patient/a"})
	sameSet(t, "search by the old name", found(t, h, keyQuery("Patient", "family"+sep+"smith")), nil)
	sameSet(t, "search by the old phone", found(t, h, keyQuery("Patient", "phone"+sep+"555")), nil)
	page, err := h.Search(ctx(t), &search.Query{Types: []string{"Patient"}, Count: 10})
	if err != nil || len(page.Matches) != 1 {
		t.Fatalf("search without clauses: %v, %v; want Patient/a", page, err)
	}
	wantVersion(t, "search match after the rewrite", page.Matches[0], kept(v2, r2))

	// Nil rows leave the resource with none.
	r2b := rewritten(v2, "no rows", nil)
	if err := rw.Rewrite(ctx(t), r2b); err != nil {
		t.Fatalf("Rewrite v2 without rows: %v", err)
	}
	sameSet(t, "search after a rewrite without rows", found(t, h, keyQuery("Patient", "family"+sep+"anonymous")), nil)

	// The compare-and-swap carries on from the rewritten version.
	v3 := write("Patient", "a", 3, at(3))
	v3.Index = keyRows("family" + sep + "next")
	mustPut(t, h, v3)
	wantVersion(t, "Read after an update", mustRead(t, h, "Patient", "a"), v3)
	sameSet(t, "search after an update", found(t, h, keyQuery("Patient", "family"+sep+"next")), []string{"Patient/a"})
}

// testRewriteTransact: the Tx of Transact is a Rewriter; its rewrites are
// seen inside the transaction, vanish when fn fails, and land together
// when it commits.
func testRewriteTransact(t *testing.T, h *handle) {
	v1 := write("Patient", "a", 1, at(1))
	v1.Index = keyRows("family" + sep + "smith")
	v2 := write("Patient", "a", 2, at(2))
	v2.Index = keyRows("family" + sep + "smith")
	mustPut(t, h, v1, v2)
	r1 := rewritten(v1, "tx old", nil)
	r2 := rewritten(v2, "tx current", keyRows("family"+sep+"anonymous"))
	rewriteBoth := func(tx store.Tx) error {
		rw := rewriterOf(t, tx)
		for _, w := range []store.Write{r1, r2} {
			if err := rw.Rewrite(ctx(t), w); err != nil {
				return fmt.Errorf("tx.Rewrite v%d: %w", w.Version, err)
			}
		}
		wantVersion(t, "tx.VRead v1", mustVRead(t, tx, "Patient", "a", 1), kept(v1, r1))
		wantVersion(t, "tx.Read", mustRead(t, tx, "Patient", "a"), kept(v2, r2))
		q := store.HistoryQuery{Type: "Patient", ID: "a", Count: 10}
		wantHistory(t, q, collect(t, tx, q), []store.Write{kept(v2, r2), kept(v1, r1)})
		sameSet(t, "tx search by the new content", found(t, tx, keyQuery("Patient", "family"+sep+"anonymous")), []string{"Patient/a"})
		return nil
	}
	unchanged := func(what string) {
		t.Helper()
		wantVersion(t, "VRead v1 "+what, mustVRead(t, h, "Patient", "a", 1), v1)
		wantVersion(t, "Read "+what, mustRead(t, h, "Patient", "a"), v2)
		sameSet(t, "search by the old name "+what, found(t, h, keyQuery("Patient", "family"+sep+"smith")), []string{"Patient/a"})
		sameSet(t, "search by the new content "+what, found(t, h, keyQuery("Patient", "family"+sep+"anonymous")), nil)
	}

	boom := errors.New("fn failed")
	ok, err := transact(t, h, func(tx store.Tx) error {
		if err := rewriteBoth(tx); err != nil {
			return err
		}
		return boom
	})
	if !ok {
		unchanged("after an unsupported Transact")
		return
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Transact: %v, want fn's error", err)
	}
	unchanged("after the rollback")

	if _, err := transact(t, h, rewriteBoth); err != nil {
		t.Fatalf("Transact (commit): %v", err)
	}
	wantVersion(t, "VRead v1 after the commit", mustVRead(t, h, "Patient", "a", 1), kept(v1, r1))
	wantVersion(t, "Read after the commit", mustRead(t, h, "Patient", "a"), kept(v2, r2))
	sameSet(t, "search by the old name after the commit", found(t, h, keyQuery("Patient", "family"+sep+"smith")), nil)
	sameSet(t, "search by the new content after the commit", found(t, h, keyQuery("Patient", "family"+sep+"anonymous")), []string{"Patient/a"})
}

// testRewriteErrors: a version that does not exist is ErrNotFound; a
// tombstone and malformed rewrites are plain errors; none changes
// anything. An old version of a deleted resource can be rewritten, and
// the resource stays deleted (and unsearchable).
func testRewriteErrors(t *testing.T, h *handle) {
	rw := rewriterOf(t, h.Store)
	v1 := write("Patient", "a", 1, at(1))
	v1.Index = keyRows("family" + sep + "smith")
	v2 := tombstone("Patient", "a", 2, at(2))
	b1 := write("Patient", "b", 1, at(3))
	mustPut(t, h, v1, v2, b1)

	wantErr(t, "Rewrite of a resource that never existed", rw.Rewrite(ctx(t), rewritten(write("Patient", "nobody", 1, at(1)), "x", nil)), store.ErrNotFound)
	wantErr(t, "Rewrite of a version after the current one", rw.Rewrite(ctx(t), rewritten(write("Patient", "b", 2, at(4)), "x", nil)), store.ErrNotFound)
	wantErr(t, "Rewrite of another type's id", rw.Rewrite(ctx(t), rewritten(write("Observation", "b", 1, at(3)), "x", nil)), store.ErrNotFound)

	plain := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, s := range []error{store.ErrNotFound, store.ErrConflict, store.ErrTransactionsUnsupported, store.ErrBadCursor} {
			if errors.Is(err, s) {
				t.Fatalf("%s: %v matches %v, want a plain error", what, err, s)
			}
		}
	}
	ts := rewritten(write("Patient", "a", 2, at(2)), "x", nil)
	plain("Rewrite of a tombstone", rw.Rewrite(ctx(t), ts))
	noBody := rewritten(b1, "x", nil)
	noBody.Body = nil
	plain("Rewrite without a body", rw.Rewrite(ctx(t), noBody))
	asTombstone := rewritten(b1, "x", nil)
	asTombstone.Deleted, asTombstone.Body = true, nil
	plain("Rewrite as a tombstone", rw.Rewrite(ctx(t), asTombstone))
	noID := rewritten(b1, "x", nil)
	noID.ID = ""
	plain("Rewrite without an id", rw.Rewrite(ctx(t), noID))
	wantVersion(t, "Read Patient/b after the refused rewrites", mustRead(t, h, "Patient", "b"), b1)
	if got := mustRead(t, h, "Patient", "a"); !got.Deleted || got.Version != 2 {
		t.Fatalf("Read Patient/a after the refused rewrites: %+v, want the tombstone", got)
	}

	r1 := rewritten(v1, "deleted resource", keyRows("family"+sep+"ghost"))
	if err := rw.Rewrite(ctx(t), r1); err != nil {
		t.Fatalf("Rewrite v1 of a deleted resource: %v", err)
	}
	wantVersion(t, "VRead v1 of the deleted resource", mustVRead(t, h, "Patient", "a", 1), kept(v1, r1))
	if got := mustRead(t, h, "Patient", "a"); !got.Deleted || got.Version != 2 {
		t.Fatalf("Read Patient/a after rewriting v1: %+v, want the tombstone", got)
	}
	for _, k := range []string{"family" + sep + "smith", "family" + sep + "ghost"} {
		sameSet(t, "search the deleted resource by "+k, found(t, h, keyQuery("Patient", k)), nil)
	}
}
