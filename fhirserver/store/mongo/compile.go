package mongo

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// maxRefSet bounds the resources a chain or a _has may resolve to: they are
// resolved into an id set first (no $lookup), and a set this large means
// the query needs narrowing rather than a bigger set.
const maxRefSet = 10000

// filter is a compiled part of a query: the Mongo filter and the same test
// in Go. When exact is false the Mongo filter is only a superset (a range
// match on a server without $elemMatch on fields) and every candidate must
// pass test as well.
type filter struct {
	mongo bson.D
	test  func(d *resDoc) bool
	exact bool
}

// matchAll and matchNone are the constant filters.
func matchAll() filter {
	return filter{mongo: bson.D{}, test: func(*resDoc) bool { return true }, exact: true}
}

func matchNone() filter {
	return filter{mongo: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{}}}}},
		test: func(*resDoc) bool { return false }, exact: true}
}

// compiler turns search IR into filters. elemMatch says whether the server
// evaluates $elemMatch with field conditions (real MongoDB does).
type compiler struct {
	s         *Store
	ctx       context.Context
	elemMatch bool
}

// query compiles the types and clauses of q (live resources only).
func (c *compiler) query(q *search.Query) (filter, error) {
	parts := []filter{{mongo: bson.D{{Key: "del", Value: false}}, test: func(d *resDoc) bool { return !d.Deleted }, exact: true}}
	switch len(q.Types) {
	case 0:
	case 1:
		t := q.Types[0]
		parts = append(parts, filter{mongo: bson.D{{Key: "t", Value: t}}, test: func(d *resDoc) bool { return d.Type == t }, exact: true})
	default:
		types := slices.Clone(q.Types)
		parts = append(parts, filter{mongo: bson.D{{Key: "t", Value: bson.D{{Key: "$in", Value: types}}}},
			test: func(d *resDoc) bool { return slices.Contains(types, d.Type) }, exact: true})
	}
	for _, cl := range q.Where {
		f, err := c.clause(cl)
		if err != nil {
			return filter{}, err
		}
		parts = append(parts, f)
	}
	return and(parts), nil
}

func and(parts []filter) filter {
	out := filter{exact: true}
	var ands bson.A
	tests := make([]func(*resDoc) bool, 0, len(parts))
	for _, p := range parts {
		out.exact = out.exact && p.exact
		tests = append(tests, p.test)
		if len(p.mongo) > 0 {
			ands = append(ands, p.mongo)
		}
	}
	switch len(ands) {
	case 0:
		out.mongo = bson.D{}
	case 1:
		out.mongo = ands[0].(bson.D)
	default:
		out.mongo = bson.D{{Key: "$and", Value: ands}}
	}
	out.test = func(d *resDoc) bool {
		for _, t := range tests {
			if !t(d) {
				return false
			}
		}
		return true
	}
	return out
}

// clause is the OR of its matches.
func (c *compiler) clause(cl search.Clause) (filter, error) {
	if len(cl.Any) == 0 {
		return matchNone(), nil
	}
	out := filter{exact: true}
	var ors bson.A
	tests := make([]func(*resDoc) bool, 0, len(cl.Any))
	loose := false // some match's Mongo filter is "anything"
	for i := range cl.Any {
		f, err := c.match(cl.Param, &cl.Any[i])
		if err != nil {
			return filter{}, err
		}
		out.exact = out.exact && f.exact
		tests = append(tests, f.test)
		if len(f.mongo) == 0 {
			loose = true
		}
		ors = append(ors, f.mongo)
	}
	switch {
	case loose:
		out.mongo = bson.D{}
	case len(ors) == 1:
		out.mongo = ors[0].(bson.D)
	default:
		out.mongo = bson.D{{Key: "$or", Value: ors}}
	}
	out.test = func(d *resDoc) bool {
		for _, t := range tests {
			if t(d) {
				return true
			}
		}
		return false
	}
	return out, nil
}

