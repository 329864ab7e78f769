// Package preindex prepares a transaction's writes before it takes the
// store's single writer: each resource's second validation layer and
// index rows, on every CPU.
package preindex

import (
	"bytes"
	"context"
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
// pick up their rows (fhirserver's nextWrite). Every entry of a transaction is stamped
// with one lastUpdated, taken once it holds the writer: rows extracted
// earlier are moved to it (only meta.lastUpdated changes between the two).

// Prepared is the rows extracted in advance for one resource write, whose
// body also passed the second validation layer (one that fails is not
// prepared: its entry reports the failure when applied).
type Prepared struct {
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
func stampParams(reg *search.Registry, typ string) ([]string, bool) {
	var out []string
	for _, p := range reg.Params(typ) {
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

// RowsAt returns the rows for a write at t: as extracted, or with the
// ranges of the stamped parameters moved by t's distance from p.at (both
// are millisecond instants, so the ranges keep their width).
func (p *Prepared) RowsAt(t time.Time) (*search.Rows, bool) {
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

// Restamp is the body stamped in advance, moved to t, for a create (no
// prev: version 1, as it was stamped); the others are stamped as written.
func (p *Prepared) Restamp(t time.Time, prev *store.Version) ([]byte, bool) {
	if p == nil || prev != nil {
		return nil, false
	}
	return fhirjson.Restamp(p.withMeta, t)
}

// For returns what was prepared for the write of typ/id with body src
// (nil if nothing fits: a SearchParameter activated since the registry's
// generation gen makes the rows stale).
func (ps Set) For(typ, id string, src []byte, gen uint64) *Prepared {
	p, ok := ps[typ+"/"+id]
	if !ok || p.gen != gen || !bytes.Equal(p.src, src) {
		return nil
	}
	return p
}

// Set is what Run prepared, by Type/id.
type Set map[string]*Prepared

// Job is a write of a transaction whose resource and id are known before
// the transaction is applied.
type Job struct {
	Type, ID string
	Body     []byte
}

// Run validates the resources of the jobs and extracts their rows with
// checkedRows concurrently, as written at at. A job that fails is left
// out: its entry extracts (and reports the error) when applied.
func Run(ctx context.Context, jobs []Job, at time.Time, reg *search.Registry,
	checkedRows func(ctx context.Context, typ string, body []byte) (*search.Rows, error)) Set {
	out := make(Set, len(jobs))
	gen := reg.Generation()
	type stamp struct {
		params  []string
		movable bool
	}
	stamps := map[string]stamp{}
	for _, j := range jobs {
		if _, ok := stamps[j.Type]; !ok {
			params, movable := stampParams(reg, j.Type)
			stamps[j.Type] = stamp{params, movable}
		}
	}
	var mu sync.Mutex
	next := make(chan Job)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for j := range next {
				withMeta, err := fhirjson.SetMeta(j.Body, j.ID, "1", at) // versionId is not indexed
				if err != nil {
					continue
				}
				rows, err := checkedRows(ctx, j.Type, withMeta)
				if err != nil {
					continue
				}
				mu.Lock()
				st := stamps[j.Type]
				out[j.Type+"/"+j.ID] = &Prepared{src: j.Body, at: at, withMeta: withMeta, rows: rows, stamped: st.params, movable: st.movable, gen: gen}
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
