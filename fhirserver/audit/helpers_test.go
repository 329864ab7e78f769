package audit

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
	"github.com/kiln-fhir/kiln/internal/syncbuf"
)

// openLog opens a log in a new SQLite file; path is the file, for tests
// that tamper with it through SQL (see execSQL).
func openLog(t testing.TB) (*sqlite.Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := sqlite.OpenLog(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

// execSQL runs a statement on the database file at path through a
// connection of its own, as someone with write access to the file could
// (the sqlite package registers the driver "sqlite3").
func execSQL(t testing.TB, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.ToSlash(path)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s: %d rows affected, want 1", query, n)
	}
}

// bodyOf returns the stored body of record seq.
func bodyOf(t testing.TB, l Log, seq int64) []byte {
	t.Helper()
	es, err := l.Newest(context.Background(), seq+1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) == 0 || es[0].Seq != seq {
		t.Fatalf("record %d not found: %v", seq, es)
	}
	return es[0].Body
}

// sampleEvent is event i of a test: a read of Patient/i by user/u<i%7>.
func sampleEvent(i int) Event {
	return Event{
		Time:      time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC),
		Subtype:   SubtypeRead,
		Status:    200,
		Agent:     Agent{Who: fmt.Sprintf("user/u%d", i%7), Role: "provider", Address: "192.0.2.10"},
		Entity:    Entity{What: fmt.Sprintf("Patient/%d", i)},
		RequestID: fmt.Sprintf("req-%d", i),
	}
}

func testOptions(t testing.TB, log *syncbuf.Buffer) Options {
	var w interface{ Write([]byte) (int, error) } = testWriter{t}
	if log != nil {
		w = log
	}
	return Options{
		FlushInterval: 10 * time.Millisecond,
		Source:        Source{Observer: "kiln", Site: "test"},
		Logger:        slog.New(slog.NewTextHandler(w, nil)),
		RetryMin:      time.Millisecond,
		RetryMax:      20 * time.Millisecond,
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimSpace(p)))
	return len(p), nil
}

// newRecorder starts a recorder and closes it at the end of the test.
func newRecorder(t testing.TB, l Log, opts Options) *Recorder {
	t.Helper()
	r, err := NewRecorder(context.Background(), l, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func recordN(t testing.TB, r *Recorder, from, n int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		if err := r.Record(ctx, sampleEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func verify(t testing.TB, l Log) Report {
	t.Helper()
	rep, err := Verify(context.Background(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// readWrapper rewrites what Newest returns: tampering seen through the
// log's API, as if done on the file.
type readWrapper struct {
	Log
	edit func(e store.LogEntry) (store.LogEntry, bool) // false: drop
}

func (w readWrapper) Newest(ctx context.Context, before int64, n int) ([]store.LogEntry, error) {
	page, err := w.Log.Newest(ctx, before, n)
	if err != nil {
		return nil, err
	}
	out := page[:0:0]
	for _, e := range page {
		if e, ok := w.edit(e); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// appendWrapper intercepts Append.
type appendWrapper struct {
	Log
	append func(ctx context.Context, entries []store.LogEntry) error
}

func (w appendWrapper) Append(ctx context.Context, entries []store.LogEntry) error {
	return w.append(ctx, entries)
}
