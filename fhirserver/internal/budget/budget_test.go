package budget

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// The validation budget admits bodies while bytes are free, makes the rest
// wait, and lets a waiter in as soon as bytes are released.
func TestBudget(t *testing.T) {
	b := New(100)
	rel1, err := b.Acquire(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{50, 1000} { // 1000 is capped at the whole budget
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := b.Acquire(ctx, n)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquired %d with 40 free: %v", n, err)
		}
	}
	got := make(chan error, 1)
	go func() {
		rel, err := b.Acquire(context.Background(), 100)
		if err == nil {
			rel()
		}
		got <- err
	}()
	rel1()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter was not admitted after release")
	}
	if !b.sem.TryAcquire(100) {
		t.Error("bytes are still held after all releases")
	}
}

// Waiters are admitted in the order they came: a large request queued
// behind a held reservation is not overtaken by small ones that would fit
// (with the old wait loop they took every freed byte first and the large
// one timed out).
func TestBudgetIsFirstComeFirstServed(t *testing.T) {
	b := New(100)
	hold, err := b.Acquire(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	large := make(chan func(), 1)
	go func() {
		rel, err := b.Acquire(context.Background(), 100)
		if err != nil {
			t.Error(err)
			rel = func() {}
		}
		large <- rel
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !waiting(b, 100) && time.Now().Before(deadline) { // the large one is in line
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = b.Acquire(ctx, 10)
	cancel()
	if err == nil {
		t.Fatal("a small request overtook the large one waiting before it")
	}
	hold()
	select {
	case rel := <-large:
		rel()
	case <-time.After(5 * time.Second):
		t.Fatal("the large request was not admitted")
	}
}

// waiting reports whether someone waits for n bytes: a 1-byte try fails
// while a waiter is in line even with bytes free.
func waiting(b *Budget, n int64) bool {
	if b.sem.TryAcquire(1) {
		b.sem.Release(1)
		return false
	}
	return true
}

// A request that waits longer than the budget's wait is told to retry
// (503); one whose client went away gets the context's error.
func TestBudgetWaitEnds(t *testing.T) {
	b := New(10)
	b.wait = 50 * time.Millisecond
	rel, err := b.Acquire(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	// A client still waiting when the budget's own wait ends.
	ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err = b.Acquire(ctx, 1)
	if oe, ok := outcome.As(err); !ok || oe.Status != http.StatusServiceUnavailable {
		t.Errorf("wait past the budget's wait: %v, want a 503 OperationOutcome", err)
	}
	// The waiter that gave up left the line: the next one gets in.
	rel()
	rel, err = b.Acquire(context.Background(), 10)
	if err != nil {
		t.Fatalf("after a timed-out waiter: %v", err)
	}
	rel()
}

// Bodies of unknown length reserve their limit up front, so they never
// hold part of the budget while waiting in line for more: two of them at
// once, with room for only one, both finish (they deadlocked when each
// reserved as its bytes arrived).
func TestBudgetUnknownLengthsDoNotDeadlock(t *testing.T) {
	const limit = 1 << 20
	b := New(limit + limit/2) // room for one limit-size body only
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			r, _ := http.NewRequest("POST", "/fhir/Patient", strings.NewReader(strings.Repeat("x", limit)))
			r.ContentLength = -1 // chunked
			src, release, err := b.Body(r, limit)
			if err != nil {
				errs <- err
				return
			}
			defer release()
			buf := make([]byte, 4096)
			for {
				if _, err := src.Read(buf); err != nil {
					break
				}
				time.Sleep(time.Microsecond) // interleave the two readers
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("two bodies of unknown length deadlocked on the budget")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !b.sem.TryAcquire(b.total) {
		t.Error("bytes are still held after both bodies")
	}
}
