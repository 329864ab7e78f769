package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// This file compiles the search IR (search.Query) to SQL. Every value is a
// bound parameter; only aliases and integer limits are written into the
// text, so equal query shapes give equal SQL and share a prepared statement.
//
// A query runs as one "driver" that yields candidate rids and a join to
// resources whose WHERE probes every other clause for that one resource
// (EXISTS on the index tables' per-resource keys). SQLite's planner cannot
// tell which clause is selective: both "subject=Patient/1" and "code=X" are
// equality lookups on the same index, and statistics are per index, not per
// value. So the compiler picks the driver itself, by counting (with a bound)
// the rows each candidate clause would yield, and pins that join order with
// CROSS JOIN. Without a selective clause, the driver is a walk of the
// type's resources in rid order, probing each until the page is full.

// sqlb is SQL text with its bound arguments in order.
type sqlb struct {
	b    strings.Builder
	args []any
}

func (s *sqlb) w(text string, args ...any) *sqlb {
	s.b.WriteString(text)
	s.args = append(s.args, args...)
	return s
}

func (s *sqlb) add(o *sqlb) *sqlb {
	s.b.WriteString(o.b.String())
	s.args = append(s.args, o.args...)
	return s
}

func (s *sqlb) String() string { return s.b.String() }

// jsonPath is the JSON path of member key of an object.
func jsonPath(key string) string {
	q, _ := json.Marshal(key) // a string always marshals
	return "$." + string(q)
}

// tuning holds the planner's thresholds (tests shrink them to reach every
// plan with a small fixture). estimateLimit bounds the row count of a
// driver estimate; selectiveEnough ends the estimates early (a driver this
// small cannot be beaten by much). sortWalk (tests only) makes every
// sorted query that can walk its sort rows do so.
type tuning struct {
	estimateLimit, selectiveEnough int
	sortWalk                       bool
}

var defaultTuning = tuning{estimateLimit: 2000, selectiveEnough: 64}

// compiler compiles one query; estimate runs a counting query (on the same
// connection pool or transaction as the search).
type compiler struct {
	ctx      context.Context
	estimate func(ctx context.Context, s *sqlb, limit int) (int, error)
	// known returns a recent estimate of up to limit rows without
	// counting; nil: none is kept.
	known func(s *sqlb, limit int) (int, bool)
	tune  tuning
	n     int // alias counter
}

func (c *compiler) alias(prefix string) string {
	c.n++
	return prefix + strconv.Itoa(c.n)
}

