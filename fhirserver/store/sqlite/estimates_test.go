package sqlite

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/compile"
)

// TestEstimateCache: an exact count answers any limit, a saturated one
// only limits up to its own; entries expire, and the cache stays bounded.
func TestEstimateCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &estimateCache{now: func() time.Time { return now }}
	c.put("exact", 7, 64)
	c.put("large", 64, 64)
	for _, tc := range []struct {
		key   string
		limit int
		n     int
		ok    bool
	}{
		{"exact", 64, 7, true},
		{"exact", 2000, 7, true},
		{"exact", 5, 5, true}, // at least the smaller limit
		{"large", 10, 10, true},
		{"large", 64, 64, true},
		{"large", 2000, 0, false}, // only known to be at least 64
		{"absent", 64, 0, false},
	} {
		n, ok := c.get(tc.key, tc.limit)
		if n != tc.n || ok != tc.ok {
			t.Errorf("get(%s, %d) = %d, %v; want %d, %v", tc.key, tc.limit, n, ok, tc.n, tc.ok)
		}
	}
	now = now.Add(estimateTTL + time.Second)
	if _, ok := c.get("exact", 64); ok {
		t.Error("an expired estimate was used")
	}
	for i := range estimateCacheSize + 10 {
		c.put(strconv.Itoa(i), 1, 64)
	}
	if len(c.m) > estimateCacheSize {
		t.Errorf("cache holds %d entries, bound %d", len(c.m), estimateCacheSize)
	}
}

// TestEstimateKey: estimates of the same SQL with other values, or values
// of another type, are not confused.
func TestEstimateKey(t *testing.T) {
	a := (&compile.SQL{}).Text("SELECT ?", "1")
	b := (&compile.SQL{}).Text("SELECT ?", int64(1))
	c := (&compile.SQL{}).Text("SELECT ?", "2")
	if estimateKey(a) == estimateKey(b) || estimateKey(a) == estimateKey(c) {
		t.Errorf("keys collide: %q %q %q", estimateKey(a), estimateKey(b), estimateKey(c))
	}
}

// TestKnownLargeClauseSkipsEstimates: once a common key is known to match
// at least the estimate limit, a query pairing it with one other equality
// key drives by that key without counting anything, and still drives by
// the selective key; sorted queries keep counting.
func TestKnownLargeClauseSkipsEstimates(t *testing.T) {
	_, run := planStore(t)
	run.estimates = &estimateCache{now: time.Now}
	tune := compile.Tuning{EstimateLimit: 50, SelectiveEnough: 5}
	counted := 0
	choose := func(q *search.Query) compile.Plan {
		t.Helper()
		c := &compile.Compiler{Ctx: t.Context(), Tune: tune,
			Estimate: func(ctx context.Context, d *compile.SQL, limit int) (int, error) {
				counted++
				return run.estimate(ctx, d, limit)
			},
			Known: func(d *compile.SQL, limit int) (int, bool) { return run.estimates.get(estimateKey(d), limit) }}
		p, err := c.Choose(q, len(q.Sort) > 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Every observation has status final (500 rows).
	status := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"status\x1ffinal"}}}}
	subject := func(n int) search.Clause {
		return search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"subject\x1fPatient/p" + strconv.Itoa(n)}}}}
	}
	obs := []string{"Observation"}
	for i, want := range []bool{true, false, false} {
		counted = 0
		p := choose(&search.Query{Types: obs, Where: []search.Clause{status, subject(7 + i)}})
		if p.Clause != 1 || !p.Ordered {
			t.Errorf("query %d: driver clause %d (ordered %v), want the subject", i, p.Clause, p.Ordered)
		}
		if (counted > 0) != want {
			t.Errorf("query %d: %d estimates counted, want counting %v", i, counted, want)
		}
	}
	counted = 0
	choose(&search.Query{Types: obs, Where: []search.Clause{status, subject(20)}, Sort: []search.Sort{{Param: "_id"}}})
	if counted == 0 {
		t.Error("a sorted query chose its driver without estimates")
	}
}

// TestTotalEstimateKeepsCounting: with _total=estimate the driver is
// still counted, so a total comes back whatever the cache holds.
func TestTotalEstimateKeepsCounting(t *testing.T) {
	_, run := planStore(t)
	run.estimates = &estimateCache{now: time.Now}
	status := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"status\x1ffinal"}}}}
	for i := range 3 {
		subject := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"subject\x1fPatient/p" + strconv.Itoa(i)}}}}
		c := &compile.Compiler{Ctx: t.Context(), Estimate: run.estimate, Tune: compile.Tuning{EstimateLimit: 50, SelectiveEnough: 5},
			Known: func(d *compile.SQL, limit int) (int, bool) { return run.estimates.get(estimateKey(d), limit) }}
		p, err := c.Choose(&search.Query{Types: []string{"Observation"}, Where: []search.Clause{status, subject}, Total: search.TotalEstimate}, false)
		if err != nil {
			t.Fatal(err)
		}
		if p.Estimate < 0 {
			t.Errorf("query %d: no estimate for _total=estimate", i)
		}
	}
}
