package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Log is an append-only log as the audit partition uses it (see
// audit.Log), with Close.
type Log interface {
	Append(ctx context.Context, entries []store.LogEntry) error
	Newest(ctx context.Context, before int64, n int) ([]store.LogEntry, error)
	DeleteThrough(ctx context.Context, seq int64, limit int) (int, error)
	Close() error
}

// RunLog is the contract of a log backend. open returns a log over fresh
// storage the first time, and the same storage again on every later call
// (a reopened file, another connection to the same database).
func RunLog(t *testing.T, open func(t *testing.T) Log) {
	ctx := context.Background()
	l := open(t)
	if es, err := l.Newest(ctx, 0, 10); err != nil || len(es) != 0 {
		t.Fatalf("empty log: %v %v", es, err)
	}
	for _, batch := range [][]store.LogEntry{LogEntries(1, 5), LogEntries(6, 7), nil} {
		if err := l.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		before int64
		n      int
		want   string
	}{
		{0, 3, "[7 6 5]"}, {-1, 100, "[7 6 5 4 3 2 1]"}, {5, 2, "[4 3]"}, {2, 5, "[1]"}, {1, 5, "[]"}, {100, 1, "[7]"}, {0, 0, "[]"},
	} {
		es, err := l.Newest(ctx, tc.before, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := LogSeqs(t, es); got != tc.want {
			t.Errorf("Newest(%d, %d) = %s, want %s", tc.before, tc.n, got, tc.want)
		}
	}

	// A seq already present: ErrConflict, and nothing from it on is
	// stored (the entries before it may be).
	if err := l.Append(ctx, LogEntries(7, 8)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append over seq 7: %v, want ErrConflict", err)
	}
	if es, _ := l.Newest(ctx, 0, 1); LogSeqs(t, es) != "[7]" {
		t.Errorf("after the refused append the newest is %s, want 7", LogSeqs(t, es))
	}

	// DeleteThrough: oldest first, bounded.
	for _, tc := range []struct {
		seq   int64
		limit int
		n     int
		left  string
	}{
		{4, 2, 2, "[7 6 5 4 3]"}, {4, 5, 2, "[7 6 5]"}, {4, 5, 0, "[7 6 5]"}, {6, 0, 0, "[7 6 5]"}, {100, 100, 3, "[]"},
	} {
		n, err := l.DeleteThrough(ctx, tc.seq, tc.limit)
		if err != nil || n != tc.n {
			t.Errorf("DeleteThrough(%d, %d) = %d, %v; want %d", tc.seq, tc.limit, n, err, tc.n)
		}
		es, _ := l.Newest(ctx, 0, 100)
		if got := LogSeqs(t, es); got != tc.left {
			t.Errorf("after DeleteThrough(%d, %d): %s, want %s", tc.seq, tc.limit, got, tc.left)
		}
	}

	// Closed and opened again, the log continues.
	if err := l.Append(ctx, LogEntries(8, 9)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := l.Newest(ctx, 0, 1); err == nil {
		t.Error("Newest after Close succeeded")
	}
	l2 := open(t)
	if es, err := l2.Newest(ctx, 0, 10); err != nil || LogSeqs(t, es) != "[9 8]" {
		t.Errorf("reopened: %v %v", es, err)
	}
}

var logT0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// LogEntries are entries from..to, each with a time and body derived
// from its seq (which LogSeqs checks).
func LogEntries(from, to int64) []store.LogEntry {
	var es []store.LogEntry
	for s := from; s <= to; s++ {
		es = append(es, store.LogEntry{Seq: s, Time: logT0.Add(time.Duration(s) * time.Second), Body: fmt.Appendf(nil, `{"n":%d}`, s)})
	}
	return es
}

// LogSeqs lists the entries' seqs, and checks their times (UTC, whole
// seconds kept) and bodies.
func LogSeqs(t *testing.T, es []store.LogEntry) string {
	t.Helper()
	out := []int64{}
	for _, e := range es {
		if want := logT0.Add(time.Duration(e.Seq) * time.Second); !e.Time.Equal(want) || e.Time.Location() != time.UTC {
			t.Errorf("entry %d: time %v, want %v UTC", e.Seq, e.Time, want)
		}
		if string(e.Body) != fmt.Sprintf(`{"n":%d}`, e.Seq) {
			t.Errorf("entry %d: body %s", e.Seq, e.Body)
		}
		out = append(out, e.Seq)
	}
	return fmt.Sprint(out)
}