// match compiles one value: its positive form, then the negation and the
// type restriction (which stays outside the negation).
func (c *compiler) match(param string, m *search.Match) (filter, error) {
	f, err := c.positive(param, m)
	if err != nil {
		return filter{}, err
	}
	if m.Not {
		pos := f.test
		f.test = func(d *resDoc) bool { return !pos(d) }
		if f.exact {
			f.mongo = bson.D{{Key: "$nor", Value: bson.A{f.mongo}}}
		} else {
			// The negation of a superset is a subset: filter nothing in
			// Mongo and decide in Go.
			f.mongo = bson.D{}
		}
	}
	if m.Type != "" {
		t := m.Type
		f = and([]filter{{mongo: bson.D{{Key: "t", Value: t}}, test: func(d *resDoc) bool { return d.Type == t }, exact: true}, f})
	}
	return f, nil
}

func (c *compiler) positive(param string, m *search.Match) (filter, error) {
	switch m.Op {
	case search.OpKey:
		return keysFilter(m.Keys), nil
	case search.OpKeyPrefix:
		prefix := m.Prefix
		return filter{mongo: bson.D{{Key: "k", Value: bson.Regex{Pattern: "^" + quote(prefix)}}},
			test: func(d *resDoc) bool {
				return slices.ContainsFunc(d.Keys, func(k string) bool { return strings.HasPrefix(k, prefix) })
			}, exact: true}, nil
	case search.OpKeyContains:
		prefix, sub := m.Prefix, m.Contains
		return filter{mongo: bson.D{{Key: "k", Value: bson.Regex{Pattern: "^" + quote(prefix) + `[\s\S]*` + quote(sub)}}},
			test: func(d *resDoc) bool {
				return slices.ContainsFunc(d.Keys, func(k string) bool {
					return strings.HasPrefix(k, prefix) && strings.Contains(k[len(prefix):], sub)
				})
			}, exact: true}, nil
	case search.OpDate:
		mm := *m
		test := func(d *resDoc) bool {
			return slices.ContainsFunc(d.Dates, func(r dateDoc) bool {
				return r.Param == mm.Param && search.DateMatches(search.DateRow(r), &mm)
			})
		}
		return c.rangeFilter("d", m.Param, dateConds(m), test), nil
	case search.OpNumber:
		mm := *m
		test := func(d *resDoc) bool {
			return slices.ContainsFunc(d.Numbers, func(r numDoc) bool {
				return r.Param == mm.Param && search.NumberMatches(search.NumberRow(r), &mm)
			})
		}
		return c.rangeFilter("n", m.Param, numberConds(m), test), nil
	case search.OpMissing:
		p, missing := m.Param, m.Missing
		f := bson.D{{Key: "p", Value: p}}
		if missing {
			f = bson.D{{Key: "p", Value: bson.D{{Key: "$ne", Value: p}}}}
		}
		return filter{mongo: f, test: func(d *resDoc) bool { return slices.Contains(d.Present, p) != missing }, exact: true}, nil
	case search.OpChain:
		return c.chain(param, m.Chain)
	case search.OpHas:
		return c.has(param, m.Has)
	}
	return filter{}, fmt.Errorf("mongo store: search: unknown match op %d", m.Op)
}

func keysFilter(keys []string) filter {
	if len(keys) == 0 {
		return matchNone()
	}
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	var f bson.D
	if len(keys) == 1 {
		f = bson.D{{Key: "k", Value: keys[0]}}
	} else {
		f = bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: slices.Clone(keys)}}}}
	}
	return filter{mongo: f, test: func(d *resDoc) bool {
		return slices.ContainsFunc(d.Keys, func(k string) bool { return set[k] })
	}, exact: true}
}

// quote escapes a literal for a MongoDB (PCRE) regular expression.
func quote(s string) string { return regexp.QuoteMeta(s) }

// rangeFilter is one row of field ("d" or "n") of param meeting conds:
// $elemMatch where the server has it; else rows of the parameter exist,
// and test decides.
func (c *compiler) rangeFilter(field, param string, conds bson.D, test func(*resDoc) bool) filter {
	if c.elemMatch {
		em := append(bson.D{{Key: "p", Value: param}}, conds...)
		return filter{mongo: bson.D{{Key: field, Value: bson.D{{Key: "$elemMatch", Value: em}}}}, test: test, exact: true}
	}
	return filter{mongo: bson.D{{Key: field + ".p", Value: param}}, test: test, exact: false}
}

func cond(field, op string, v any) bson.D {
	return bson.D{{Key: field, Value: bson.D{{Key: op, Value: v}}}}
}

func both(a, b bson.D) bson.D { return append(slices.Clone(a), b...) }

func either(a, b bson.D) bson.D { return bson.D{{Key: "$or", Value: bson.A{a, b}}} }

