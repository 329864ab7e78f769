package mongo

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// maxSortKeys bounds _sort keys that a resource may lack: each doubles the
// number of partitions a page may walk (see sortPlan).
const maxSortKeys = 6

// searchCursor is a position in a query's order: the partition, the sort
// values of the present keys, the creation order and the _id; Back marks a
// Prev cursor (the page before the position).
type searchCursor struct {
	Part  int    `bson:"p"`
	Vals  bson.A `bson:"v"`
	R     int64  `bson:"r"`
	Key   string `bson:"k"`
	Back  bool   `bson:"b"`
	Query uint32 `bson:"q"`
}

// sortKey is one _sort key in document terms.
type sortKey struct {
	param  string
	field  string
	desc   bool
	always bool // every resource has it (_id, _lastUpdated)
}

// sortPlan orders matches with MongoDB sorts, which put missing values
// first, while the contract puts them last either way: the matches are cut
// into partitions by which optional keys they have (all present first,
// then the last key missing, …), each sorted by its present keys, then by
// creation (r) and _id. A page walks the partitions in order.
type sortPlan struct {
	keys     []sortKey
	optional []int // indexes in keys of the keys a resource may lack
}

func newSortPlan(sorts []search.Sort) (*sortPlan, error) {
	p := &sortPlan{}
	for _, s := range sorts {
		k := sortKey{param: s.Param, desc: s.Desc}
		switch s.Param {
		case "_id":
			k.field, k.always = "id", true
		case "_lastUpdated":
			k.field, k.always = "lu", true
		default:
			k.field = sortField(s.Param, s.Desc)
			p.optional = append(p.optional, len(p.keys))
		}
		p.keys = append(p.keys, k)
	}
	if len(p.optional) > maxSortKeys {
		return nil, &search.Error{Param: "_sort", Message: fmt.Sprintf("at most %d sort keys other than _id and _lastUpdated", maxSortKeys)}
	}
	return p, nil
}

func (p *sortPlan) parts() int { return 1 << len(p.optional) }

// present reports whether key i is present in partition part: the bits of
// part, most significant first, say which optional keys are missing.
func (p *sortPlan) present(part, i int) bool {
	j := slices.Index(p.optional, i)
	if j < 0 {
		return true
	}
	bit := len(p.optional) - 1 - j
	return part&(1<<bit) == 0
}

// partFilter selects the resources of partition part.
func (p *sortPlan) partFilter(part int) bson.D {
	f := bson.D{}
	for _, i := range p.optional {
		f = append(f, bson.E{Key: "p", Value: presence(p.keys[i].param, p.present(part, i))})
	}
	if len(f) > 1 {
		var ands bson.A
		for _, e := range f {
			ands = append(ands, bson.D{e})
		}
		return bson.D{{Key: "$and", Value: ands}}
	}
	return f
}

func presence(param string, present bool) any {
	if present {
		return param
	}
	return bson.D{{Key: "$ne", Value: param}}
}

// order is the partition's sort: its present keys, then r and _id;
// reversed for a Prev page.
func (p *sortPlan) order(part int, back bool) bson.D {
	dir := func(desc bool) int {
		if desc != back {
			return -1
		}
		return 1
	}
	o := bson.D{}
	for i, k := range p.keys {
		if p.present(part, i) {
			o = append(o, bson.E{Key: k.field, Value: dir(k.desc)})
		}
	}
	return append(o, bson.E{Key: "r", Value: dir(false)}, bson.E{Key: "_id", Value: dir(false)})
}

// values are the sort values of d for the present keys of part.
func (p *sortPlan) values(part int, d *resDoc) bson.A {
	var vs bson.A
	for i, k := range p.keys {
		if !p.present(part, i) {
			continue
		}
		switch k.field {
		case "id":
			vs = append(vs, d.ID)
		case "lu":
			vs = append(vs, d.LU)
		default:
			s := d.Sorts[fieldName(k.param)]
			if k.desc {
				vs = append(vs, s.Hi)
			} else {
				vs = append(vs, s.Lo)
			}
		}
	}
	return vs
}

