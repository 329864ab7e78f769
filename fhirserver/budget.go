package fhirserver

import (
	"context"
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
	n = max(1, min(n, b.total))
	timer := time.NewTimer(budgetWait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return func() { b.release(n) }, nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return nil, outcome.New(http.StatusServiceUnavailable, "transient",
				"the server is busy validating other large requests; retry later")
		case <-ctx.Done():
			return nil, ctx.Err()
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