// typeFilter restricts an index table (column col) to the query's types
// and to the match's own type.
func typeFilter(s *sqlb, col string, types []string, mtype string) {
	if mtype != "" {
		s.w(" AND "+col+" = ?", mtype)
	}
	switch len(types) {
	case 0:
	case 1:
		s.w(" AND "+col+" = ?", types[0])
	default:
		s.w(" AND " + col + " IN (" + placeholders(len(types)) + ")")
		for _, t := range types {
			s.args = append(s.args, t)
		}
	}
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// clauseDriver is a SELECT of the rids matching one drivable clause,
// each once unless !distinct.
func (c *compiler) clauseDriver(cl *search.Clause, types []string, distinct bool) (*sqlb, error) {
	ms := anyOf(cl)
	if len(ms) == 1 {
		return c.matchDriver(&ms[0], types, distinct)
	}
	arms := make([]*sqlb, len(ms))
	for i := range ms {
		d, err := c.matchDriver(&ms[i], types, false)
		if err != nil {
			return nil, err
		}
		arms[i] = d
	}
	return union(arms), nil
}

// anyOf is the matches of cl with its plain key lookups of one type
// merged into one (key IN (…)): a comma list of a thousand codes is one
// index probe per resource, not a thousand, and one SELECT, not a union
// of a thousand. cl is not changed.
func anyOf(cl *search.Clause) []search.Match {
	n := 0
	for i := range cl.Any {
		if m := &cl.Any[i]; m.Op == search.OpKey && !m.Not {
			n++
		}
	}
	if n < 2 {
		return cl.Any
	}
	out := make([]search.Match, 0, len(cl.Any)-n+1)
	merged := map[string]int{} // by the match's type: its index in out
	for _, m := range cl.Any {
		if m.Op != search.OpKey || m.Not {
			out = append(out, m)
			continue
		}
		if i, ok := merged[m.Type]; ok {
			out[i].Keys = append(out[i].Keys, m.Keys...)
			continue
		}
		merged[m.Type] = len(out)
		m.Keys = slices.Clone(m.Keys) // appended to: not the query's own
		out = append(out, m)
	}
	return out
}

// maxCompound is the most SELECTs union joins in one compound SELECT;
// SQLite refuses more than 500 (SQLITE_MAX_COMPOUND_SELECT).
const maxCompound = 256

// union is the set union (no duplicates) of SELECTs of rid. Past
// maxCompound of them, groups are unions of their own, nested as
// subqueries, so a comma list of a thousand values still compiles.
func union(arms []*sqlb) *sqlb {
	for len(arms) > maxCompound {
		var groups []*sqlb
		for i := 0; i < len(arms); i += maxCompound {
			g := &sqlb{}
			g.w("SELECT rid FROM (").add(union(arms[i:min(i+maxCompound, len(arms))])).w(")")
			groups = append(groups, g)
		}
		arms = groups
	}
	s := &sqlb{}
	for i, a := range arms {
		if i > 0 {
			s.w(" UNION ")
		}
		s.add(a)
	}
	return s
}

// balanced writes n terms joined by op (" AND ", " OR ") as a balanced
// tree of parentheses. SQLite refuses an expression nested more than 1000
// deep, and a flat chain of n terms nests n deep; the tree nests log2(n).
func balanced(s *sqlb, op string, n int, term func(i int) error) error {
	var span func(lo, hi int) error
	span = func(lo, hi int) error {
		if hi-lo == 1 {
			return term(lo)
		}
		mid := (lo + hi) / 2
		s.w("(")
		if err := span(lo, mid); err != nil {
			return err
		}
		s.w(op)
		if err := span(mid, hi); err != nil {
			return err
		}
		s.w(")")
		return nil
	}
	return span(0, n)
}

// matchDriver is a SELECT of the rids having a row that satisfies m,
// DISTINCT when asked and needed.
func (c *compiler) matchDriver(m *search.Match, types []string, distinct bool) (*sqlb, error) {
	sel := "SELECT rid"
	if distinct {
		sel = "SELECT DISTINCT rid"
	}
	s := &sqlb{}
	switch m.Op {
	case search.OpKey:
		if len(m.Keys) == 1 {
			s.w("SELECT rid FROM search_keys WHERE key = ?", m.Keys[0])
		} else {
			s.w(sel + " FROM search_keys WHERE key IN (" + placeholders(len(m.Keys)) + ")")
			for _, k := range m.Keys {
				s.args = append(s.args, k)
			}
		}
		typeFilter(s, "type", types, m.Type)
	case search.OpKeyPrefix, search.OpKeyContains:
		s.w(sel + " FROM search_keys WHERE ")
		prefixRange(s, "key", m.Prefix)
		if m.Op == search.OpKeyContains {
			containsTest(s, "key", m.Prefix, m.Contains)
		}
		typeFilter(s, "type", types, m.Type)
	case search.OpDate, search.OpNumber:
		table, hint, test := rangeTable(m.Op)
		s.w(sel+" FROM "+table+" WHERE param = ?", m.Param)
		typeFilter(s, "type", types, m.Type)
		s.w(" AND ")
		hint(s, m)
		s.w(" AND ")
		test(s, m, "low", "high")
	case search.OpChain:
		target, err := chainTarget(m)
		if err != nil {
			return nil, err
		}
		sub, err := c.choose(m.Chain.Query, false)
		if err != nil {
			return nil, err
		}
		a := c.alias("c")
		from, where, err := c.fromWhere(m.Chain.Query, a, sub)
		if err != nil {
			return nil, err
		}
		k := c.alias("ck")
		s.w(strings.TrimSuffix(sel, "rid") + k + ".rid AS rid FROM (SELECT " + a + ".id AS id ")
		s.add(from).w(" WHERE ").add(where)
		s.w(") AS " + a + "x CROSS JOIN search_keys AS " + k + " ON " + k + ".key = ? || " + a + "x.id WHERE 1")
		s.args = append(s.args, m.Chain.RefParam+"\x1f"+target+"/")
		typeFilter(s, k+".type", types, m.Type)
	default:
		return nil, fmt.Errorf("sqlite store: search: op %d cannot drive a search", m.Op)
	}
	return s, nil
}

// prefixRange is col >= prefix AND col < the least string above every
// string starting with prefix. SQLite compares TEXT with memcmp of the
// UTF-8 bytes, so that bound is prefix with its last byte incremented
// (after dropping 0xFF bytes, which cannot be incremented); bound as TEXT
// even when the result is not valid UTF-8, which memcmp does not mind.
func prefixRange(s *sqlb, col, prefix string) {
	s.w(col+" >= ?", prefix)
	if hi, ok := prefixEnd(prefix); ok {
		s.w(" AND "+col+" < ?", hi)
	}
}

func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for len(b) > 0 && b[len(b)-1] == 0xFF {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "", false
	}
	b[len(b)-1]++
	return string(b), true
}