// beyond selects, within the cursor's partition, what comes after the
// position (before it for a Prev page): a lexicographic keyset condition.
func (p *sortPlan) beyond(c *searchCursor) (bson.D, error) {
	type col struct {
		field string
		desc  bool
		val   any
	}
	var cols []col
	n := 0
	for i, k := range p.keys {
		if !p.present(c.Part, i) {
			continue
		}
		if n >= len(c.Vals) {
			return nil, fmt.Errorf("mongo store: search: cursor has %d sort values: %w", len(c.Vals), store.ErrBadCursor)
		}
		cols = append(cols, col{k.field, k.desc, c.Vals[n]})
		n++
	}
	if n != len(c.Vals) {
		return nil, fmt.Errorf("mongo store: search: cursor has %d sort values: %w", len(c.Vals), store.ErrBadCursor)
	}
	cols = append(cols, col{"r", false, c.R}, col{"_id", false, c.Key})
	var ors bson.A
	for i, cl := range cols {
		term := bson.D{}
		for _, eq := range cols[:i] {
			term = append(term, bson.E{Key: eq.field, Value: eq.val})
		}
		op := "$gt"
		if cl.desc != c.Back {
			op = "$lt"
		}
		term = append(term, bson.E{Key: cl.field, Value: bson.D{{Key: op, Value: cl.val}}})
		ors = append(ors, term)
	}
	return bson.D{{Key: "$or", Value: ors}}, nil
}

// hit is a match on a page with its place in the order.
type hit struct {
	doc  *resDoc
	part int
	vals bson.A
}

func (h hit) cursor(back bool, query uint32) string {
	return encodeCursor(searchCursor{Part: h.part, Vals: h.vals, R: h.doc.R, Key: h.doc.Key, Back: back, Query: query})
}

// Search runs q: compile, walk the partitions of the order from the
// cursor for Count+1 matches, then count and include as asked.
func (s *Store) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	c := &compiler{s: s, ctx: ctx, elemMatch: !s.server.FerretDB}
	f, err := c.query(q)
	if err != nil {
		return nil, err
	}
	plan, err := newSortPlan(q.Sort)
	if err != nil {
		return nil, err
	}
	// The hash is of the query as asked, not of the compiled filter: a
	// chain's id set may grow between two pages without voiding the cursor.
	hash := hashOf(q.Types, q.Where, q.Sort)
	var cur *searchCursor
	if q.Cursor != "" {
		cur = &searchCursor{}
		if err := decodeCursor(q.Cursor, cur); err != nil {
			return nil, err
		}
		if cur.Query != hash || cur.Part < 0 || cur.Part >= plan.parts() {
			return nil, fmt.Errorf("mongo store: search: cursor was issued for another query: %w", store.ErrBadCursor)
		}
	}
	page := &store.SearchPage{Total: -1}
	if q.Total != search.TotalNone {
		n, err := s.count(ctx, f)
		if err != nil {
			return nil, err
		}
		page.Total = n
	}
	if q.Count <= 0 {
		return page, nil
	}
	back := cur != nil && cur.Back
	hits, err := s.walk(ctx, f, plan, cur, q.Count+1)
	if err != nil {
		return nil, err
	}
	more := len(hits) > q.Count
	hits = hits[:min(len(hits), q.Count)]
	if back {
		slices.Reverse(hits)
	}
	for _, h := range hits {
		page.Matches = append(page.Matches, h.doc.version())
	}
	switch {
	case len(hits) == 0 && cur != nil:
		// Nothing beyond the position: point back at it.
		flip := *cur
		flip.Back = !cur.Back
		if back {
			page.Next = encodeCursor(flip)
		} else {
			page.Prev = encodeCursor(flip)
		}
	case len(hits) == 0:
	case back:
		page.Next = hits[len(hits)-1].cursor(false, hash)
		if more {
			page.Prev = hits[0].cursor(true, hash)
		}
	default:
		if more {
			page.Next = hits[len(hits)-1].cursor(false, hash)
		}
		if cur != nil {
			page.Prev = hits[0].cursor(true, hash)
		}
	}
	docs := make([]*resDoc, len(hits))
	for i, h := range hits {
		docs[i] = h.doc
	}
	if page.Included, err = s.includes(ctx, q, docs); err != nil {
		return nil, err
	}
	return page, nil
}

