package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/compile"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/cursor"
)

// Search runs q on the reader pool.
func (s *Store) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	return runSearch(ctx, q, &runner{db: s.reader, cache: &s.searchStmts, estimates: &s.estimates, tune: s.tune})
}

// Search runs q inside the transaction: it sees the transaction's writes.
func (t *tx) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	t.mu.Lock() // a Put on another goroutine must not interleave
	defer t.mu.Unlock()
	return runSearch(ctx, q, &runner{tx: t.tx.Tx, tune: t.s.tune})
}

// stmtCache keeps the prepared statements of search shapes. Values are
// bound, so a shape (which clauses, how many values) is one SQL text.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// stmtCacheSize bounds the cache; past it, new shapes run unprepared.
const stmtCacheSize = 512

func (c *stmtCache) get(ctx context.Context, db *sql.DB, text string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.m[text]
	full := len(c.m) >= stmtCacheSize
	c.mu.Unlock()
	if ok || full {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[text]; ok { // prepared concurrently
		st.Close()
		return prev, nil
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[text] = st
	return st, nil
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.m {
		errs = append(errs, st.Close())
	}
	c.m = nil
	return errors.Join(errs...)
}

// runner runs search statements on the reader pool (prepared and cached)
// or inside a transaction. A transaction holds the writer's only
// connection, where preparing through the pool would wait on itself, so
// it runs its statements unprepared.
type runner struct {
	db        *sql.DB
	cache     *stmtCache
	estimates *estimateCache // nil: count every time
	tx        *sql.Tx
	tune      compile.Tuning
}

func (r *runner) query(ctx context.Context, s *compile.SQL) (*sql.Rows, error) {
	text := s.String()
	if r.tx != nil {
		return r.tx.QueryContext(ctx, text, s.Args()...)
	}
	st, err := r.cache.get(ctx, r.db, text)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return r.db.QueryContext(ctx, text, s.Args()...)
	}
	return st.QueryContext(ctx, s.Args()...)
}

func (r *runner) count(ctx context.Context, s *compile.SQL) (int, error) {
	rows, err := r.query(ctx, s)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	return n, rows.Err()
}

// countUpTo counts the rows of a driver, up to limit.
func (r *runner) countUpTo(ctx context.Context, d *compile.SQL, limit int) (int, error) {
	s := (&compile.SQL{}).Text("SELECT count(*) FROM (").Append(d).Text(" LIMIT " + strconv.Itoa(limit) + ")")
	return r.count(ctx, s)
}

// hit is one row of a page: enough to fetch its version and to build a
// cursor at it.
type hit struct {
	rid, seq int64
	vals     []any
	version  *store.Version // read with the page (see compile.PageArm.Bodies), else nil
}

func runSearch(ctx context.Context, q *search.Query, r *runner) (*store.SearchPage, error) {
	if q == nil {
		return nil, errors.New("sqlite store: search: nil query")
	}
	if q.Count < 0 {
		return nil, fmt.Errorf("sqlite store: search: count must be >= 0, got %d", q.Count)
	}
	hash := cursor.SearchHash(q)
	var cur *cursor.Search
	if q.Cursor != "" {
		c, err := cursor.DecodeSearch(q.Cursor)
		if err != nil {
			return nil, err
		}
		if c.Query != hash || len(c.Vals) != len(q.Sort) {
			return nil, fmt.Errorf("sqlite store: search: cursor was issued for another query: %w", store.ErrBadCursor)
		}
		cur = &c
	}
	fail := func(err error) (*store.SearchPage, error) { return nil, wrapErr(ctx, "search", err) }
	if err := compile.CheckSorts(q.Sort); err != nil {
		return fail(err)
	}

	c := &compile.Compiler{Ctx: ctx, Estimate: r.estimate, Tune: r.tune}
	if r.estimates != nil {
		c.Known = func(d *compile.SQL, limit int) (int, bool) { return r.estimates.get(estimateKey(d), limit) }
	}
	p, err := c.Choose(q, len(q.Sort) > 0)
	if err != nil {
		return fail(err)
	}
	const a = "a"
	from, where, err := c.FromWhere(q, a, p)
	if err != nil {
		return fail(err)
	}
	page := &store.SearchPage{Total: -1}
	cheap := p.Driver != nil && p.Estimate >= 0 && p.Estimate < r.tune.EstimateLimit
	if q.Total == search.TotalAccurate || q.Total == search.TotalEstimate && cheap {
		n, err := r.count(ctx, (&compile.SQL{}).Text("SELECT count(*) ").Append(from).Text(" WHERE ").Append(where))
		if err != nil {
			return fail(err)
		}
		page.Total = int64(n)
	}
	if q.Count == 0 {
		return page, nil
	}

	hits, maxRid, more, err := pageHits(ctx, r, q, p, from, where, cur)
	if err != nil {
		return fail(err)
	}
	back := cur != nil && cur.Back
	if back {
		slices.Reverse(hits)
	}
	at := func(h hit, back bool) string {
		return cursor.Search{Back: back, Query: hash, MaxRid: maxRid, Rid: h.rid, Vals: h.vals}.Encode()
	}
	here := func(back bool) string { // a cursor at the position asked for
		c := *cur
		c.Back = back
		return c.Encode()
	}
	switch {
	case len(hits) == 0 && cur != nil:
		if back {
			page.Next = here(false)
		} else {
			page.Prev = here(true)
		}
	case len(hits) == 0:
	case back:
		page.Next = at(hits[len(hits)-1], false)
		if more {
			page.Prev = at(hits[0], true)
		}
	default:
		if more {
			page.Next = at(hits[len(hits)-1], false)
		}
		if cur != nil {
			page.Prev = at(hits[0], true)
		}
	}

	if len(hits) > 0 && hits[0].version != nil {
		page.Matches = make([]*store.Version, len(hits))
		for i, h := range hits {
			page.Matches[i] = h.version
		}
	} else {
		seqs := make([]int64, len(hits))
		for i, h := range hits {
			seqs[i] = h.seq
		}
		if page.Matches, err = fetchSeqs(ctx, r, seqs); err != nil {
			return fail(err)
		}
	}
	if len(q.Include)+len(q.RevInclude) > 0 && len(hits) > 0 {
		rids := make([]int64, len(hits))
		for i, h := range hits {
			rids[i] = h.rid
		}
		page.Included, err = includes(ctx, r, q, rids, page.Matches)
		if err != nil {
			return fail(err)
		}
	}
	return page, nil
}

// pageHits selects the page: Count+1 rows after (or, paging back, before)
// the cursor in the query's order, the extra one telling whether there is
// more. Keyset only: the cursor's position becomes a WHERE condition, so a
// page costs the same wherever it is.
func pageHits(ctx context.Context, r *runner, q *search.Query, p compile.Plan, from, where *compile.SQL, cur *cursor.Search) (hits []hit, maxRid int64, more bool, err error) {
	var s *compile.SQL
	// Rows that stream in rid order, unsorted, stop at the page: their
	// versions can be read in the same statement (one per row, the
	// extra one included) instead of by a second one. A sorted page
	// would carry every candidate's body through the sorter.
	bodies := !p.SortWalk && len(q.Sort) == 0 && (p.Driver == nil || p.Ordered)
	if p.SortWalk {
		s = compile.SortWalkSQL(q, from, where, cur)
	} else {
		s = compile.PageSQL(q, compile.PageArm{From: from, Where: where, Rid: compile.RidExpr("a", p), Cur: cur, Keyset: cur != nil, Bodies: bodies})
	}
	rows, err := r.query(ctx, s)
	if err != nil {
		return nil, 0, false, err
	}
	defer rows.Close()
	maxRid = -1
	if cur != nil {
		maxRid = cur.MaxRid
	}
	for rows.Next() {
		if len(hits) == q.Count {
			more = true
			break
		}
		h := hit{vals: make([]any, len(q.Sort))}
		var mr sql.NullInt64
		dst := []any{&h.rid, &h.seq}
		for i := range h.vals {
			dst = append(dst, &h.vals[i])
		}
		dst = append(dst, &mr)
		var lu int64
		var method string
		if bodies {
			h.version = &store.Version{}
			dst = append(dst, &h.version.Type, &h.version.ID, &h.version.Version, &lu, &method, &h.version.Body)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, 0, false, err
		}
		if bodies {
			h.version.LastUpdated, h.version.Method = fromMicros(lu), store.Method(method)
		}
		for i, v := range h.vals {
			if b, ok := v.([]byte); ok {
				h.vals[i] = string(b)
			}
		}
		if cur == nil {
			maxRid = mr.Int64
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, false, err
	}
	return hits, maxRid, more, rows.Close()
}

const fetchSQL = `SELECT v.seq, v.type, v.id, v.version, v.last_updated, v.method, v.body
	FROM resource_versions AS v WHERE v.seq IN (SELECT value FROM json_each(?)) AND v.deleted = 0`

// fetchSeqs reads the versions with the given seqs, in that order. A
// version is immutable, so reading it after the page query still returns
// what the page selected.
func fetchSeqs(ctx context.Context, r *runner, seqs []int64) ([]*store.Version, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	rows, err := r.query(ctx, (&compile.SQL{}).Text(fetchSQL, intsJSON(seqs)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	bySeq := make(map[int64]*store.Version, len(seqs))
	for rows.Next() {
		v := &store.Version{}
		var seq, lu int64
		var method string
		if err := rows.Scan(&seq, &v.Type, &v.ID, &v.Version, &lu, &method, &v.Body); err != nil {
			return nil, err
		}
		v.LastUpdated, v.Method = fromMicros(lu), store.Method(method)
		bySeq[seq] = v
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]*store.Version, 0, len(seqs))
	for _, s := range seqs {
		if v := bySeq[s]; v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}

func intsJSON(xs []int64) string {
	b := []byte{'['}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return string(append(b, ']'))
}
