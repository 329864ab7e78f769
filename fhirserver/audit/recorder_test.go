package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/syncbuf"
)

func TestChainVerifies(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1234} { // 1234: several batches and Verify pages
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			st, _ := openLog(t)
			opts := testOptions(t, nil)
			opts.BatchSize = 100
			r := newRecorder(t, st, opts)
			recordN(t, r, 0, n)
			var pages int
			rep, err := Verify(context.Background(), st, func(int64) { pages++ })
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || rep.Checked != int64(n) || rep.Head != int64(n) {
				t.Fatalf("report %+v, want OK with %d records", rep, n)
			}
			if want := max(1, (n+499)/500); pages != want {
				t.Errorf("progress called %d times, want %d", pages, want)
			}
			if seq, hash := r.Head(); seq != int64(n) || len(hash) != 64 {
				t.Errorf("Head() = %d, %s", seq, hash)
			}
			if n > 0 {
				es, err := st.Newest(context.Background(), 0, 2)
				if err != nil || len(es) != min(n, 2) || es[0].Seq != int64(n) {
					t.Fatalf("read tail: %v %v", es, err)
				}
				if rec, err := parseRecord(es[0].Body); err != nil || rec.ID != idFor(int64(n)) || rec.Seq != int64(n) {
					t.Fatalf("tail record: %+v %v", rec, err)
				}
				if len(es) == 2 && !es[1].Time.Before(es[0].Time) {
					t.Errorf("entry times do not increase: %v, then %v", es[1].Time, es[0].Time)
				}
			}
		})
	}
}

func TestRestartContinuesChain(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t)
	r1, err := NewRecorder(ctx, st, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	recordN(t, r1, 0, 5)
	if err := r1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, head := r1.Head()

	r2 := newRecorder(t, st, testOptions(t, nil))
	if seq, h := r2.Head(); seq != 5 || h != head {
		t.Fatalf("restarted at %d %s, want 5 %s", seq, h, head)
	}
	recordN(t, r2, 5, 5)
	rec, err := parseRecord(bodyOf(t, st, 6))
	if err != nil || rec.Seq != 6 || rec.Prev != head {
		t.Fatalf("record 6: %+v %v, want prev %s", rec, err, head)
	}
	if rep := verify(t, st); !rep.OK || rep.Checked != 10 {
		t.Fatalf("report %+v", rep)
	}
}

