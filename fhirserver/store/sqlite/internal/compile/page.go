package compile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/cursor"
)

// The SQL of a page: its sort expressions, the order it reads rows in
// (the rid order of a driver or of a type, or a walk of the first sort
// key's index) and the keyset condition of a cursor.

// walkKind is the index a sorted page can walk its first key's rows in.
type walkKind int

const (
	walkNone    walkKind = iota
	walkDates            // search_dates_by_low or _by_high: a date's range ends
	walkKeys             // search_keys' primary key: a string's or uri's plain keys
	walkNumbers          // search_numbers_by_low: a number's or quantity's least low
)

// walkOf says which rows of sort key so hold its sort values in an
// index's order: a resource's least (greatest) value is its first row
// walking up (down).
func walkOf(so search.Sort) walkKind {
	if so.Param == "_id" || so.Param == "_lastUpdated" {
		return walkNone
	}
	switch so.Type {
	case "date":
		return walkDates
	case "string", "uri":
		return walkKeys
	case "number", "quantity":
		// Ascending only: search_numbers has no index by high, which a
		// descending sort (by the greatest high) would walk.
		if !so.Desc {
			return walkNumbers
		}
	}
	return walkNone
}

// walkFrom is the table a walk of so's rows reads, and the index it is
// pinned to ("": the table's primary key).
func walkFrom(so search.Sort) (table, index string) {
	switch {
	case walkOf(so) == walkKeys:
		return "search_keys", ""
	case walkOf(so) == walkNumbers:
		return "search_numbers", "search_numbers_by_low"
	case so.Desc:
		return "search_dates", "search_dates_by_high"
	}
	return "search_dates", "search_dates_by_low"
}

// numericSort says whether so's sort values are the least low and the
// greatest high of its number rows of any unit (param exactly).
func numericSort(so search.Sort) bool {
	return so.Type == "number" || so.Type == "quantity"
}

// walkedExpr is the sort value of the walked row s0 and the column its
// index orders it by.
func walkedExpr(so search.Sort) (value, order string) {
	switch {
	case walkOf(so) == walkKeys:
		// Bytes, not characters: substr on text would also stop at a NUL.
		return "CAST(substr(CAST(s0.key AS BLOB), " + strconv.Itoa(len(so.Param)+2) + ") AS TEXT)", "s0.key"
	case so.Desc:
		return "s0.high", "s0.high"
	}
	return "s0.low", "s0.low"
}

// sortExpr is the SQL of sort key i: a resources column for the special
// parameters; the walked row's value for the first key of a walk; for a
// date, string or uri the least (ascending) or greatest value of the
// rows a walk reads, and for a number or quantity of its rows of any
// unit, looked up by rid (an index probe, where parsing the JSON of the
// sort values cost twice as much); else (tokens, references: their keys
// have several forms) that value in the resource's sort values (sv,
// written by the store's sortValues).
//
// Codes are written into the text, not bound: the expression is repeated
// across the statement (select list, keyset, ORDER BY). CheckSorts keeps
// them to characters that need no quoting.
func sortExpr(a string, i int, s search.Sort, walked bool) string {
	x := "x" + strconv.Itoa(i)
	agg := "min"
	if s.Desc {
		agg = "max"
	}
	switch {
	case s.Param == "_id":
		return a + ".id"
	case s.Param == "_lastUpdated":
		return a + ".last_updated"
	case walked:
		v, _ := walkedExpr(s)
		return v
	case walkOf(s) == walkDates:
		col := x + ".low"
		if s.Desc {
			col = x + ".high"
		}
		return "(SELECT " + agg + "(" + col + ") FROM search_dates AS " + x + " WHERE " + x + ".rid = " + a + ".rid AND " + x + ".param = '" + s.Param + "')"
	case numericSort(s):
		col := x + ".low"
		if s.Desc {
			col = x + ".high"
		}
		return "(SELECT " + agg + "(" + col + ") FROM search_numbers AS " + x + " WHERE " + x + ".rid = " + a + ".rid AND " + x + ".param = '" + s.Param + "')"
	case walkOf(s) == walkKeys:
		return "(SELECT CAST(substr(CAST(" + agg + "(" + x + ".key) AS BLOB), " + strconv.Itoa(len(s.Param)+2) + ") AS TEXT) FROM search_keys AS " + x +
			" WHERE " + x + ".rid = " + a + ".rid AND " + x + ".key >= '" + s.Param + "' || char(31) AND " + x + ".key < '" + s.Param + "' || char(32))"
	}
	at := "[0]"
	if s.Desc {
		at = "[1]"
	}
	return "json_extract(sv.vals, '$.\"" + s.Param + "\"" + at + "')"
}

