package fhirserver

import (
	"context"
	"testing"
	"time"
)

// The validation budget admits bodies while bytes are free, makes the rest
// wait, and lets a waiter in as soon as bytes are released.
func TestBudget(t *testing.T) {
	b := newBudget(100)
	rel1, err := b.acquire(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{50, 1000} { // 1000 is capped at the whole budget
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := b.acquire(ctx, n)
		cancel()
		if err == nil {
			t.Fatalf("acquired %d with 40 free", n)
		}
	}
	got := make(chan error, 1)
	go func() {
		rel, err := b.acquire(context.Background(), 100)
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
	if b.free != b.total {
		t.Errorf("free %d after all releases, want %d", b.free, b.total)
	}
}
