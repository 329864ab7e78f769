package fhirserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// A transaction holds the store's single writer while its entries are
// applied one by one. Validating and extracting index rows are the largest
// part of an entry's work that does not need the writer, so they are done
// for all entries at once, on every CPU, and when no entry needs a search
// before the transaction takes the writer at all; the entries' writes then
// pick up their rows (nextWrite). Every entry of a transaction is stamped
// with one lastUpdated, taken once it holds the writer: rows extracted
// earlier are moved to it (only meta.lastUpdated changes between the two).

// preindexed is the rows extracted in advance for one resource write, whose
// body also passed the second validation layer (one that fails is not
// preindexed: its entry reports the failure when applied).
type preindexed struct {
	src []byte // the request body the rows were extracted from
	at  time.Time
	// withMeta is src with id, versionId 1 and lastUpdated at, as a
	// create stores it once restamped with its own time.
	withMeta []byte
	rows     *search.Rows
	// stamped are the parameters indexing meta.lastUpdated, whose rows
	// move with the write's time; movable is false when some parameter
	// mixes it with other values, or indexes meta.versionId (extraction
	// assumes version 1).
	stamped []string
	movable bool
	gen     uint64 // the registry's generation the rows were extracted with
}

// stampParams returns the parameters of typ that index meta.lastUpdated
// alone, and false if another parameter depends on the write's meta.
func (s *Server) stampParams(typ string) ([]string, bool) {
	var out []string
	for _, p := range s.registry.Params(typ) {
		if strings.Contains(p.Expression, "versionId") {
			return nil, false
		}
		if !strings.Contains(p.Expression, "lastUpdated") {
			continue
		}
		base, ok := strings.CutSuffix(p.Expression, ".meta.lastUpdated")
		if !ok || p.Type != "date" || (base != "Resource" && base != "DomainResource" && base != typ) {
			return nil, false
		}
		out = append(out, p.Code)
	}
	return out, true
}

// rowsAt returns the rows for a write at t: as extracted, or with the
// ranges of the stamped parameters moved by t's distance from p.at (both
// are millisecond instants, so the ranges keep their width).
func (p *preindexed) rowsAt(t time.Time) (*search.Rows, bool) {
	if p == nil || !p.movable {
		return nil, false
	}
	if t.Equal(p.at) {
		return p.rows, true
	}
	d := t.Sub(p.at).Microseconds()
	r := *p.rows
	r.Dates = slices.Clone(r.Dates)
	r.Sorts = slices.Clone(r.Sorts)
	for i := range r.Dates {
		if slices.Contains(p.stamped, r.Dates[i].Param) {
			r.Dates[i].Low += d
			r.Dates[i].High += d
		}
	}
	for i := range r.Sorts {
		if !slices.Contains(p.stamped, r.Sorts[i].Param) {
			continue
		}
		lo, okLo := r.Sorts[i].Lo.(int64)
		hi, okHi := r.Sorts[i].Hi.(int64)
		if !okLo || !okHi {
			return nil, false
		}
		r.Sorts[i].Lo, r.Sorts[i].Hi = lo+d, hi+d
	}
	return &r, true
}

type preindexKey struct{}
type nowKey struct{}

// withNow fixes the time of every write made with ctx.
func withNow(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, nowKey{}, t)
}

// nowFor is the time of a write: the transaction's, or the clock's.
func (s *Server) nowFor(ctx context.Context) time.Time {
	if t, ok := ctx.Value(nowKey{}).(time.Time); ok {
		return t
	}
	return s.now()
}

func withPreindexed(ctx context.Context, m map[string]*preindexed) context.Context {
	return context.WithValue(ctx, preindexKey{}, m)
}

// restamp is the body stamped in advance, moved to t, for a create (no
// prev: version 1, as it was stamped); stamp does the others.
func (p *preindexed) restamp(t time.Time, prev *store.Version) ([]byte, bool) {
	if p == nil || prev != nil {
		return nil, false
	}
	return fhirjson.Restamp(p.withMeta, t)
}

// preindexedFor returns what was prepared in advance for the write of
// typ/id with body src, or nil if nothing fits: a SearchParameter
// activated since makes the rows stale.
func (s *Server) preindexedFor(ctx context.Context, typ, id string, src []byte) *preindexed {
	m, _ := ctx.Value(preindexKey{}).(map[string]*preindexed)
	p, ok := m[typ+"/"+id]
	if !ok || p.gen != s.registry.Generation() || !bytes.Equal(p.src, src) {
		return nil
	}
	return p
}

// preindexJob is one entry to extract rows for.
type preindexJob struct {
	typ, id string
	body    []byte
}

// preindex extracts the rows of the jobs concurrently. A job that fails is
// left out: its entry extracts (and reports the error) when applied.
func (s *Server) preindex(ctx context.Context, jobs []preindexJob, at time.Time) map[string]*preindexed {
	out := make(map[string]*preindexed, len(jobs))
	gen := s.registry.Generation()
	type stamp struct {
		params  []string
		movable bool
	}
	stamps := map[string]stamp{}
	for _, j := range jobs {
		if _, ok := stamps[j.typ]; !ok {
			params, movable := s.stampParams(j.typ)
			stamps[j.typ] = stamp{params, movable}
		}
	}
	var mu sync.Mutex
	next := make(chan preindexJob)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for j := range next {
				withMeta, err := fhirjson.SetMeta(j.body, j.id, "1", at) // versionId is not indexed
				if err != nil {
					continue
				}
				rows, err := s.checkedRows(ctx, j.typ, withMeta)
				if err != nil {
					continue
				}
				mu.Lock()
				st := stamps[j.typ]
				out[j.typ+"/"+j.id] = &preindexed{src: j.body, at: at, withMeta: withMeta, rows: rows, stamped: st.params, movable: st.movable, gen: gen}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return out
}

// errNeedsLookup stops a rewrite that would have to search the store.
var errNeedsLookup = errors.New("fhirserver: the rewrite needs a lookup")

// preindexJobs lists the creates and updates of a transaction whose body
// and id are known before any entry is applied: their references can be
// rewritten without searching (a conditional reference is resolved when
// its entry is applied, after the entries before it), and their id is
// fixed. bodies receives the rewritten bodies, by entry.
func (rw *rewriter) preindexJobs(ctx context.Context, entries []entryIn, bodies [][]byte) []preindexJob {
	for i := range entries {
		if bytes.Contains(entries[i].Resource, []byte(`"SearchParameter"`)) {
			return nil // a new parameter would apply to the entries after it
		}
	}
	var jobs []preindexJob
	for i := range entries {
		e := &entries[i]
		if e.Request == nil || (e.Request.Method != http.MethodPost && e.Request.Method != http.MethodPut) {
			continue
		}
		id := rw.ids[i]
		if id == "" {
			continue
		}
		body, err := rw.rewriteNoLookup(ctx, e.Resource, e.FullURL)
		if err != nil {
			continue
		}
		bodies[i] = body
		typ, _, _ := strings.Cut(rw.s.entryURL(e), "/")
		typ, _, _ = strings.Cut(typ, "?")
		jobs = append(jobs, preindexJob{typ: typ, id: id, body: body})
	}
	return jobs
}