func TestRecordWaitsWhenQueueFull(t *testing.T) {
	ctx := context.Background()
	base, _ := openLog(t)
	entered := make(chan struct{}, 100)
	release := make(chan struct{})
	st := appendWrapper{Log: base, append: func(ctx context.Context, es []store.LogEntry) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return base.Append(ctx, es)
	}}
	opts := testOptions(t, nil)
	opts.QueueSize, opts.BatchSize = 4, 4
	r := newRecorder(t, st, opts)
	for i := range 4 {
		if err := r.Record(ctx, sampleEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	<-entered // the writer holds the 4 events, blocked in Append

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := r.Record(short, sampleEvent(99)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Record on a full queue: %v, want a deadline error", err)
	}

	done := make(chan error, 1)
	go func() { done <- r.Record(ctx, sampleEvent(4)) }()
	select {
	case err := <-done:
		t.Fatalf("Record returned %v while the queue was full", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Record still waiting after the writer was released")
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, base); !rep.OK || rep.Checked != 5 {
		t.Fatalf("report %+v", rep)
	}
}

func TestCloseFlushes(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t)
	opts := testOptions(t, nil)
	opts.FlushInterval = time.Hour
	r, err := NewRecorder(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := r.Record(ctx, sampleEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if rep := verify(t, st); rep.Checked != 0 {
		t.Fatalf("written before the interval: %+v", rep)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, st); !rep.OK || rep.Checked != 10 {
		t.Fatalf("report %+v", rep)
	}
	if err := r.Record(ctx, sampleEvent(10)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v", err)
	}
	if err := r.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestFlushInterval(t *testing.T) {
	st, _ := openLog(t)
	opts := testOptions(t, nil)
	opts.FlushInterval = 20 * time.Millisecond
	r := newRecorder(t, st, opts)
	if err := r.Record(context.Background(), sampleEvent(0)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for verify(t, st).Checked != 1 {
		if time.Now().After(deadline) {
			t.Fatal("event not written without Flush")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConcurrentRecord(t *testing.T) {
	st, _ := openLog(t)
	opts := testOptions(t, nil)
	opts.QueueSize, opts.BatchSize = 64, 50
	r := newRecorder(t, st, opts)
	const workers, each = 32, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := r.Record(context.Background(), sampleEvent(w*each+i)); err != nil {
					t.Error(err)
					return
				}
				if i%25 == 0 {
					if err := r.Flush(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, st); !rep.OK || rep.Checked != workers*each || rep.Head != workers*each {
		t.Fatalf("report %+v", rep)
	}
}

func TestWriteFailuresAreRetried(t *testing.T) {
	tests := []struct {
		name string
		// fail decides, per call, how Append misbehaves.
		fail func(call int, ctx context.Context, es []store.LogEntry, base Log) (error, bool)
	}{
		{"log down", func(call int, _ context.Context, _ []store.LogEntry, _ Log) (error, bool) {
			return errors.New("disk full"), call < 3
		}},
		{"append reported as failed", func(call int, ctx context.Context, es []store.LogEntry, base Log) (error, bool) {
			if call == 0 {
				if err := base.Append(ctx, es); err != nil {
					return err, true
				}
				return errors.New("connection lost after commit"), true
			}
			return nil, false
		}},
		{"prefix stored", func(call int, ctx context.Context, es []store.LogEntry, base Log) (error, bool) {
			if call == 0 && len(es) > 1 {
				if err := base.Append(ctx, es[:len(es)/2]); err != nil {
					return err, true
				}
				return errors.New("connection lost midway"), true
			}
			return nil, false
		}},
		{"another writer", func(call int, ctx context.Context, _ []store.LogEntry, base Log) (error, bool) {
			if call == 0 {
				// Another recorder appends first: our seq numbers are taken.
				other, err := NewRecorder(ctx, base, Options{Source: Source{Observer: "other"}})
				if err != nil {
					return err, true
				}
				other.Record(ctx, sampleEvent(1000))
				other.Close(ctx)
			}
			return nil, false
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, _ := openLog(t)
			var calls atomic.Int32
			st := appendWrapper{Log: base, append: func(ctx context.Context, es []store.LogEntry) error {
				if err, ok := tt.fail(int(calls.Add(1))-1, ctx, es, base); ok {
					return err
				}
				return base.Append(ctx, es)
			}}
			log := &syncbuf.Buffer{}
			opts := testOptions(t, log)
			opts.FlushInterval = time.Hour // one batch of 20: the first append fails
			r := newRecorder(t, st, opts)
			recordN(t, r, 0, 20)
			rep := verify(t, base)
			if !rep.OK || rep.Checked < 20 {
				t.Fatalf("report %+v", rep)
			}
			if strings.Contains(log.String(), "user/u") || strings.Contains(log.String(), "Patient/") {
				t.Errorf("event content in the log:\n%s", log)
			}
		})
	}
}

func TestCloseGivesUp(t *testing.T) {
	base, _ := openLog(t)
	st := appendWrapper{Log: base, append: func(context.Context, []store.LogEntry) error {
		return errors.New("log down")
	}}
	log := &syncbuf.Buffer{}
	r, err := NewRecorder(context.Background(), st, testOptions(t, log))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Record(context.Background(), sampleEvent(0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if !strings.Contains(log.String(), "unwritten=1") {
		t.Errorf("log lacks the lost count:\n%s", log)
	}
}

// prefixThenForeign is a log whose first append behaves like MongoDB's
// ordered insert racing another writer: the first two records are stored,
// then another writer appends at the next seq, and the append fails with a
// conflict.
type prefixThenForeign struct {
	Log
	foreign func()
	done    bool
}

func (l *prefixThenForeign) Append(ctx context.Context, entries []store.LogEntry) error {
	if l.done || len(entries) < 3 {
		return l.Log.Append(ctx, entries)
	}
	l.done = true
	if err := l.Log.Append(ctx, entries[:2]); err != nil {
		return err
	}
	l.foreign()
	return fmt.Errorf("seq %d exists: %w", entries[2].Seq, store.ErrConflict)
}

// A batch of which a prefix was stored before another writer's record is
// not written twice: the stored prefix counts as durable, the rest is
// re-chained after the other writer's record, and every event is in the
// chain exactly once.
func TestPartialAppendBesideAnotherWriter(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	w := &prefixThenForeign{Log: l}
	w.foreign = func() {
		other, err := NewRecorder(ctx, l, testOptions(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Record(ctx, sampleEvent(100)); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	opts := testOptions(t, nil)
	opts.FlushInterval = time.Hour // one batch, written by Flush
	r := newRecorder(t, w, opts)
	for i := range 5 {
		if err := r.Record(ctx, sampleEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.done {
		t.Fatal("the racing append never happened")
	}
	rep, err := Verify(ctx, l, nil)
	if err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	es, err := l.Newest(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range es {
		for _, id := range []string{"req-0", "req-1", "req-2", "req-3", "req-4", "req-100"} {
			if bytes.Contains(e.Body, []byte(`"`+id+`"`)) {
				seen[id]++
			}
		}
	}
	if len(es) != 6 || len(seen) != 6 {
		t.Errorf("%d records, events seen %v; want each of the 6 events once", len(es), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s recorded %d times", id, n)
		}
	}
}
