package storetest_test

// A deliberately naive in-memory store.Store, used only to check the suite
// itself: that it passes an implementation written from the contract alone
// (no SQL, no snapshot of the page set in its cursors, like a MongoDB backend
// would be), and that its ErrTransactionsUnsupported branch works.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
)

func TestSuiteOnMemStore(t *testing.T) {
	storetest.RunWith(t, func(t *testing.T) store.Store { return &memStore{txs: true} }, memOptions)
}

func TestSuiteOnMemStoreWithoutTransactions(t *testing.T) {
	storetest.RunWith(t, func(t *testing.T) store.Store { return &memStore{} }, memOptions)
}

// memOptions reopen a memStore as itself: its state lives in the value,
// and Close is a no-op.
var memOptions = storetest.Options{Reopen: func(t *testing.T, s store.Store) store.Store { return s }}

type memStore struct {
	txs     bool
	writeMu sync.Mutex // held by Put and for the whole of Transact
	mu      sync.Mutex // guards versions
	// versions in write order; a version's seq is its index+1.
	versions []memVersion

	recMu   sync.Mutex
	records map[[2]string]store.Record // store.Records, by kind and id

	seqMu sync.Mutex
	seqs  map[string]int64 // store.Sequencer: the last value of each name
}

// memVersion is a version with the index rows it was written with.
type memVersion struct {
	store.Version
	index *search.Rows
}

// plain drops the rows, for the functions that only need versions.
func plain(vs []memVersion) []store.Version {
	out := make([]store.Version, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

func (s *memStore) Ping(ctx context.Context) error { return ctx.Err() }
func (s *memStore) Close() error                   { return nil }

func (s *memStore) snapshot() []memVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clip(s.versions)
}

func (s *memStore) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	return read(ctx, plain(s.snapshot()), typ, id)
}

func (s *memStore) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	return vread(ctx, plain(s.snapshot()), typ, id, version)
}

func (s *memStore) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	return history(ctx, plain(s.snapshot()), q)
}

func (s *memStore) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	return memSearch(ctx, s.snapshot(), q)
}

func (s *memStore) Put(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	v, err := check(s.snapshot(), w)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.versions = append(s.versions, v)
	s.mu.Unlock()
	return nil
}

func (s *memStore) Transact(ctx context.Context, fn func(tx store.Tx) error) error {
	if !s.txs {
		return store.ErrTransactionsUnsupported
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx := &memTx{versions: s.snapshot()}
	if err := fn(tx); err != nil {
		return err
	}
	// writeMu kept every other writer out: the transaction's view (its
	// appends and rewrites) becomes the store.
	s.mu.Lock()
	s.versions = tx.versions
	s.mu.Unlock()
	return nil
}

// memTx sees the committed versions plus its own.
type memTx struct{ versions []memVersion }

func (t *memTx) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	return read(ctx, plain(t.versions), typ, id)
}

func (t *memTx) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	return vread(ctx, plain(t.versions), typ, id, version)
}

func (t *memTx) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	return history(ctx, plain(t.versions), q)
}

func (t *memTx) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	return memSearch(ctx, t.versions, q)
}

func (t *memTx) Put(ctx context.Context, w store.Write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := check(t.versions, w)
	if err != nil {
		return err
	}
	t.versions = append(slices.Clip(t.versions), v)
	return nil
}

// check is the compare-and-swap: w must be the current version + 1.
func check(vs []memVersion, w store.Write) (memVersion, error) {
	var cur int64
	for _, v := range vs {
		if v.Type == w.Type && v.ID == w.ID {
			cur = max(cur, v.Version.Version)
		}
	}
	if w.Version != cur+1 {
		return memVersion{}, fmt.Errorf("mem: %s/%s is at %d: %w", w.Type, w.ID, cur, store.ErrConflict)
	}
	v := store.Version{Type: w.Type, ID: w.ID, Version: w.Version, LastUpdated: w.LastUpdated.UTC(),
		Method: w.Method, Deleted: w.Deleted}
	mv := memVersion{Version: v}
	if !w.Deleted {
		mv.Body = bytes.Clone(w.Body)
		mv.index = cloneRows(w.Index)
	}
	return mv, nil
}

func read(ctx context.Context, vs []store.Version, typ, id string) (*store.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Type == typ && vs[i].ID == id {
			v := vs[i]
			return &v, nil
		}
	}
	return nil, store.ErrNotFound
}

func vread(ctx context.Context, vs []store.Version, typ, id string, version int64) (*store.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v.Type == typ && v.ID == id && v.Version == version {
			return &v, nil
		}
	}
	return nil, store.ErrNotFound
}

