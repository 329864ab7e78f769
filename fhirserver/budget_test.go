package fhirserver

import (
	"context"
	"io"
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

// A body of unknown length reserves as its bytes arrive: a stalled one
// holds only its first reservation, so other bodies still get in, and
// what it held comes back when it is done.
func TestBudgetGrowsWithTheBody(t *testing.T) {
	const total = 1 << 20
	b := newBudget(total)
	pr, pw := io.Pipe()
	src, release, err := b.reader(context.Background(), pr)
	if err != nil {
		t.Fatal(err)
	}
	// Stalled (nothing written yet): another 900 KiB body fits beside it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	rel, err := b.acquire(ctx, 900<<10)
	cancel()
	if err != nil {
		t.Fatalf("a stalled body of unknown length took more than its first %d bytes: %v", growingReserve, err)
	}
	rel()
	go func() {
		_, _ = pw.Write(make([]byte, 300<<10))
		pw.Close()
	}()
	n, err := io.Copy(io.Discard, src)
	if err != nil || n != 300<<10 {
		t.Fatalf("read %d: %v", n, err)
	}
	if held := total - b.free; held < 300<<10 || held > 600<<10 {
		t.Errorf("holds %d bytes after reading %d", held, n)
	}
	release()
	if b.free != total {
		t.Errorf("free %d after release, want %d", b.free, total)
	}
}