// walk returns up to want matches beyond cur in the order of plan
// (backwards for a Prev cursor, nearest first).
func (s *Store) walk(ctx context.Context, f filter, plan *sortPlan, cur *searchCursor, want int) ([]hit, error) {
	back := cur != nil && cur.Back
	start, step, end := 0, 1, plan.parts()
	if cur != nil {
		start = cur.Part
	}
	if back {
		step, end = -1, -1
	}
	var hits []hit
	for part := start; part != end && len(hits) < want; part += step {
		pf := and([]filter{f, {mongo: plan.partFilter(part), test: func(*resDoc) bool { return true }, exact: true}})
		if cur != nil && part == cur.Part {
			b, err := plan.beyond(cur)
			if err != nil {
				return nil, err
			}
			pf = and([]filter{pf, {mongo: b, test: func(*resDoc) bool { return true }, exact: true}})
		}
		err := s.scan(ctx, pf, plan.order(part, back), want-len(hits), func(d *resDoc) bool {
			hits = append(hits, hit{doc: d, part: part, vals: plan.values(part, d)})
			return len(hits) < want
		})
		if err != nil {
			return nil, err
		}
	}
	return hits, nil
}

// scan streams the documents matching f in order to yield (which returns
// false to stop), checking inexact filters in Go; limit is the number of
// matches wanted (0: all).
func (s *Store) scan(ctx context.Context, f filter, order bson.D, limit int, yield func(d *resDoc) bool) error {
	opts := options.Find()
	if order != nil {
		opts.SetSort(order)
	}
	if !f.exact {
		// The rows are what the Go check reads.
		opts.SetProjection(bson.D{})
	} else {
		opts.SetProjection(append(slices.Clone(versionFields), bson.E{Key: "s", Value: 1}, bson.E{Key: "k", Value: 1}))
	}
	if limit > 0 {
		if f.exact {
			opts.SetLimit(int64(limit))
		}
		opts.SetBatchSize(int32(min(max(limit, 16), 1000)))
	}
	c, err := s.resources.Find(ctx, f.mongo, opts)
	if err != nil {
		return wrapErr(ctx, "search", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	for c.Next(ctx) {
		d := &resDoc{}
		if err := c.Decode(d); err != nil {
			return wrapErr(ctx, "search", err)
		}
		if !f.exact && !f.test(d) {
			continue
		}
		if !yield(d) {
			break
		}
	}
	return wrapIf(ctx, "search", c.Err())
}

func wrapIf(ctx context.Context, step string, err error) error {
	if err == nil {
		return nil
	}
	return wrapErr(ctx, step, err)
}

// count is the number of matches: the server counts an exact filter;
// an inexact one is counted as it is checked.
func (s *Store) count(ctx context.Context, f filter) (int64, error) {
	if f.exact {
		n, err := s.resources.CountDocuments(ctx, f.mongo)
		return n, wrapIf(ctx, "count", err)
	}
	var n int64
	err := s.scan(ctx, f, nil, 0, func(*resDoc) bool { n++; return true })
	return n, err
}

// collect returns up to limit+1 matches of a sub-query (a chain target or
// a _has source), in no particular order; keys asks for their keys.
func (s *Store) collect(ctx context.Context, q *search.Query, keys bool, limit int) ([]*resDoc, error) {
	c := &compiler{s: s, ctx: ctx, elemMatch: !s.server.FerretDB}
	f, err := c.query(q)
	if err != nil {
		return nil, err
	}
	var out []*resDoc
	err = s.scan(ctx, f, nil, limit+1, func(d *resDoc) bool {
		if !keys {
			d.Keys = nil
		}
		out = append(out, d)
		return len(out) <= limit
	})
	return out, err
}
