package storetest_test

// The in-memory store's search: a naive evaluator over the index rows that
// doubles as the reference reading of query.go. Every resource is tested
// against every clause; nothing is indexed or clever.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

func cloneRows(r *search.Rows) *search.Rows {
	if r == nil {
		return nil
	}
	return &search.Rows{Keys: slices.Clone(r.Keys), Dates: slices.Clone(r.Dates),
		Numbers: slices.Clone(r.Numbers), Sorts: slices.Clone(r.Sorts)}
}

// memRes is the current state of one resource; rid is its creation order.
type memRes struct {
	rid  int
	v    store.Version
	rows search.Rows
}

// current lists the live (not deleted) resources by creation order.
func current(vs []memVersion) []*memRes {
	byKey := map[[2]string]*memRes{}
	var order []*memRes
	for _, v := range vs {
		k := [2]string{v.Type, v.ID}
		r, ok := byKey[k]
		if !ok {
			r = &memRes{rid: len(order) + 1}
			byKey[k] = r
			order = append(order, r)
		}
		r.v = v.Version
		r.rows = search.Rows{}
		if v.index != nil {
			r.rows = *v.index
		}
	}
	return slices.DeleteFunc(order, func(r *memRes) bool { return r.v.Deleted })
}

type memEval struct{ all []*memRes }

func (e *memEval) matches(r *memRes, q *search.Query) bool {
	if len(q.Types) > 0 && !slices.Contains(q.Types, r.v.Type) {
		return false
	}
	for _, cl := range q.Where {
		if !slices.ContainsFunc(cl.Any, func(m search.Match) bool { return e.match(r, &m) }) {
			return false
		}
	}
	return true
}

// match: the type restriction is outside the negation.
func (e *memEval) match(r *memRes, m *search.Match) bool {
	if m.Type != "" && r.v.Type != m.Type {
		return false
	}
	return e.positive(r, m) != m.Not
}

func (e *memEval) positive(r *memRes, m *search.Match) bool {
	switch m.Op {
	case search.OpKey:
		return slices.ContainsFunc(r.rows.Keys, func(k string) bool { return slices.Contains(m.Keys, k) })
	case search.OpKeyPrefix:
		return slices.ContainsFunc(r.rows.Keys, func(k string) bool { return strings.HasPrefix(k, m.Prefix) })
	case search.OpKeyContains:
		return slices.ContainsFunc(r.rows.Keys, func(k string) bool {
			return strings.HasPrefix(k, m.Prefix) && strings.Contains(k[len(m.Prefix):], m.Contains)
		})
	case search.OpDate:
		return slices.ContainsFunc(r.rows.Dates, func(d search.DateRow) bool { return d.Param == m.Param && search.DateMatches(d, m) })
	case search.OpNumber:
		return slices.ContainsFunc(r.rows.Numbers, func(n search.NumberRow) bool { return n.Param == m.Param && search.NumberMatches(n, m) })
	case search.OpMissing:
		has := slices.ContainsFunc(r.rows.Sorts, func(s search.SortRow) bool { return s.Param == m.Param })
		return has != m.Missing
	case search.OpChain:
		t := m.Chain.Query.Types[0]
		for _, o := range e.all {
			if o.v.Type == t && slices.Contains(r.rows.Keys, m.Chain.RefParam+"\x1f"+t+"/"+o.v.ID) && e.matches(o, m.Chain.Query) {
				return true
			}
		}
		return false
	case search.OpHas:
		key := m.Has.Param + "\x1f" + r.v.Type + "/" + r.v.ID
		for _, o := range e.all {
			if o.v.Type == m.Has.Query.Types[0] && slices.Contains(o.rows.Keys, key) && e.matches(o, m.Has.Query) {
				return true
			}
		}
		return false
	}
	return false
}

// sortVal is a resource's value for one sort key (nil: missing).
func sortVal(r *memRes, s search.Sort) any {
	switch s.Param {
	case "_id":
		return r.v.ID
	case "_lastUpdated":
		return r.v.LastUpdated.UnixMicro()
	}
	for _, row := range r.rows.Sorts {
		if row.Param == s.Param {
			if s.Desc {
				return normVal(row.Hi)
			}
			return normVal(row.Lo)
		}
	}
	return nil
}

func normVal(v any) any {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int64, float64, string:
		return v
	}
	return nil
}

// compareVal orders as SQLite does: numbers before strings.
func compareVal(a, b any) int {
	num := func(v any) (float64, bool) {
		switch v := v.(type) {
		case int64:
			return float64(v), true
		case float64:
			return v, true
		}
		return 0, false
	}
	fa, na := num(a)
	fb, nb := num(b)
	switch {
	case na && nb:
		return cmp.Compare(fa, fb)
	case na:
		return -1
	case nb:
		return 1
	}
	return strings.Compare(a.(string), b.(string))
}

// memPos is a position in the order: sort values and rid.
type memPos struct {
	Vals []json.RawMessage `json:"v"`
	Rid  int               `json:"r"`
	Back bool              `json:"b"`
}

// order compares positions a and b under sorts: each key ascending or
// descending, missing values last either way, then rid.
func order(sorts []search.Sort, av, bv []any, arid, brid int) int {
	for i, s := range sorts {
		a, b := av[i], bv[i]
		switch {
		case a == nil && b == nil:
			continue
		case a == nil:
			return 1
		case b == nil:
			return -1
		}
		c := compareVal(a, b)
		if s.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(arid, brid)
}

func encodeVal(v any) json.RawMessage {
	var b []byte
	switch v := v.(type) {
	case int64:
		b, _ = json.Marshal(map[string]int64{"i": v})
	case float64:
		b, _ = json.Marshal(map[string]float64{"f": v})
	case string:
		b, _ = json.Marshal(map[string]string{"s": v})
	default:
		b = []byte("null")
	}
	return b
}

func decodeVal(raw json.RawMessage) (any, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nil, errors.New("bad value")
	}
	var err error
	for k, v := range m {
		switch k {
		case "i":
			var x int64
			err = json.Unmarshal(v, &x)
			return x, err
		case "f":
			var x float64
			err = json.Unmarshal(v, &x)
			return x, err
		case "s":
			var x string
			err = json.Unmarshal(v, &x)
			return x, err
		}
	}
	return nil, errors.New("bad value")
}