// dateConds is search.DateMatches as conditions on a row {lo, hi}.
func dateConds(m *search.Match) bson.D {
	qlo, qhi := m.Low, m.High
	eq := both(cond("lo", "$gte", qlo), cond("hi", "$lte", qhi))
	switch m.Cmp {
	case search.CmpEq:
		return eq
	case search.CmpNe:
		return either(cond("lo", "$lt", qlo), cond("hi", "$gt", qhi))
	case search.CmpGt:
		return cond("hi", "$gt", qhi)
	case search.CmpLt:
		return cond("lo", "$lt", qlo)
	case search.CmpGe:
		return either(cond("hi", "$gt", qhi), eq)
	case search.CmpLe:
		return either(cond("lo", "$lt", qlo), eq)
	case search.CmpSa:
		return cond("lo", "$gte", qhi)
	case search.CmpEb:
		return cond("hi", "$lte", qlo)
	case search.CmpAp:
		d := int64(m.Approx)
		return both(cond("lo", "$lt", qhi+d), cond("hi", "$gt", qlo-d))
	}
	return cond("lo", "$in", bson.A{}) // an unknown prefix matches nothing
}

// numberConds is search.NumberMatches as conditions on a row {lo, hi}.
func numberConds(m *search.Match) bson.D {
	v, qlo, qhi := m.NumLow, m.NumLow, m.NumHigh
	hiIn, hiOut := "$lt", "$gte" // hi inside the query range, and its negation
	if qlo == qhi {
		hiIn, hiOut = "$lte", "$gt"
	}
	switch m.Cmp {
	case search.CmpEq:
		return both(cond("lo", "$gte", qlo), cond("hi", hiIn, qhi))
	case search.CmpNe:
		return either(cond("lo", "$lt", qlo), cond("hi", hiOut, qhi))
	case search.CmpGt:
		return cond("hi", "$gt", v)
	case search.CmpLt:
		return cond("lo", "$lt", v)
	case search.CmpGe:
		return cond("hi", "$gte", v)
	case search.CmpLe:
		return cond("lo", "$lte", v)
	case search.CmpSa:
		return cond("lo", "$gt", v)
	case search.CmpEb:
		return cond("hi", "$lt", v)
	case search.CmpAp:
		return both(cond("lo", "$lte", qhi+m.Approx), cond("hi", "$gte", qlo-m.Approx))
	}
	return cond("lo", "$in", bson.A{})
}

// chain resolves the target query to ids, then matches the reference keys
// pointing at them.
func (c *compiler) chain(param string, ch *search.Chain) (filter, error) {
	if len(ch.Query.Types) != 1 {
		return filter{}, fmt.Errorf("mongo store: search: a chain needs one target type")
	}
	t := ch.Query.Types[0]
	docs, err := c.s.collect(c.ctx, ch.Query, false, maxRefSet)
	if err != nil {
		return filter{}, err
	}
	if len(docs) > maxRefSet {
		return filter{}, tooBroad(param)
	}
	keys := make([]string, 0, len(docs))
	for _, d := range docs {
		keys = append(keys, ch.RefParam+"\x1f"+t+"/"+d.ID)
	}
	return keysFilter(keys), nil
}

// has resolves the referring query, reads the references of what it
// found, and matches the resources they point at.
func (c *compiler) has(param string, h *search.Has) (filter, error) {
	docs, err := c.s.collect(c.ctx, h.Query, true, maxRefSet)
	if err != nil {
		return filter{}, err
	}
	if len(docs) > maxRefSet {
		return filter{}, tooBroad(param)
	}
	prefix := h.Param + "\x1f"
	set := map[string]bool{}
	var ids bson.A
	for _, d := range docs {
		for _, k := range d.Keys {
			if ref, ok := strings.CutPrefix(k, prefix); ok && strings.Count(ref, "/") == 1 && !set[ref] {
				set[ref] = true
				ids = append(ids, ref)
			}
		}
	}
	if len(ids) == 0 {
		return matchNone(), nil
	}
	return filter{mongo: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		test: func(d *resDoc) bool { return set[d.Key] }, exact: true}, nil
}

func tooBroad(param string) error {
	return &search.Error{Param: param, Message: fmt.Sprintf("matches more than %d resources; add criteria to narrow it", maxRefSet)}
}
