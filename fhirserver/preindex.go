package fhirserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// A transaction holds the store's single writer while its entries are
// applied one by one. Extracting index rows is the largest part of an
// entry's work that does not need the writer, so before the entries are
// applied it is done for all of them at once, on every CPU; the entries'
// writes then pick up their rows (nextWrite). Every entry of a transaction
// is stamped with one lastUpdated, which also makes the rows (_lastUpdated
// is indexed) computable in advance.

// preindexed is the rows extracted in advance for one resource write, whose
// body also passed the second validation layer (one that fails is not
// preindexed: its entry reports the failure when applied).
type preindexed struct {
	src  []byte // the request body the rows were extracted from
	at   time.Time
	rows *search.Rows
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

// preindexedRows returns the rows extracted in advance for the write of
// typ/id with body src at lastUpdated, if there are any that fit.
func preindexedRows(ctx context.Context, typ, id string, src []byte, at time.Time) (*search.Rows, bool) {
	m, _ := ctx.Value(preindexKey{}).(map[string]*preindexed)
	p, ok := m[typ+"/"+id]
	if !ok || !p.at.Equal(at) || !bytes.Equal(p.src, src) {
		return nil, false
	}
	return p.rows, true
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
				out[j.typ+"/"+j.id] = &preindexed{src: j.body, at: at, rows: rows}
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
		body, err := rw.rewriteNoLookup(ctx, e.Resource)
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