func encodePos(vals []any, rid int, back bool) string {
	p := memPos{Rid: rid, Back: back}
	for _, v := range vals {
		p.Vals = append(p.Vals, encodeVal(v))
	}
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePos(s string, n int) (vals []any, rid int, back bool, err error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var p memPos
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || len(p.Vals) != n || p.Rid <= 0 {
		return nil, 0, false, fmt.Errorf("mem: cursor: %w", store.ErrBadCursor)
	}
	for _, raw := range p.Vals {
		v, err := decodeVal(raw)
		if err != nil {
			return nil, 0, false, fmt.Errorf("mem: cursor: %w", store.ErrBadCursor)
		}
		vals = append(vals, v)
	}
	return vals, p.Rid, p.Back, nil
}

func memSearch(ctx context.Context, vs []memVersion, q *search.Query) (*store.SearchPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var cvals []any
	var crid int
	var back bool
	if q.Cursor != "" {
		var err error
		if cvals, crid, back, err = decodePos(q.Cursor, len(q.Sort)); err != nil {
			return nil, err
		}
	}
	e := &memEval{all: current(vs)}
	type row struct {
		r    *memRes
		vals []any
	}
	var all []row
	for _, r := range e.all {
		if e.matches(r, q) {
			vals := make([]any, len(q.Sort))
			for i, s := range q.Sort {
				vals[i] = sortVal(r, s)
			}
			all = append(all, row{r, vals})
		}
	}
	slices.SortFunc(all, func(a, b row) int { return order(q.Sort, a.vals, b.vals, a.r.rid, b.r.rid) })
	page := &store.SearchPage{Total: -1}
	if q.Total != search.TotalNone {
		page.Total = int64(len(all))
	}
	if q.Count == 0 {
		return page, nil
	}
	// The rows strictly after (before, paging back) the cursor.
	sel := all
	if q.Cursor != "" {
		sel = nil
		for _, a := range all {
			c := order(q.Sort, a.vals, cvals, a.r.rid, crid)
			if !back && c > 0 || back && c < 0 {
				sel = append(sel, a)
			}
		}
	}
	var pg []row
	more := len(sel) > q.Count
	if back {
		pg = sel[max(0, len(sel)-q.Count):]
	} else {
		pg = sel[:min(len(sel), q.Count)]
	}
	for _, a := range pg {
		v := a.r.v
		page.Matches = append(page.Matches, &v)
	}
	switch {
	case len(pg) == 0 && q.Cursor != "":
		if back {
			page.Next = encodePos(cvals, crid, false)
		} else {
			page.Prev = encodePos(cvals, crid, true)
		}
	case len(pg) == 0:
	case back:
		page.Next = encodePos(pg[len(pg)-1].vals, pg[len(pg)-1].r.rid, false)
		if more {
			page.Prev = encodePos(pg[0].vals, pg[0].r.rid, true)
		}
	default:
		if more {
			page.Next = encodePos(pg[len(pg)-1].vals, pg[len(pg)-1].r.rid, false)
		}
		if q.Cursor != "" {
			page.Prev = encodePos(pg[0].vals, pg[0].r.rid, true)
		}
	}
	var frontier []*memRes
	for _, a := range pg {
		frontier = append(frontier, a.r)
	}
	page.Included = e.includes(q, frontier)
	return page, nil
}

// includes: round one applies every include to the matches, later rounds
// the :iterate ones to what the previous round added (at most 4 rounds).
func (e *memEval) includes(q *search.Query, frontier []*memRes) []*store.Version {
	seen := map[*memRes]bool{}
	for _, r := range frontier {
		seen[r] = true
	}
	var out []*store.Version
	for round := 0; round < 4 && len(frontier) > 0; round++ {
		var next []*memRes
		add := func(r *memRes) {
			if !seen[r] {
				seen[r] = true
				next = append(next, r)
				v := r.v
				out = append(out, &v)
			}
		}
		for _, inc := range q.Include {
			if round > 0 && !inc.Iterate {
				continue
			}
			for _, f := range frontier {
				if f.v.Type != inc.Source {
					continue
				}
				for _, k := range f.rows.Keys {
					param, typ, id, ok := search.RefKey(k)
					if !ok || inc.Param != "*" && param != inc.Param || inc.Target != "" && typ != inc.Target {
						continue
					}
					for _, o := range e.all {
						if o.v.Type == typ && o.v.ID == id {
							add(o)
						}
					}
				}
			}
		}
		for _, inc := range q.RevInclude {
			if round > 0 && !inc.Iterate {
				continue
			}
			for _, f := range frontier {
				if inc.Target != "" && f.v.Type != inc.Target {
					continue
				}
				for _, o := range e.all {
					if o.v.Type == inc.Source && slices.ContainsFunc(o.rows.Keys, func(k string) bool {
						param, val, _ := strings.Cut(k, "\x1f")
						return val == f.v.Type+"/"+f.v.ID && (param == inc.Param || inc.Param == "*" && !strings.Contains(param, ":"))
					}) {
						add(o)
					}
				}
			}
		}
		frontier = next
	}
	return out
}
