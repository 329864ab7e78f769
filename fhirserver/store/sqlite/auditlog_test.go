package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

func openTempLog(t testing.TB, path string) *Log {
	t.Helper()
	l, err := OpenLog(context.Background(), path)
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func logEntries(from, to int64) []store.LogEntry {
	var es []store.LogEntry
	for s := from; s <= to; s++ {
		es = append(es, store.LogEntry{Seq: s, Time: ts(int(s)).Add(123 * time.Microsecond), Body: fmt.Appendf(nil, `{"n":%d}`, s)})
	}
	return es
}

// seqs lists the entries' seqs, and checks their times and bodies.
func seqs(t *testing.T, es []store.LogEntry) []int64 {
	t.Helper()
	out := []int64{}
	for _, e := range es {
		if want := ts(int(e.Seq)).Add(123 * time.Microsecond); !e.Time.Equal(want) || e.Time.Location() != time.UTC {
			t.Errorf("entry %d: time %v, want %v UTC", e.Seq, e.Time, want)
		}
		if string(e.Body) != fmt.Sprintf(`{"n":%d}`, e.Seq) {
			t.Errorf("entry %d: body %s", e.Seq, e.Body)
		}
		out = append(out, e.Seq)
	}
	return out
}

func TestLogAppendNewestDelete(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l := openTempLog(t, path)
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
		if got := fmt.Sprint(seqs(t, es)); got != tc.want {
			t.Errorf("Newest(%d, %d) = %s, want %s", tc.before, tc.n, got, tc.want)
		}
	}

	// A seq already present: the whole append is refused.
	err := l.Append(ctx, logEntries(7, 8))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append over seq 7: %v, want ErrConflict", err)
	}
	if es, _ := l.Newest(ctx, 0, 1); len(es) != 1 || es[0].Seq != 7 {
		t.Errorf("after the refused append the newest is %v, want 7", seqs(t, es))
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
		if got := fmt.Sprint(seqs(t, es)); got != tc.left {
			t.Errorf("after DeleteThrough(%d, %d): %s, want %s", tc.seq, tc.limit, got, tc.left)
		}
	}

	// Reopened, the log continues.
	if err := l.Append(ctx, logEntries(8, 9)); err != nil {
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
	l2 := openTempLog(t, path)
	if es, err := l2.Newest(ctx, 0, 10); err != nil || fmt.Sprint(seqs(t, es)) != "[9 8]" {
		t.Errorf("reopened: %v %v", es, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("file mode %v, want 0600", perm)
	}
}

// TestLogImportsAnEarlierAuditStore: an audit.db written by earlier
// builds (a store whose AuditEvents are the chain) gets the log table,
// holding those records, and nothing else changes.
func TestLogImportsAnEarlierAuditStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	st := openTemp(t, path)
	for seq := 1; seq <= 3; seq++ {
		id := fmt.Sprintf("ae-%012d", seq)
		if err := st.Put(ctx, store.Write{Type: "AuditEvent", ID: id, Version: 1, LastUpdated: ts(seq), Method: store.MethodCreate,
			Body: fmt.Appendf(nil, `{"resourceType":"AuditEvent","id":%q}`, id)}); err != nil {
			t.Fatal(err)
		}
	}
	// A second version (tampering, in the old model) is not the chain's.
	if err := st.Put(ctx, store.Write{Type: "AuditEvent", ID: "ae-000000000002", Version: 2, LastUpdated: ts(9), Method: store.MethodUpdate,
		Body: []byte(`{"resourceType":"AuditEvent","id":"ae-000000000002","v":2}`)}); err != nil {
		t.Fatal(err)
	}
	put(t, st, "Patient", "ae-000000000007", 1, ts(4))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	l := openTempLog(t, path)
	es, err := l.Newest(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%d@%d:%s", e.Seq, e.Time.Unix()-ts(0).Unix(), e.Body))
	}
	want := `[3@3:{"resourceType":"AuditEvent","id":"ae-000000000003"} 2@2:{"resourceType":"AuditEvent","id":"ae-000000000002"} 1@1:{"resourceType":"AuditEvent","id":"ae-000000000001"}]`
	if fmt.Sprint(got) != want {
		t.Errorf("imported %s,\nwant %s", got, want)
	}
	if err := l.Append(ctx, []store.LogEntry{{Seq: 4, Time: ts(4), Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	// Only once: reopening does not import again, and the store still opens.
	l = openTempLog(t, path)
	if es, _ := l.Newest(ctx, 0, 10); len(es) != 4 {
		t.Errorf("after reopening: %d entries, want 4", len(es))
	}
	l.Close()
	st = openTemp(t, path)
	defer st.Close()
	if _, err := st.Read(ctx, "AuditEvent", "ae-000000000001"); err != nil {
		t.Errorf("the old records are gone: %v", err)
	}
}

func TestLogRefusesForeignDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open(driverName, dsn(path, writerRole, defaultSynchronous))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if l, err := OpenLog(context.Background(), path); err == nil {
		l.Close()
		t.Fatal("OpenLog accepted another application's database")
	}
}

// BenchmarkLogAppend measures appends of batches of 100 entries of the
// size of an audit record.
func BenchmarkLogAppend(b *testing.B) {
	ctx := context.Background()
	l := openTempLog(b, filepath.Join(b.TempDir(), "audit.db"))
	body := make([]byte, 1200)
	const batch = 100
	es := make([]store.LogEntry, batch)
	seq := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		for i := range es {
			seq++
			es[i] = store.LogEntry{Seq: seq, Time: time.Now(), Body: body}
		}
		if err := l.Append(ctx, es); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "entries/s")
}