// CheckSorts refuses sort parameters whose code could not be written into
// SQL text and a JSON path literal as it is (search parameter codes never
// need to be).
func CheckSorts(sorts []search.Sort) error {
	for _, so := range sorts {
		if so.Param == "" || strings.IndexFunc(so.Param, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:$", r))
		}) >= 0 {
			return fmt.Errorf("sqlite store: search: cannot sort by parameter %q", so.Param)
		}
	}
	return nil
}

// PageArm is one SELECT of page rows (see PageSQL).
type PageArm struct {
	From, Where *SQL // from FromWhere
	Rid         string
	Cur         *cursor.Search // nil: the first page; else its MaxRid bounds the rows
	Keyset      bool           // the rows are past Cur (else Cur only bounds rids)
	// Sorted: the rows are the walked rows of the first key (s0, see
	// walkOf), one per resource, in the index's order. Null: only the
	// resources without a first sort value, which tie on it.
	Sorted, Null bool
	// Bodies: each row also carries its version (type, id, version,
	// last_updated, method, body), for rows that need no sorting.
	Bodies bool
}

// PageSQL is the SELECT of up to Count+1 rows: rid, seq, one value per
// sort key and the highest rid, in the page's order.
func PageSQL(q *search.Query, arm PageArm) *SQL {
	const a = "a"
	back := arm.Cur != nil && arm.Cur.Back
	rid := arm.Rid
	expr := func(i int) string { return sortExpr(a, i, q.Sort[i], arm.Sorted && i == 0) }
	s := &SQL{}
	s.Text("SELECT " + rid + ", " + a + ".seq")
	values := false
	for i, so := range q.Sort {
		s.Text(", " + expr(i))
		values = values || so.Param != "_id" && so.Param != "_lastUpdated" && walkOf(so) == walkNone && !numericSort(so)
	}
	s.Text(", (SELECT max(rid) FROM resources) ")
	if arm.Bodies {
		s.Text(", v.type, v.id, v.version, v.last_updated, v.method, v.body ")
	}
	var first search.Sort // the walked key, when arm.Sorted
	if arm.Sorted {
		first = q.Sort[0]
		// from is the walk of the type's resources, which this replaces.
		table, index := walkFrom(first)
		s.Text("FROM " + table + " AS s0")
		if index != "" {
			s.Text(" INDEXED BY " + index)
		}
		s.Text(" CROSS JOIN resources AS " + a + " ON " + a + ".rid = s0.rid")
	} else {
		s.Append(arm.From)
	}
	if values {
		s.Text(" LEFT JOIN search_sort_values AS sv ON sv.rid = " + a + ".rid")
	}
	if arm.Bodies {
		// Last in the join order: read only for rows that pass.
		s.Text(" CROSS JOIN resource_versions AS v ON v.seq = " + a + ".seq")
	}
	s.Text(" WHERE ")
	if arm.Sorted {
		walkWhere(s, first, q.Types[0])
		if arm.Keyset && arm.Cur.Vals[0] != nil {
			// Implied by the keyset, but a range the walk can start at.
			_, col := walkedExpr(first)
			v := arm.Cur.Vals[0]
			if walkOf(first) == walkKeys {
				str, _ := v.(string)
				v = first.Param + "\x1f" + str
			}
			if first.Desc != back {
				s.Text(col+" <= ? AND ", v)
			} else {
				s.Text(col+" >= ? AND ", v)
			}
		}
	}
	s.Append(arm.Where)
	if arm.Null {
		s.Text(" AND " + expr(0) + " IS NULL")
	}
	if arm.Cur != nil {
		s.Text(" AND "+rid+" <= ?", arm.Cur.MaxRid)
		if arm.Keyset {
			s.Text(" AND (")
			keyset(s, q.Sort, expr, rid, arm.Cur)
			s.Text(")")
		}
	}
	s.Text(" ORDER BY ")
	for i, so := range q.Sort {
		if i == 0 && arm.Null {
			continue // every row's is NULL
		}
		desc := so.Desc != back
		dir := " ASC NULLS LAST, "
		switch {
		case i == 0 && arm.Sorted:
			// The index's own order (no NULLs: NULLS would defeat it).
			_, col := walkedExpr(so)
			if desc {
				s.Text(col + " DESC, ")
			} else {
				s.Text(col + " ASC, ")
			}
			continue
		case desc && !back:
			dir = " DESC NULLS LAST, "
		case desc:
			dir = " DESC NULLS FIRST, "
		case back:
			dir = " ASC NULLS FIRST, "
		}
		s.Text(expr(i) + dir)
	}
	if back {
		s.Text(rid + " DESC")
	} else {
		s.Text(rid + " ASC")
	}
	// The limit is an integer of ours, not a value: written into the text
	// it lets the planner use a bounded sorter, and a bound LIMIT would
	// make SQLite re-prepare the statement on each run.
	s.Text(" LIMIT " + strconv.Itoa(q.Count+1))
	return s
}

