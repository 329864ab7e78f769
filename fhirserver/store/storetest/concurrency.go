package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var concurrencyTests = []test{
	{"ReadCASRetryLosesNoUpdate", testCASRetry},
	{"RacingSameVersionOneWins", testRacingSameVersion},
}

// testCASRetry proves no update is lost under contention: 32 goroutines each
// apply one update with the read, Put current+1, retry-on-ErrConflict loop
// the FHIR layer uses. Afterwards the resource has exactly 33 versions,
// numbered 1..33 without gaps, and every goroutine's update is one of them.
func testCASRetry(t *testing.T, s *handle) {
	const workers = 32
	mustPut(t, s, write("Patient", "hot", 1, at(0)))

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Go(func() {
			for attempt := 0; ; attempt++ {
				if attempt > 10*workers {
					errs <- fmt.Errorf("worker %d: no success after %d attempts", g, attempt)
					return
				}
				cur, err := s.Read(ctx(t), "Patient", "hot")
				if err != nil {
					errs <- fmt.Errorf("worker %d: Read: %w", g, err)
					return
				}
				w := write("Patient", "hot", cur.Version+1, at(1).Add(time.Duration(cur.Version)*time.Millisecond))
				// The body names the worker, so each update is traceable.
				w.Body = fmt.Appendf(nil, `{"resourceType":"Patient","id":"hot","worker":%d}`, g)
				err = s.Put(ctx(t), w)
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: Put v%d: %w", g, w.Version, err)
				}
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	if cur := mustRead(t, s, "Patient", "hot"); cur.Version != workers+1 {
		t.Fatalf("current version %d, want %d", cur.Version, workers+1)
	}
	workersSeen := map[string]bool{}
	for v := int64(1); v <= workers+1; v++ {
		got := mustVRead(t, s, "Patient", "hot", v)
		if v > 1 {
			workersSeen[string(got.Body)] = true
		}
	}
	if len(workersSeen) != workers {
		t.Fatalf("%d distinct updates stored, want %d (an update was lost or applied twice)", len(workersSeen), workers)
	}
	if _, err := s.VRead(ctx(t), "Patient", "hot", workers+2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("VRead v%d: %v, want ErrNotFound", workers+2, err)
	}
	vs := collect(t, s, store.HistoryQuery{Type: "Patient", ID: "hot", Count: 10})
	if len(vs) != workers+1 {
		t.Fatalf("instance history has %d versions, want %d", len(vs), workers+1)
	}
}

// testRacingSameVersion proves the compare-and-swap is atomic: N goroutines
// that all Put the same version (a create, then an update) produce exactly
// one winner; every other Put is ErrConflict, and the stored version is the
// winner's.
func testRacingSameVersion(t *testing.T, s *handle) {
	const racers = 16
	for _, version := range []int64{1, 2} {
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]error, racers)
		for g := range racers {
			wg.Go(func() {
				w := write("Patient", "race", version, at(int(version)))
				w.Body = fmt.Appendf(nil, `{"resourceType":"Patient","id":"race","racer":%d}`, g)
				<-start
				results[g] = s.Put(ctx(t), w)
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for g, err := range results {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("version %d: racers %d and %d both won", version, winner, g)
			case err == nil:
				winner = g
			case !errors.Is(err, store.ErrConflict):
				t.Fatalf("version %d: racer %d: %v, want nil or ErrConflict", version, g, err)
			}
		}
		if winner < 0 {
			t.Fatalf("version %d: no racer won", version)
		}
		got := mustRead(t, s, "Patient", "race")
		if want := fmt.Sprintf(`{"resourceType":"Patient","id":"race","racer":%d}`, winner); got.Version != version || string(got.Body) != want {
			t.Fatalf("version %d: stored v%d %s, want the winner's %s", version, got.Version, got.Body, want)
		}
	}
}
