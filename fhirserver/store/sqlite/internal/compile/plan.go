package compile

import (
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// The planner: which clause drives a query (the one whose rows are read
// first, the others being tested per resource), from bounded counts of
// each clause's rows, or a walk in sort order when every clause is large.

// Plan is the chosen driver of a query: the SQL of a SELECT yielding the
// rids of one clause (nil: walk the resources of the query's types).
type Plan struct {
	Driver   *SQL
	Clause   int  // index in Where of the driver clause, -1 for none
	Ordered  bool // the driver yields each rid once, in rid order
	Estimate int  // rows the driver yields, capped at Tune.EstimateLimit; -1 unknown
	// SortWalk: no driver; the page walks the rows of the first sort key
	// in order (see SortWalkSQL), then the resources without one.
	SortWalk bool
}

// canSortWalk says whether q's page can be read by walking the rows of
// its first sort key in order: one type (the index orders one type's
// rows) and a key whose rows hold its sort values (see walkOf).
func canSortWalk(q *search.Query) bool {
	return len(q.Sort) > 0 && len(q.Types) == 1 && walkOf(q.Sort[0]) != walkNone
}

// cand is a clause that can drive: its index in Where, how cheap it
// looks, and whether its driver yields rids in order (see clauseRank).
type cand struct {
	i       int
	rank    int
	ordered bool
}

// Choose picks the driver of q. sorted says the page is ordered by sort
// keys, so that a driver streaming in rid order has no advantage.
func (c *Compiler) Choose(q *search.Query, sorted bool) (Plan, error) {
	var cands []cand
	for i := range q.Where {
		r, ordered, ok := clauseRank(&q.Where[i])
		if ok {
			cands = append(cands, cand{i, r, ordered})
		}
	}
	best := Plan{Clause: -1, Estimate: -1}
	walk := sorted && canSortWalk(q)
	if walk && walkOf(q.Sort[0]) == walkKeys {
		var err error
		if walk, err = c.keysOfOneType(q); err != nil {
			return best, err
		}
	}
	if len(cands) == 0 || walk && c.Tune.SortWalk {
		// Nothing to drive: in sort order, the page costs about its own
		// rows (and the tests of the resources it skips).
		best.SortWalk = walk
		return best, nil
	}
	// Cheapest-looking first: an early very selective one ends the search.
	for i := 1; i < len(cands); i++ {
		for j := i; j > 0 && cands[j].rank < cands[j-1].rank; j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
	if lone, err := c.loneStream(q, cands, sorted); err != nil || lone >= 0 {
		if err != nil {
			return best, err
		}
		// One equality key streams in rid order, and every other clause
		// is known to be large: the page costs the key's own rows until
		// it is full, whatever its size, and the counts would choose it
		// anyway (or, were it large too, stream it). No estimate needed.
		d, err := c.clauseDriver(&q.Where[cands[lone].i], q.Types, true)
		if err != nil {
			return best, err
		}
		return Plan{Driver: d, Clause: cands[lone].i, Ordered: true, Estimate: -1}, nil
	}
	// First a cheap pass, each clause counted only up to SelectiveEnough:
	// when one is that selective it drives, and no common clause (a code
	// every tenth Observation has) is counted up to the full limit, which
	// cost more than the whole query (measured at 1M Observations).
	quick := -1
	quickN := c.Tune.SelectiveEnough
	for k := range cands {
		d, err := c.clauseDriver(&q.Where[cands[k].i], q.Types, false)
		if err != nil {
			return best, err
		}
		limit := quickN
		if cands[k].ordered && c.Known != nil {
			// Counted to the full limit: such a key is small (and the
			// count stops early) or is a common value (a code, a status)
			// that later queries then know to be large without counting
			// (see loneStream).
			limit = c.Tune.EstimateLimit
		}
		n, err := c.Estimate(c.Ctx, d, limit)
		if err != nil {
			return best, err
		}
		if n < quickN {
			quick, quickN = k, n
		}
	}
	if quick >= 0 {
		cd := cands[quick]
		d, err := c.clauseDriver(&q.Where[cd.i], q.Types, true)
		if err != nil {
			return best, err
		}
		return Plan{Driver: d, Clause: cd.i, Ordered: cd.ordered, Estimate: quickN}, nil
	}
	var streaming *cand
	for k := range cands {
		cd := &cands[k]
		// Counted without DISTINCT (cheaper; duplicates are rare) and only
		// up to the best so far: a larger driver would not be chosen.
		d, err := c.clauseDriver(&q.Where[cd.i], q.Types, false)
		if err != nil {
			return best, err
		}
		limit := c.Tune.EstimateLimit
		if best.Driver != nil {
			limit = best.Estimate
		}
		n, err := c.Estimate(c.Ctx, d, limit)
		if err != nil {
			return best, err
		}
		if n < limit {
			if d, err = c.clauseDriver(&q.Where[cd.i], q.Types, true); err != nil {
				return best, err
			}
			best = Plan{Driver: d, Clause: cd.i, Ordered: cd.ordered, Estimate: n}
			if n < c.Tune.SelectiveEnough {
				break
			}
		}
		if cd.ordered && streaming == nil {
			streaming = cd
		}
	}
	switch {
	case best.Driver != nil:
	case walk:
		// Every clause is large: walking the type in sort order, testing
		// each resource, fills the page long before the smallest clause
		// could be read and all its matches sorted.
		best.SortWalk = true
	case streaming != nil && !sorted:
		d, err := c.clauseDriver(&q.Where[streaming.i], q.Types, true)
		if err != nil {
			return best, err
		}
		best = Plan{Driver: d, Clause: streaming.i, Ordered: true, Estimate: -1}
	case sorted:
		// Every match must be read to sort them: reading only the rows of
		// one clause beats walking the whole type.
		d, err := c.clauseDriver(&q.Where[cands[0].i], q.Types, true)
		if err != nil {
			return best, err
		}
		best = Plan{Driver: d, Clause: cands[0].i, Ordered: cands[0].ordered, Estimate: -1}
	}
	// Otherwise (no sort, every clause large) the type is walked in rid
	// order, testing each resource, until the page is full: with several
	// large clauses the page usually fills long before the smallest is
	// read. (Measured: falling back to a driver after a bounded walk that
	// found little cost more than it saved.)
	return best, nil
}

// keysOfOneType says whether the plain keys of q's first sort key are
// mostly of q's type. The keys of a parameter are ordered by value before
// type, so a walk for one type steps over every other type's keys of the
// same code (name: Patient, Practitioner, Organization…): it is worth it
// only when those are few. The first EstimateLimit keys of the code are
// the sample: a bounded read, where counting every other type's key
// would read them all when there are few.
func (c *Compiler) keysOfOneType(q *search.Query) (bool, error) {
	limit := c.Tune.EstimateLimit
	d := &SQL{}
	d.Text("SELECT 1 FROM (SELECT k.type FROM search_keys AS k WHERE ")
	PrefixRange(d, "k.key", q.Sort[0].Param+"\x1f")
	d.Text(" LIMIT "+strconv.Itoa(limit)+") WHERE type <> ?", q.Types[0])
	others, err := c.Estimate(c.Ctx, d, limit)
	return 2*others < limit, err
}

// loneStream returns the index in cands of the only candidate not known
// to match at least EstimateLimit rows, when it streams in rid order and
// the page is unsorted; else -1.
func (c *Compiler) loneStream(q *search.Query, cands []cand, sorted bool) (int, error) {
	// _total=estimate takes the driver's count when it is small: keep
	// counting, so that whether a total comes back does not depend on
	// what the cache holds.
	if sorted || q.Total == search.TotalEstimate {
		return -1, nil
	}
	lone := -1
	for k, cd := range cands {
		// A chain or _has driver runs a search of its own to be built,
		// and its aliases differ from the quick pass's: never known.
		if c.Known != nil && len(cands) > 1 && !hasSubquery(&q.Where[cd.i]) {
			d, err := c.clauseDriver(&q.Where[cd.i], q.Types, false)
			if err != nil {
				return -1, err
			}
			if n, ok := c.Known(d, c.Tune.EstimateLimit); ok && n >= c.Tune.EstimateLimit {
				continue
			}
		}
		if lone >= 0 {
			return -1, nil
		}
		lone = k
	}
	if lone < 0 || !cands[lone].ordered {
		return -1, nil
	}
	return lone, nil
}

// hasSubquery says whether a clause has a chain or _has match.
func hasSubquery(cl *search.Clause) bool {
	for i := range cl.Any {
		if cl.Any[i].Op == search.OpChain || cl.Any[i].Op == search.OpHas {
			return true
		}
	}
	return false
}

// clauseRank says whether a clause can drive (every match positive and of
// a kind with an index range), how cheap it looks, and whether its driver
// yields rids in order without duplicates (one key, no type ambiguity).
func clauseRank(cl *search.Clause) (rank int, ordered, ok bool) {
	if len(cl.Any) == 0 {
		return 0, false, false
	}
	for i := range cl.Any {
		m := &cl.Any[i]
		if m.Not {
			return 0, false, false
		}
		var r int
		switch m.Op {
		case search.OpKey:
			r = 1
			if len(m.Keys) > 1 {
				r = 2
			}
		case search.OpChain:
			r = 3
		case search.OpKeyPrefix:
			r = 4
		case search.OpKeyContains:
			r = 5
		case search.OpDate, search.OpNumber:
			if m.Cmp == search.CmpNe {
				return 0, false, false
			}
			r = 6
		default:
			return 0, false, false
		}
		rank = max(rank, r)
	}
	ordered = len(cl.Any) == 1 && cl.Any[0].Op == search.OpKey && len(cl.Any[0].Keys) == 1
	return rank, ordered, true
}