// containsTest: the remainder of col after prefix contains sub. substr
// counts characters for TEXT, hence the rune count. instr, unlike LIKE,
// has no wildcards to escape.
func containsTest(s *sqlb, col, prefix, sub string) {
	s.w(" AND instr(substr("+col+", ?), ?) > 0", utf8.RuneCountInString(prefix)+1, sub)
}

// satAdd is a+d clamped to int64 (an approximate date near the sentinels).
func satAdd(a int64, d float64) int64 {
	f := float64(a) + d
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	if d == 0 {
		return a
	}
	return int64(f)
}

// dateTest is the Cmp of m on a stored half-open range [lo, hi) against
// the query's [Low, High) (the table in query.go).
func dateTest(s *sqlb, m *search.Match, lo, hi string) {
	ql, qh := m.Low, m.High
	eq := func() { s.w("("+lo+" >= ? AND "+hi+" <= ?)", ql, qh) }
	switch m.Cmp {
	case search.CmpEq:
		eq()
	case search.CmpNe:
		s.w("NOT ")
		eq()
	case search.CmpGt:
		s.w(hi+" > ?", qh)
	case search.CmpLt:
		s.w(lo+" < ?", ql)
	case search.CmpGe:
		s.w("("+hi+" > ? OR ", qh)
		eq()
		s.w(")")
	case search.CmpLe:
		s.w("("+lo+" < ? OR ", ql)
		eq()
		s.w(")")
	case search.CmpSa:
		s.w(lo+" >= ?", qh)
	case search.CmpEb:
		s.w(hi+" <= ?", ql)
	case search.CmpAp:
		s.w("("+lo+" < ? AND "+hi+" > ?)", satAdd(qh, m.Approx), satAdd(ql, -m.Approx))
	default:
		s.w("0")
	}
}

// dateHint is a range on one indexed column implied by dateTest (a
// superset), so a date driver scans an index range, not the parameter.
func dateHint(s *sqlb, m *search.Match) {
	ql, qh := m.Low, m.High
	switch m.Cmp {
	case search.CmpEq:
		s.w("low BETWEEN ? AND ?", ql, qh)
	case search.CmpGt:
		s.w("high > ?", qh)
	case search.CmpLt:
		s.w("low < ?", ql)
	case search.CmpGe:
		s.w("high >= ?", ql)
	case search.CmpLe:
		s.w("low <= ?", qh)
	case search.CmpSa:
		s.w("low >= ?", qh)
	case search.CmpEb:
		s.w("high <= ?", ql)
	case search.CmpAp:
		s.w("low < ?", satAdd(qh, m.Approx))
	default:
		s.w("1")
	}
}

