package sqlite

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/compile"
)

// estimateCache remembers recent driver estimates, so that a clause every
// query of a kind shares (code=loinc|8867-4, status=final) is not counted
// again on each: with a selective clause beside it, that count was a fifth
// of the server's CPU on the subject+code search. Estimates only choose a
// plan (a total is always counted afresh), so one that is a little stale
// costs at most a slower plan for its lifetime.
type estimateCache struct {
	mu  sync.Mutex
	m   map[string]estimated
	now func() time.Time
}

// estimated is a count of up to limit rows: n < limit is exact, n == limit
// means at least limit.
type estimated struct {
	n, limit int
	at       time.Time
}

const (
	estimateTTL       = 30 * time.Second
	estimateCacheSize = 4096
)

// estimateKey identifies a driver by a hash of its SQL and values, so an
// entry stays small whatever the query's size (a _search form may list
// thousands of codes).
func estimateKey(d *compile.SQL) string {
	h := sha256.New()
	io.WriteString(h, d.String())
	for _, a := range d.Args() {
		fmt.Fprintf(h, "\x00%T:%q", a, fmt.Sprint(a)) // quoted: no value can fake a separator
	}
	return string(h.Sum(nil))
}

// get returns the count of up to limit rows the cache knows for key.
func (c *estimateCache) get(key string, limit int) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || c.now().Sub(e.at) > estimateTTL {
		return 0, false
	}
	switch {
	case e.n < e.limit:
		return min(e.n, limit), true
	case limit <= e.limit:
		return limit, true
	}
	return 0, false // at least e.limit, and more is asked
}

func (c *estimateCache) put(key string, n, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= estimateCacheSize {
		// Dropping everything is simpler than an LRU, and the hot
		// estimates come back with the next queries.
		c.m = make(map[string]estimated)
	}
	c.m[key] = estimated{n: n, limit: limit, at: c.now()}
}

// estimate counts the rows of a driver, up to limit, through the cache
// when the runner has one (the reader pool; a transaction's counts see its
// own writes and are not shared).
func (r *runner) estimate(ctx context.Context, d *compile.SQL, limit int) (int, error) {
	if r.estimates == nil {
		return r.countUpTo(ctx, d, limit)
	}
	key := estimateKey(d)
	if n, ok := r.estimates.get(key, limit); ok {
		return n, nil
	}
	n, err := r.countUpTo(ctx, d, limit)
	if err == nil {
		r.estimates.put(key, n, limit)
	}
	return n, err
}
