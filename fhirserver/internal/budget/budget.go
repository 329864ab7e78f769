// Package budget bounds the bytes of request bodies being read and
// validated at once, across the REST layer, Bundles and the service.
package budget

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Budget bounds the bytes of request bodies being read and validated at
// once. Structural validation costs about 30 times a body's size in memory
// and ~0.3 s of CPU per MiB, so without a bound a handful of concurrent
// large uploads could exhaust the server. Small bodies barely touch it.
//
// Requests are admitted first come, first served (semaphore.Weighted
// queues waiters in order): a large Bundle waiting for room is not
// overtaken by a stream of small requests until it times out, as it was
// with a wait loop where whoever found room first took it.
type Budget struct {
	total int64
	sem   *semaphore.Weighted
	wait  time.Duration // budgetWait; tests shorten it
}

// New returns a budget of total bytes.
func New(total int64) *Budget {
	return &Budget{total: total, sem: semaphore.NewWeighted(total), wait: budgetWait}
}

// budgetWait is how long a request may queue for validation capacity before
// it is told to come back later.
const budgetWait = 30 * time.Second

// Acquire reserves n bytes (at least 1, at most the whole budget), waiting
// in line while the budget is exhausted; release gives them back.
func (b *Budget) Acquire(ctx context.Context, n int64) (release func(), err error) {
	n = max(1, min(n, b.total))
	wait, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(wait, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, outcome.New(http.StatusServiceUnavailable, "transient",
				"the server is busy validating other large requests; retry later")
		}
		return nil, err
	}
	return func() { b.sem.Release(n) }, nil
}

// Body reserves budget for r's body, whose size limit is limit, and
// returns the reader to read it through: the declared length when there
// is one, else (chunked, or decoded from gzip) the limit itself.
//
// A body of unknown length used to reserve as its bytes arrived. With
// waiters served in order that can deadlock: two such bodies each hold
// part of the budget and each waits, in line, for bytes the other holds
// (until both time out). Reserving the limit up front never holds bytes
// while waiting for more. It treats an unknown length as the largest the
// client could send, as a declared length is taken at its word: a
// stalled client holds what it announced either way, within the request
// deadline.
func (b *Budget) Body(r *http.Request, limit int64) (_ io.Reader, release func(), err error) {
	n := r.ContentLength
	if n < 0 {
		n = limit
	}
	release, err = b.Acquire(r.Context(), n)
	return r.Body, release, err
}
