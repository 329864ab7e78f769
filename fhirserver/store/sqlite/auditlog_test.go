package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
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

// TestLogContract runs the log contract on a file, reopened in place,
// which stays private.
func TestLogContract(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	storetest.RunLog(t, func(t *testing.T) storetest.Log { return openTempLog(t, path) })
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
