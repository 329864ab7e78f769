package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	kmongo "github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
)

// openLog opens a log on a new database at MONGODB_URI, dropped when the
// test ends.
func openLog(t *testing.T) (*kmongo.Log, kmongo.Config) {
	t.Helper()
	cfg := kmongo.Config{URI: mongotest.URI(t), Database: mongotest.NewName()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := kmongo.OpenLog(ctx, cfg)
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	t.Cleanup(func() {
		l.Close()
		mongotest.Drop(t, cfg.Database)
	})
	return l, cfg
}

var logT0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func logEntries(from, to int64) []store.LogEntry {
	var es []store.LogEntry
	for s := from; s <= to; s++ {
		es = append(es, store.LogEntry{Seq: s, Time: logT0.Add(time.Duration(s) * time.Second), Body: fmt.Appendf(nil, `{"n":%d}`, s)})
	}
	return es
}

// logSeqs lists the entries' seqs, and checks their times (milliseconds
// kept) and bodies.
func logSeqs(t *testing.T, es []store.LogEntry) string {
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

func TestLogAppendNewestDelete(t *testing.T) {
	ctx := context.Background()
	l, cfg := openLog(t)
	if es, err := l.Newest(ctx, 0, 10); err != nil || len(es) != 0 {
		t.Fatalf("empty log: %v %v", es, err)
	}
	if err := l.Append(ctx, logEntries(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, logEntries(6, 7)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, nil); err != nil {
		t.Fatal(err)
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
		if got := logSeqs(t, es); got != tc.want {
			t.Errorf("Newest(%d, %d) = %s, want %s", tc.before, tc.n, got, tc.want)
		}
	}

	// A seq already present: ErrConflict; the entries before it (none
	// here) may be stored, those after it are not.
	if err := l.Append(ctx, logEntries(7, 8)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append over seq 7: %v, want ErrConflict", err)
	}
	if es, _ := l.Newest(ctx, 0, 1); logSeqs(t, es) != "[7]" {
		t.Errorf("after the refused append the newest is %s, want 7", logSeqs(t, es))
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
		if got := logSeqs(t, es); got != tc.left {
			t.Errorf("after DeleteThrough(%d, %d): %s, want %s", tc.seq, tc.limit, got, tc.left)
		}
	}

	// Another connection sees the same log.
	if err := l.Append(ctx, logEntries(8, 9)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	l2, err := kmongo.OpenLog(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if es, err := l2.Newest(ctx, 0, 10); err != nil || logSeqs(t, es) != "[9 8]" {
		t.Errorf("reopened: %v %v", es, err)
	}
}

func TestLogConfig(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []kmongo.Config{
		{URI: "", Database: "x"},
		{URI: "mongodb://127.0.0.1:1/", Database: ""},
		{URI: "mongodb://127.0.0.1:1/", Database: "x", WriteConcern: "some"},
	} {
		if l, err := kmongo.OpenLog(ctx, cfg); err == nil {
			l.Close()
			t.Errorf("OpenLog(%+v) succeeded", cfg)
		}
	}
}

// TestLogCarriesTheAuditChain runs the audit recorder, Verify and Purge on
// the log.
func TestLogCarriesTheAuditChain(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	var clock atomic.Int64 // unix seconds
	clock.Store(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	now := func() time.Time { return time.Unix(clock.Load(), 0).UTC() }
	rec, err := audit.NewRecorder(ctx, l, audit.Options{BatchSize: 7, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	for i := range 30 {
		if i == 20 {
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			clock.Add(3600)
		}
		if err := rec.Record(ctx, audit.Event{Subtype: audit.SubtypeRead, Status: 200, Entity: audit.Entity{What: fmt.Sprintf("Patient/%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(ctx, l, nil); err != nil || !rep.OK || rep.Checked != 30 || rep.Head != 30 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	n, err := audit.Purge(ctx, rec, l, now().Add(-time.Minute))
	if err != nil || n != 20 {
		t.Fatalf("Purge: %d, %v; want 20", n, err)
	}
	if rep, err := audit.Verify(ctx, l, nil); err != nil || !rep.OK || rep.Checked != 11 || rep.Head != 31 {
		t.Fatalf("Verify after the purge: %+v, %v", rep, err)
	}
}