// numberTest is the Cmp of m on a stored inclusive range [lo, hi]: eq,
// ne and ap against the query's [NumLow, NumHigh) (inclusive at NumHigh
// when the query value is exact, NumLow == NumHigh), the others against
// the exact value NumLow.
func numberTest(s *sqlb, m *search.Match, lo, hi string) {
	v, ql, qh := m.NumLow, m.NumLow, m.NumHigh
	eq := func() {
		op := "<"
		if ql == qh {
			op = "<="
		}
		s.w("("+lo+" >= ? AND "+hi+" "+op+" ?)", ql, qh)
	}
	switch m.Cmp {
	case search.CmpEq:
		eq()
	case search.CmpNe:
		s.w("NOT ")
		eq()
	case search.CmpGt:
		s.w(hi+" > ?", v)
	case search.CmpLt:
		s.w(lo+" < ?", v)
	case search.CmpGe:
		s.w(hi+" >= ?", v)
	case search.CmpLe:
		s.w(lo+" <= ?", v)
	case search.CmpSa:
		s.w(lo+" > ?", v)
	case search.CmpEb:
		s.w(hi+" < ?", v)
	case search.CmpAp:
		s.w("("+lo+" <= ? AND "+hi+" >= ?)", qh+m.Approx, ql-m.Approx)
	default:
		s.w("0")
	}
}

func numberHint(s *sqlb, m *search.Match) {
	switch m.Cmp {
	case search.CmpEq:
		s.w("low BETWEEN ? AND ?", m.NumLow, m.NumHigh)
	case search.CmpAp:
		s.w("low <= ?", m.NumHigh+m.Approx)
	default:
		s.w("1") // the test itself is a range on one column
	}
}

// rangeTable is what date and number matches differ in: the table of
// their [low, high] rows and how a comparator reads on those columns.
func rangeTable(op search.Op) (table string, hint func(*sqlb, *search.Match), test func(s *sqlb, m *search.Match, lo, hi string)) {
	if op == search.OpDate {
		return "search_dates", dateHint, dateTest
	}
	return "search_numbers", numberHint, numberTest
}

func chainTarget(m *search.Match) (string, error) {
	if m.Chain == nil || m.Chain.Query == nil || len(m.Chain.Query.Types) != 1 {
		return "", fmt.Errorf("sqlite store: search: a chain needs a query of exactly one type")
	}
	return m.Chain.Query.Types[0], nil
}

