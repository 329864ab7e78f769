package fhirserver

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// budget bounds the bytes of request bodies being read and validated at
// once. Structural validation costs about 30 times a body's size in memory
// and ~0.3 s of CPU per MiB, so without a bound a handful of concurrent
// large uploads could exhaust the server. Small bodies barely touch it.
type budget struct {
	mu      sync.Mutex
	total   int64
	free    int64
	changed chan struct{} // closed and replaced whenever bytes are released
}

func newBudget(total int64) *budget {
	return &budget{total: total, free: total, changed: make(chan struct{})}
}

// budgetWait is how long a request may queue for validation capacity before
// it is told to come back later.
const budgetWait = 30 * time.Second

// acquire reserves n bytes, waiting while the budget is exhausted. A request
// larger than the whole budget waits for all of it.
func (b *budget) acquire(ctx context.Context, n int64) (release func(), err error) {
	n, err = b.take(ctx, n)
	if err != nil {
		return nil, err
	}
	return func() { b.release(n) }, nil
}

// take reserves n bytes (at least 1, at most the whole budget) as acquire
// does, and returns how many; b.release gives them back.
func (b *budget) take(ctx context.Context, n int64) (int64, error) {
	n = max(1, min(n, b.total))
	timer := time.NewTimer(budgetWait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return n, nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return 0, outcome.New(http.StatusServiceUnavailable, "transient",
				"the server is busy validating other large requests; retry later")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// body reserves budget for r's body and returns the reader to read it
// through: a declared length is reserved at once; a body of unknown length
// (chunked, or decoded from gzip) reserves as its bytes arrive.
func (b *budget) body(r *http.Request) (_ io.Reader, release func(), err error) {
	if r.ContentLength >= 0 {
		release, err = b.acquire(r.Context(), r.ContentLength)
		return r.Body, release, err
	}
	return b.reader(r.Context(), r.Body)
}

// growingReserve is the first reservation of a body of unknown length
// (sent chunked, or decoded from gzip).
const growingReserve = 64 << 10

// reader reserves budget for a body of unknown length as its bytes
// arrive, doubling the reservation each time the bytes read pass it: a
// slow body holds only what it has sent, so one cannot take the whole
// budget by promising a large body. release returns what was reserved.
func (b *budget) reader(ctx context.Context, r io.Reader) (_ io.Reader, release func(), err error) {
	g := &growing{b: b, ctx: ctx, r: r}
	if err := g.reserve(min(growingReserve, b.total)); err != nil {
		return nil, nil, err
	}
	return g, func() { b.release(g.held) }, nil
}

type growing struct {
	b    *budget
	ctx  context.Context
	r    io.Reader
	held int64 // reserved
	read int64
}

func (g *growing) reserve(n int64) error {
	n, err := g.b.take(g.ctx, n)
	g.held += n
	return err
}

func (g *growing) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.read += int64(n)
	if g.read > g.held && g.held < g.b.total {
		// Never more than the whole budget in all: acquire would wait for
		// this reader's own bytes.
		if rerr := g.reserve(min(max(g.read, 2*g.held), g.b.total) - g.held); rerr != nil {
			return n, rerr
		}
	}
	return n, err
}
