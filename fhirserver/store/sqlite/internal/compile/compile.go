// Package compile compiles the search IR (search.Query) to the SQL of the
// SQLite store: it chooses which clause drives a query from bounded
// counts of each clause's rows (the planner), writes the other clauses as
// per-resource probes, and builds the statement of a page (its sort
// expressions, the order it reads rows in, the keyset condition of a
// cursor). It runs nothing itself: counts go through Compiler.Estimate.
package compile

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

// SQL is SQL text with its bound arguments in order.
type SQL struct {
	b    strings.Builder
	args []any
}

// Text appends text and the arguments of its placeholders.
func (s *SQL) Text(text string, args ...any) *SQL {
	s.b.WriteString(text)
	s.args = append(s.args, args...)
	return s
}

// Append appends o, text and arguments.
func (s *SQL) Append(o *SQL) *SQL {
	s.b.WriteString(o.b.String())
	s.args = append(s.args, o.args...)
	return s
}

func (s *SQL) String() string { return s.b.String() }

// Args are the bound arguments, in the order of their placeholders.
func (s *SQL) Args() []any { return s.args }

// jsonPath is the JSON path of member key of an object.
func jsonPath(key string) string {
	q, _ := json.Marshal(key) // a string always marshals
	return "$." + string(q)
}

// Tuning holds the planner's thresholds (tests shrink them to reach every
// plan with a small fixture). EstimateLimit bounds the row count of a
// driver estimate; SelectiveEnough ends the estimates early (a driver this
// small cannot be beaten by much). SortWalk (tests only) makes every
// sorted query that can walk its sort rows do so.
type Tuning struct {
	EstimateLimit, SelectiveEnough int
	SortWalk                       bool
}

// DefaultTuning is the store's.
var DefaultTuning = Tuning{EstimateLimit: 2000, SelectiveEnough: 64}

// Compiler compiles one query; Estimate runs a counting query (on the
// same connection pool or transaction as the search).
type Compiler struct {
	Ctx      context.Context
	Estimate func(ctx context.Context, s *SQL, limit int) (int, error)
	// Known returns a recent estimate of up to limit rows without
	// counting; nil: none is kept.
	Known func(s *SQL, limit int) (int, bool)
	Tune  Tuning
	n     int // alias counter
}

func (c *Compiler) alias(prefix string) string {
	c.n++
	return prefix + strconv.Itoa(c.n)
}