// walkWhere keeps one walked row per resource of type typ: the one
// holding its sort value for so (the least ascending, the greatest
// descending; rows are unique, so exactly one is).
func walkWhere(s *SQL, so search.Sort, typ string) {
	if walkOf(so) == walkKeys {
		prefix := so.Param + "\x1f"
		PrefixRange(s, "s0.key", prefix)
		s.Text(" AND s0.type = ? AND NOT EXISTS (SELECT 1 FROM search_keys AS sk WHERE sk.rid = s0.rid AND ", typ)
		if so.Desc {
			s.Text("sk.key > s0.key")
			if hi, ok := prefixEnd(prefix); ok {
				s.Text(" AND sk.key < ?", hi)
			}
		} else {
			s.Text("sk.key >= ? AND sk.key < s0.key", prefix)
		}
		s.Text(") AND ")
		return
	}
	table, _ := walkFrom(so)
	s.Text("s0.param = ? AND s0.type = ? AND NOT EXISTS (SELECT 1 FROM "+table+" AS sd WHERE sd.rid = s0.rid AND sd.param = s0.param AND ", so.Param, typ)
	if so.Desc {
		s.Text("(sd.high > s0.high OR sd.high = s0.high AND sd.low < s0.low)) AND ")
	} else {
		s.Text("(sd.low < s0.low OR sd.low = s0.low AND sd.high < s0.high)) AND ")
	}
}

// SortWalkSQL is the page of a SortWalk plan: the resources with a value
// for the first sort key (a date, string or uri parameter), walked in
// that order through the index of its rows (see walkOf) and each tested
// against every clause, then those without one (which sort last both
// ways), walked in rid order. The two arms are one UNION ALL statement, so
// they read one snapshot; SQLite runs its arms in turn and the LIMIT ends
// it as soon as the page is full, so the second arm runs only at the end
// of the first. A cursor in one region leaves the other whole or out of
// the page.
func SortWalkSQL(q *search.Query, from, where *SQL, cur *cursor.Search) *SQL {
	sorted := PageArm{From: from, Where: where, Rid: "s0.rid", Cur: cur, Sorted: true}
	null := PageArm{From: from, Where: where, Rid: "a.rid", Cur: cur, Null: true}
	var arms []PageArm
	switch {
	case cur == nil:
		arms = []PageArm{sorted, null}
	case cur.Vals[0] != nil && !cur.Back:
		sorted.Keyset = true
		arms = []PageArm{sorted, null}
	case cur.Vals[0] != nil:
		sorted.Keyset = true
		arms = []PageArm{sorted}
	case !cur.Back:
		null.Keyset = true
		arms = []PageArm{null}
	default:
		null.Keyset = true
		arms = []PageArm{null, sorted}
	}
	if len(arms) == 1 {
		return PageSQL(q, arms[0])
	}
	s := &SQL{}
	for i, arm := range arms {
		if i > 0 {
			s.Text(" UNION ALL ")
		}
		s.Text("SELECT * FROM (").Append(PageSQL(q, arm)).Text(")")
	}
	return s.Text(" LIMIT " + strconv.Itoa(q.Count+1))
}

// keyset is the condition "the row comes after the cursor" (before it,
// paging back) in the order of sorts, then rid: the OR over each key of
// "equal on the keys before it and past the cursor on this one". A missing
// value (NULL) sorts after every value in both directions.
func keyset(s *SQL, sorts []search.Sort, expr func(i int) string, rid string, cur *cursor.Search) {
	back := cur.Back
	for j := 0; j <= len(sorts); j++ {
		if j > 0 {
			s.Text(" OR ")
		}
		s.Text("(")
		for i := 0; i < j; i++ {
			e := expr(i)
			if cur.Vals[i] == nil {
				s.Text(e + " IS NULL AND ")
			} else {
				s.Text(e+" = ? AND ", cur.Vals[i])
			}
		}
		if j == len(sorts) {
			if back {
				s.Text(rid+" < ?)", cur.Rid)
			} else {
				s.Text(rid+" > ?)", cur.Rid)
			}
			continue
		}
		e := expr(j)
		v := cur.Vals[j]
		// greater: later in ascending order of the raw value
		greater := !sorts[j].Desc
		switch {
		case v == nil && !back:
			s.Text("0)") // nothing is after NULL but other NULLs
		case v == nil:
			s.Text(e + " IS NOT NULL)")
		case !back && greater:
			s.Text("("+e+" > ? OR "+e+" IS NULL))", v)
		case !back:
			s.Text("("+e+" < ? OR "+e+" IS NULL))", v)
		case greater:
			s.Text(e+" < ?)", v)
		default:
			s.Text(e+" > ?)", v)
		}
	}
}