// history sorts everything in scope by (LastUpdated, seq) descending and
// returns the entries after the cursor position. The cursor is that position
// plus the number of versions that existed at the first page, which only
// the _at filter uses: a version written since must not count as superseding
// one that was current then. Otherwise there is no snapshot, so versions
// written later with an older LastUpdated do show up on later pages (the
// suite must allow that).
func history(ctx context.Context, vs []store.Version, q store.HistoryQuery) (*store.HistoryPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type entry struct {
		v   store.Version
		seq int
	}
	var after *entry
	seen := len(vs) // versions the _at filter may consider
	if q.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		var ns int64
		var seq int
		if err == nil {
			_, err = fmt.Sscanf(string(b), "mem %d %d %d", &ns, &seq, &seen)
		}
		if err != nil || fmt.Sprintf("mem %d %d %d", ns, seq, seen) != string(b) || seen > len(vs) {
			return nil, store.ErrBadCursor
		}
		after = &entry{v: store.Version{LastUpdated: time.Unix(0, ns)}, seq: seq}
	}
	less := func(a, b entry) int { // newest first
		if c := b.v.LastUpdated.Compare(a.v.LastUpdated); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	}
	var es []entry
	for i, v := range vs {
		switch {
		case q.Type != "" && v.Type != q.Type, q.ID != "" && v.ID != q.ID:
		case !q.Since.IsZero() && v.LastUpdated.Before(q.Since):
		case !q.AtHigh.IsZero() && !v.LastUpdated.Before(q.AtHigh):
		case !q.AtLow.IsZero() && slices.ContainsFunc(vs[:seen], func(n store.Version) bool {
			return n.Type == v.Type && n.ID == v.ID && n.Version == v.Version+1 && !n.LastUpdated.After(q.AtLow)
		}):
		default:
			if e := (entry{v, i + 1}); after == nil || less(*after, e) < 0 {
				es = append(es, e)
			}
		}
	}
	slices.SortFunc(es, less)
	page := &store.HistoryPage{}
	size := 0
	for i, e := range es {
		if i == q.Count || q.MaxBytes > 0 && size >= q.MaxBytes {
			last := es[i-1]
			page.Next = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "mem %d %d %d", last.v.LastUpdated.UnixNano(), last.seq, seen))
			break
		}
		v := e.v
		page.Versions = append(page.Versions, &v)
		size += len(v.Body)
	}
	return page, nil
}

// store.Records, from the contract alone: a map of current records, an
// expired one treated as absent.

var _ store.Records = (*memStore)(nil)

func recordLive(r store.Record, now time.Time) bool {
	return r.Expires.IsZero() || now.Before(r.Expires.Truncate(time.Microsecond))
}

func cloneRecord(r store.Record) *store.Record {
	r.Value = bytes.Clone(r.Value)
	if !r.Expires.IsZero() {
		r.Expires = r.Expires.Truncate(time.Microsecond).UTC()
	}
	return &r
}

func (s *memStore) GetRecord(ctx context.Context, kind, id string) (*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	r, ok := s.records[[2]string{kind, id}]
	if !ok || !recordLive(r, time.Now()) {
		return nil, fmt.Errorf("get record %s/%s: %w", kind, id, store.ErrNotFound)
	}
	return cloneRecord(r), nil
}

func (s *memStore) PutRecord(ctx context.Context, r store.Record) error {
	if err := r.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	var cur int64
	if old, ok := s.records[[2]string{r.Kind, r.ID}]; ok && recordLive(old, time.Now()) {
		cur = old.Version
	}
	if cur != r.Version-1 {
		return fmt.Errorf("put record %s/%s: current version %d: %w", r.Kind, r.ID, cur, store.ErrConflict)
	}
	if s.records == nil {
		s.records = map[[2]string]store.Record{}
	}
	s.records[[2]string{r.Kind, r.ID}] = *cloneRecord(r)
	return nil
}

func (s *memStore) ListRecords(ctx context.Context, kind string) ([]*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	now := time.Now()
	var out []*store.Record
	for k, r := range s.records {
		if k[0] == kind && recordLive(r, now) {
			out = append(out, cloneRecord(r))
		}
	}
	slices.SortFunc(out, func(a, b *store.Record) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *memStore) DeleteRecord(ctx context.Context, kind, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	delete(s.records, [2]string{kind, id})
	return nil
}

// Purge drops every version of the oldest-first victims. (Seqs of later
// versions shift: a history cursor taken before a purge is not valid
// after it, which no test needs.)
func (s *memStore) Purge(ctx context.Context, typ string, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	current := map[string]time.Time{}
	for _, v := range s.versions {
		if v.Type == typ {
			current[v.ID] = v.LastUpdated
		}
	}
	var ids []string
	for id, lu := range current {
		if lu.Before(before) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	victims := map[string]bool{}
	for _, id := range ids[:min(limit, len(ids))] {
		victims[id] = true
	}
	s.versions = slices.DeleteFunc(s.versions, func(v memVersion) bool { return v.Type == typ && victims[v.ID] })
	return len(victims), nil
}

var (
	_ store.Sequencer = (*memStore)(nil)
	_ store.Rewriter  = (*memStore)(nil)
	_ store.Rewriter  = (*memTx)(nil)
)

func (s *memStore) NextValue(ctx context.Context, name string) (int64, error) {
	if err := store.CheckSequenceName(name); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	if s.seqs == nil {
		s.seqs = map[string]int64{}
	}
	s.seqs[name]++
	return s.seqs[name], nil
}

func (s *memStore) Rewrite(ctx context.Context, w store.Write) error {
	if err := w.CheckRewrite(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	vs, err := rewrite(s.snapshot(), w)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.versions = vs
	s.mu.Unlock()
	return nil
}

func (t *memTx) Rewrite(ctx context.Context, w store.Write) error {
	if err := w.CheckRewrite(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	vs, err := rewrite(t.versions, w)
	if err != nil {
		return err
	}
	t.versions = vs
	return nil
}

// rewrite returns a copy of vs (snapshots share its array) with w's body
// in place of version w.Version's, and w's rows if that is the current
// version.
func rewrite(vs []memVersion, w store.Write) ([]memVersion, error) {
	at, current := -1, int64(0)
	for i, v := range vs {
		if v.Type == w.Type && v.ID == w.ID {
			current = max(current, v.Version.Version)
			if v.Version.Version == w.Version {
				at = i
			}
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("mem: rewrite %s/%s v%d: %w", w.Type, w.ID, w.Version, store.ErrNotFound)
	}
	if vs[at].Deleted {
		return nil, store.TombstoneRewrite(w)
	}
	out := slices.Clone(vs)
	out[at].Body = bytes.Clone(w.Body)
	if current == w.Version {
		out[at].index = cloneRows(w.Index)
	}
	return out, nil
}