// fromWhere is the FROM clause (ending with "resources AS a") and the WHERE
// conditions selecting the current, non-deleted resources of q.Types that
// match q.Where, driven by p. The rid to order and page by is ridExpr(a, p).
func (c *compiler) fromWhere(q *search.Query, a string, p plan) (from, where *sqlb, err error) {
	from, where = &sqlb{}, &sqlb{}
	if p.driver != nil {
		// CROSS JOIN pins the order: the driver is the outer loop.
		from.w("FROM (").add(p.driver).w(") AS " + a + "d CROSS JOIN resources AS " + a + " ON " + a + ".rid = " + a + "d.rid")
	} else {
		from.w("FROM resources AS " + a)
	}
	where.w(a + ".deleted = 0")
	typeFilter(where, a+".type", q.Types, "")
	var probed []int
	for i := range q.Where {
		if i != p.clause {
			probed = append(probed, i)
		}
	}
	if len(probed) > 0 {
		where.w(" AND ")
		err := balanced(where, " AND ", len(probed), func(j int) error {
			return c.clauseProbe(where, &q.Where[probed[j]], a, ridExpr(a, p))
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return from, where, nil
}

// ridExpr is the column to order and bound by: the driver's, so that
// range terms on it reach the driver's index.
func ridExpr(a string, p plan) string {
	if p.driver != nil {
		return a + "d.rid"
	}
	return a + ".rid"
}

// clauseProbe: resource a satisfies some match of cl.
//
// rid is the column holding a's rid: the driver's where there is one, so
// that SQLite tests the probe before it even reads the resources row.
func (c *compiler) clauseProbe(s *sqlb, cl *search.Clause, a, rid string) error {
	if len(cl.Any) == 0 {
		s.w("0") // an empty OR
		return nil
	}
	ms := anyOf(cl)
	s.w("(")
	err := balanced(s, " OR ", len(ms), func(i int) error {
		return c.matchProbe(s, &ms[i], a, rid)
	})
	s.w(")")
	return err
}

// maxSeekedKeys is the longest list of keys a probe looks up one by one;
// a resource has some tens of keys, so past it reading them is cheaper.
const maxSeekedKeys = 16

// matchProbe: resource a satisfies m. The type restriction stays outside
// the negation: a typed match never holds for another type.
func (c *compiler) matchProbe(s *sqlb, m *search.Match, a, rid string) error {
	s.w("(")
	if m.Type != "" {
		s.w(a+".type = ? AND ", m.Type)
	}
	// :missing=true is the absence of the sort row :missing=false finds.
	if m.Not != (m.Op == search.OpMissing && m.Missing) {
		s.w("NOT ")
	}
	s.w("EXISTS (SELECT 1 FROM ")
	switch m.Op {
	case search.OpKey:
		k := c.alias("k")
		// A long list is tested against the resource's few keys ('+'
		// keeps SQLite from seeking each listed key in the index).
		in := k + ".key IN ("
		if len(m.Keys) > maxSeekedKeys {
			in = "+" + in
		}
		s.w("search_keys AS " + k + " WHERE " + k + ".rid = " + rid + " AND " + in + placeholders(len(m.Keys)) + ")")
		for _, key := range m.Keys {
			s.args = append(s.args, key)
		}
	case search.OpKeyPrefix, search.OpKeyContains:
		k := c.alias("k")
		s.w("search_keys AS " + k + " WHERE " + k + ".rid = " + rid + " AND ")
		prefixRange(s, k+".key", m.Prefix)
		if m.Op == search.OpKeyContains {
			containsTest(s, k+".key", m.Prefix, m.Contains)
		}
	case search.OpDate, search.OpNumber:
		table, _, test := rangeTable(m.Op)
		x := c.alias("x")
		s.w(table+" AS "+x+" WHERE "+x+".rid = "+rid+" AND "+x+".param = ? AND ", m.Param)
		test(s, m, x+".low", x+".high")
	case search.OpMissing:
		x := c.alias("x")
		s.w("search_sort_values AS "+x+" WHERE "+x+".rid = "+rid+" AND json_type("+x+".vals, ?) IS NOT NULL", jsonPath(m.Param))
	case search.OpChain:
		target, err := chainTarget(m)
		if err != nil {
			return err
		}
		k, t := c.alias("k"), c.alias("t")
		prefix := m.Chain.RefParam + "\x1f" + target + "/"
		s.w("search_keys AS "+k+" CROSS JOIN resources AS "+t+" ON "+t+".type = ? AND "+t+".id = substr("+k+".key, ?) WHERE "+k+".rid = "+rid+" AND ",
			target, utf8.RuneCountInString(prefix)+1)
		prefixRange(s, k+".key", prefix)
		if err := c.subProbes(s, m.Chain.Query, t); err != nil {
			return err
		}
	case search.OpHas:
		if m.Has == nil || m.Has.Query == nil || len(m.Has.Query.Types) != 1 {
			return fmt.Errorf("sqlite store: search: _has needs a query of exactly one type")
		}
		k, h := c.alias("k"), c.alias("h")
		s.w("search_keys AS "+k+" CROSS JOIN resources AS "+h+" ON "+h+".rid = "+k+".rid WHERE "+k+".key = ? || "+a+".type || '/' || "+a+".id AND "+k+".type = ?",
			m.Has.Param+"\x1f", m.Has.Query.Types[0])
		if err := c.subProbes(s, m.Has.Query, h); err != nil {
			return err
		}
	default:
		return fmt.Errorf("sqlite store: search: unknown op %d", m.Op)
	}
	s.w("))")
	return nil
}

// subProbes adds the conditions of a chained or _has sub-query on the
// resource t it joined: current, not deleted, every clause.
func (c *compiler) subProbes(s *sqlb, q *search.Query, t string) error {
	s.w(" AND " + t + ".deleted = 0")
	for i := range q.Where {
		s.w(" AND ")
		if err := c.clauseProbe(s, &q.Where[i], t, t+".rid"); err != nil {
			return err
		}
	}
	return nil
}