// typeFilter restricts an index table (column col) to the query's types
// and to the match's own type.
func typeFilter(s *SQL, col string, types []string, mtype string) {
	if mtype != "" {
		s.Text(" AND "+col+" = ?", mtype)
	}
	switch len(types) {
	case 0:
	case 1:
		s.Text(" AND "+col+" = ?", types[0])
	default:
		s.Text(" AND " + col + " IN (" + placeholders(len(types)) + ")")
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
func (c *Compiler) clauseDriver(cl *search.Clause, types []string, distinct bool) (*SQL, error) {
	ms := anyOf(cl)
	if len(ms) == 1 {
		return c.matchDriver(&ms[0], types, distinct)
	}
	arms := make([]*SQL, len(ms))
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
func union(arms []*SQL) *SQL {
	for len(arms) > maxCompound {
		var groups []*SQL
		for i := 0; i < len(arms); i += maxCompound {
			g := &SQL{}
			g.Text("SELECT rid FROM (").Append(union(arms[i:min(i+maxCompound, len(arms))])).Text(")")
			groups = append(groups, g)
		}
		arms = groups
	}
	s := &SQL{}
	for i, a := range arms {
		if i > 0 {
			s.Text(" UNION ")
		}
		s.Append(a)
	}
	return s
}

// balanced writes n terms joined by op (" AND ", " OR ") as a balanced
// tree of parentheses. SQLite refuses an expression nested more than 1000
// deep, and a flat chain of n terms nests n deep; the tree nests log2(n).
func balanced(s *SQL, op string, n int, term func(i int) error) error {
	var span func(lo, hi int) error
	span = func(lo, hi int) error {
		if hi-lo == 1 {
			return term(lo)
		}
		mid := (lo + hi) / 2
		s.Text("(")
		if err := span(lo, mid); err != nil {
			return err
		}
		s.Text(op)
		if err := span(mid, hi); err != nil {
			return err
		}
		s.Text(")")
		return nil
	}
	return span(0, n)
}

// matchDriver is a SELECT of the rids having a row that satisfies m,
// DISTINCT when asked and needed.
func (c *Compiler) matchDriver(m *search.Match, types []string, distinct bool) (*SQL, error) {
	sel := "SELECT rid"
	if distinct {
		sel = "SELECT DISTINCT rid"
	}
	s := &SQL{}
	switch m.Op {
	case search.OpKey:
		if len(m.Keys) == 1 {
			s.Text("SELECT rid FROM search_keys WHERE key = ?", m.Keys[0])
		} else {
			s.Text(sel + " FROM search_keys WHERE key IN (" + placeholders(len(m.Keys)) + ")")
			for _, k := range m.Keys {
				s.args = append(s.args, k)
			}
		}
		typeFilter(s, "type", types, m.Type)
	case search.OpKeyPrefix, search.OpKeyContains:
		s.Text(sel + " FROM search_keys WHERE ")
		PrefixRange(s, "key", m.Prefix)
		if m.Op == search.OpKeyContains {
			containsTest(s, "key", m.Prefix, m.Contains)
		}
		typeFilter(s, "type", types, m.Type)
	case search.OpDate, search.OpNumber:
		table, hint, test := rangeTable(m.Op)
		s.Text(sel+" FROM "+table+" WHERE param = ?", m.Param)
		typeFilter(s, "type", types, m.Type)
		s.Text(" AND ")
		hint(s, m)
		s.Text(" AND ")
		test(s, m, "low", "high")
	case search.OpChain:
		target, err := chainTarget(m)
		if err != nil {
			return nil, err
		}
		sub, err := c.Choose(m.Chain.Query, false)
		if err != nil {
			return nil, err
		}
		a := c.alias("c")
		from, where, err := c.FromWhere(m.Chain.Query, a, sub)
		if err != nil {
			return nil, err
		}
		k := c.alias("ck")
		s.Text(strings.TrimSuffix(sel, "rid") + k + ".rid AS rid FROM (SELECT " + a + ".id AS id ")
		s.Append(from).Text(" WHERE ").Append(where)
		s.Text(") AS " + a + "x CROSS JOIN search_keys AS " + k + " ON " + k + ".key = ? || " + a + "x.id WHERE 1")
		s.args = append(s.args, m.Chain.RefParam+"\x1f"+target+"/")
		typeFilter(s, k+".type", types, m.Type)
	default:
		return nil, fmt.Errorf("sqlite store: search: op %d cannot drive a search", m.Op)
	}
	return s, nil
}

// PrefixRange is col >= prefix AND col < the least string above every
// string starting with prefix. SQLite compares TEXT with memcmp of the
// UTF-8 bytes, so that bound is prefix with its last byte incremented
// (after dropping 0xFF bytes, which cannot be incremented); bound as TEXT
// even when the result is not valid UTF-8, which memcmp does not mind.
func PrefixRange(s *SQL, col, prefix string) {
	s.Text(col+" >= ?", prefix)
	if hi, ok := prefixEnd(prefix); ok {
		s.Text(" AND "+col+" < ?", hi)
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
func containsTest(s *SQL, col, prefix, sub string) {
	s.Text(" AND instr(substr("+col+", ?), ?) > 0", utf8.RuneCountInString(prefix)+1, sub)
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
func dateTest(s *SQL, m *search.Match, lo, hi string) {
	ql, qh := m.Low, m.High
	eq := func() { s.Text("("+lo+" >= ? AND "+hi+" <= ?)", ql, qh) }
	switch m.Cmp {
	case search.CmpEq:
		eq()
	case search.CmpNe:
		s.Text("NOT ")
		eq()
	case search.CmpGt:
		s.Text(hi+" > ?", qh)
	case search.CmpLt:
		s.Text(lo+" < ?", ql)
	case search.CmpGe:
		s.Text("("+hi+" > ? OR ", qh)
		eq()
		s.Text(")")
	case search.CmpLe:
		s.Text("("+lo+" < ? OR ", ql)
		eq()
		s.Text(")")
	case search.CmpSa:
		s.Text(lo+" >= ?", qh)
	case search.CmpEb:
		s.Text(hi+" <= ?", ql)
	case search.CmpAp:
		s.Text("("+lo+" < ? AND "+hi+" > ?)", satAdd(qh, m.Approx), satAdd(ql, -m.Approx))
	default:
		s.Text("0")
	}
}

// dateHint is a range on one indexed column implied by dateTest (a
// superset), so a date driver scans an index range, not the parameter.
func dateHint(s *SQL, m *search.Match) {
	ql, qh := m.Low, m.High
	switch m.Cmp {
	case search.CmpEq:
		s.Text("low BETWEEN ? AND ?", ql, qh)
	case search.CmpGt:
		s.Text("high > ?", qh)
	case search.CmpLt:
		s.Text("low < ?", ql)
	case search.CmpGe:
		s.Text("high >= ?", ql)
	case search.CmpLe:
		s.Text("low <= ?", qh)
	case search.CmpSa:
		s.Text("low >= ?", qh)
	case search.CmpEb:
		s.Text("high <= ?", ql)
	case search.CmpAp:
		s.Text("low < ?", satAdd(qh, m.Approx))
	default:
		s.Text("1")
	}
}

// numberTest is the Cmp of m on a stored inclusive range [lo, hi]: eq,
// ne and ap against the query's [NumLow, NumHigh) (inclusive at NumHigh
// when the query value is exact, NumLow == NumHigh), the others against
// the exact value NumLow.
func numberTest(s *SQL, m *search.Match, lo, hi string) {
	v, ql, qh := m.NumLow, m.NumLow, m.NumHigh
	eq := func() {
		op := "<"
		if ql == qh {
			op = "<="
		}
		s.Text("("+lo+" >= ? AND "+hi+" "+op+" ?)", ql, qh)
	}
	switch m.Cmp {
	case search.CmpEq:
		eq()
	case search.CmpNe:
		s.Text("NOT ")
		eq()
	case search.CmpGt:
		s.Text(hi+" > ?", v)
	case search.CmpLt:
		s.Text(lo+" < ?", v)
	case search.CmpGe:
		s.Text(hi+" >= ?", v)
	case search.CmpLe:
		s.Text(lo+" <= ?", v)
	case search.CmpSa:
		s.Text(lo+" > ?", v)
	case search.CmpEb:
		s.Text(hi+" < ?", v)
	case search.CmpAp:
		s.Text("("+lo+" <= ? AND "+hi+" >= ?)", qh+m.Approx, ql-m.Approx)
	default:
		s.Text("0")
	}
}

func numberHint(s *SQL, m *search.Match) {
	switch m.Cmp {
	case search.CmpEq:
		s.Text("low BETWEEN ? AND ?", m.NumLow, m.NumHigh)
	case search.CmpAp:
		s.Text("low <= ?", m.NumHigh+m.Approx)
	default:
		s.Text("1") // the test itself is a range on one column
	}
}

// rangeTable is what date and number matches differ in: the table of
// their [low, high] rows and how a comparator reads on those columns.
func rangeTable(op search.Op) (table string, hint func(*SQL, *search.Match), test func(s *SQL, m *search.Match, lo, hi string)) {
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

// FromWhere is the FROM clause (ending with "resources AS a") and the WHERE
// conditions selecting the current, non-deleted resources of q.Types that
// match q.Where, driven by p. The rid to order and page by is RidExpr(a, p).
func (c *Compiler) FromWhere(q *search.Query, a string, p Plan) (from, where *SQL, err error) {
	from, where = &SQL{}, &SQL{}
	if p.Driver != nil {
		// CROSS JOIN pins the order: the driver is the outer loop.
		from.Text("FROM (").Append(p.Driver).Text(") AS " + a + "d CROSS JOIN resources AS " + a + " ON " + a + ".rid = " + a + "d.rid")
	} else {
		from.Text("FROM resources AS " + a)
	}
	where.Text(a + ".deleted = 0")
	typeFilter(where, a+".type", q.Types, "")
	var probed []int
	for i := range q.Where {
		if i != p.Clause {
			probed = append(probed, i)
		}
	}
	if len(probed) > 0 {
		where.Text(" AND ")
		err := balanced(where, " AND ", len(probed), func(j int) error {
			return c.clauseProbe(where, &q.Where[probed[j]], a, RidExpr(a, p))
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return from, where, nil
}

// RidExpr is the column to order and bound by: the driver's, so that
// range terms on it reach the driver's index.
func RidExpr(a string, p Plan) string {
	if p.Driver != nil {
		return a + "d.rid"
	}
	return a + ".rid"
}

// clauseProbe: resource a satisfies some match of cl.
//
// rid is the column holding a's rid: the driver's where there is one, so
// that SQLite tests the probe before it even reads the resources row.
func (c *Compiler) clauseProbe(s *SQL, cl *search.Clause, a, rid string) error {
	if len(cl.Any) == 0 {
		s.Text("0") // an empty OR
		return nil
	}
	ms := anyOf(cl)
	s.Text("(")
	err := balanced(s, " OR ", len(ms), func(i int) error {
		return c.matchProbe(s, &ms[i], a, rid)
	})
	s.Text(")")
	return err
}

// maxSeekedKeys is the longest list of keys a probe looks up one by one;
// a resource has some tens of keys, so past it reading them is cheaper.
const maxSeekedKeys = 16

// matchProbe: resource a satisfies m. The type restriction stays outside
// the negation: a typed match never holds for another type.
func (c *Compiler) matchProbe(s *SQL, m *search.Match, a, rid string) error {
	s.Text("(")
	if m.Type != "" {
		s.Text(a+".type = ? AND ", m.Type)
	}
	// :missing=true is the absence of the sort row :missing=false finds.
	if m.Not != (m.Op == search.OpMissing && m.Missing) {
		s.Text("NOT ")
	}
	s.Text("EXISTS (SELECT 1 FROM ")
	switch m.Op {
	case search.OpKey:
		k := c.alias("k")
		// A long list is tested against the resource's few keys ('+'
		// keeps SQLite from seeking each listed key in the index).
		in := k + ".key IN ("
		if len(m.Keys) > maxSeekedKeys {
			in = "+" + in
		}
		s.Text("search_keys AS " + k + " WHERE " + k + ".rid = " + rid + " AND " + in + placeholders(len(m.Keys)) + ")")
		for _, key := range m.Keys {
			s.args = append(s.args, key)
		}
	case search.OpKeyPrefix, search.OpKeyContains:
		k := c.alias("k")
		s.Text("search_keys AS " + k + " WHERE " + k + ".rid = " + rid + " AND ")
		PrefixRange(s, k+".key", m.Prefix)
		if m.Op == search.OpKeyContains {
			containsTest(s, k+".key", m.Prefix, m.Contains)
		}
	case search.OpDate, search.OpNumber:
		table, _, test := rangeTable(m.Op)
		x := c.alias("x")
		s.Text(table+" AS "+x+" WHERE "+x+".rid = "+rid+" AND "+x+".param = ? AND ", m.Param)
		test(s, m, x+".low", x+".high")
	case search.OpMissing:
		x := c.alias("x")
		s.Text("search_sort_values AS "+x+" WHERE "+x+".rid = "+rid+" AND json_type("+x+".vals, ?) IS NOT NULL", jsonPath(m.Param))
	case search.OpChain:
		target, err := chainTarget(m)
		if err != nil {
			return err
		}
		k, t := c.alias("k"), c.alias("t")
		prefix := m.Chain.RefParam + "\x1f" + target + "/"
		s.Text("search_keys AS "+k+" CROSS JOIN resources AS "+t+" ON "+t+".type = ? AND "+t+".id = substr("+k+".key, ?) WHERE "+k+".rid = "+rid+" AND ",
			target, utf8.RuneCountInString(prefix)+1)
		PrefixRange(s, k+".key", prefix)
		if err := c.subProbes(s, m.Chain.Query, t); err != nil {
			return err
		}
	case search.OpHas:
		if m.Has == nil || m.Has.Query == nil || len(m.Has.Query.Types) != 1 {
			return fmt.Errorf("sqlite store: search: _has needs a query of exactly one type")
		}
		k, h := c.alias("k"), c.alias("h")
		s.Text("search_keys AS "+k+" CROSS JOIN resources AS "+h+" ON "+h+".rid = "+k+".rid WHERE "+k+".key = ? || "+a+".type || '/' || "+a+".id AND "+k+".type = ?",
			m.Has.Param+"\x1f", m.Has.Query.Types[0])
		if err := c.subProbes(s, m.Has.Query, h); err != nil {
			return err
		}
	default:
		return fmt.Errorf("sqlite store: search: unknown op %d", m.Op)
	}
	s.Text("))")
	return nil
}

// subProbes adds the conditions of a chained or _has sub-query on the
// resource t it joined: current, not deleted, every clause.
func (c *Compiler) subProbes(s *SQL, q *search.Query, t string) error {
	s.Text(" AND " + t + ".deleted = 0")
	for i := range q.Where {
		s.Text(" AND ")
		if err := c.clauseProbe(s, &q.Where[i], t, t+".rid"); err != nil {
			return err
		}
	}
	return nil
}
