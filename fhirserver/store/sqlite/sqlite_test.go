package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunWith(t, func(t *testing.T) store.Store {
		return openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	}, suiteOptions)
}

// suiteOptions reopen a store as another Store on the same file: another
// process, or a restart.
var suiteOptions = storetest.Options{
	Reopen: func(t *testing.T, s store.Store) store.Store { return openTemp(t, s.(*Store).path) },
}

// openTemp opens path; the caller (or the suite) closes the store.
func openTemp(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func ts(sec int) time.Time { return time.Date(2024, 1, 1, 0, 0, sec, 0, time.UTC) }

func put(t testing.TB, s store.Writer, typ, id string, version int64, lu time.Time) store.Write {
	t.Helper()
	w := store.Write{Type: typ, ID: id, Version: version, LastUpdated: lu, Method: store.MethodUpdate,
		Body: fmt.Appendf(nil, `{"resourceType":%q,"id":%q,"meta":{"versionId":"%d"}}`, typ, id, version)}
	if err := s.Put(context.Background(), w); err != nil {
		t.Fatalf("Put %s/%s v%d: %v", typ, id, version, err)
	}
	return w
}

// TestOpenCreatesPrivateFolder: a missing parent folder is created 0700,
// since the database holds health data.
func TestOpenCreatesPrivateFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := openTemp(t, filepath.Join(dir, "kiln.db"))
	defer s.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Fatalf("folder mode %v, want 0700", perm)
	}
	fi, err = os.Stat(filepath.Join(dir, "kiln.db"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("database file mode %v, want 0600", perm)
	}
}

// TestSubMicrosecondBounds: LastUpdated is kept in whole microseconds, and
// history bounds finer than that still compare exactly against it.
func TestSubMicrosecondBounds(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 5_000, time.UTC) // 5 µs
	put(t, s, "Patient", "a", 1, t0.Add(-time.Second))
	put(t, s, "Patient", "a", 2, t0)
	half := 500 * time.Nanosecond
	for _, c := range []struct {
		q    store.HistoryQuery
		want []int64
	}{
		{store.HistoryQuery{Since: t0.Add(-half)}, []int64{2}},
		{store.HistoryQuery{Since: t0.Add(half)}, nil},
		{store.HistoryQuery{AtHigh: t0.Add(half)}, []int64{2, 1}},
		{store.HistoryQuery{AtHigh: t0}, []int64{1}},
		{store.HistoryQuery{AtLow: t0.Add(-half), AtHigh: t0.Add(-half / 2)}, []int64{1}},
		{store.HistoryQuery{AtLow: t0.Add(half), AtHigh: t0.Add(2 * half)}, []int64{2}},
	} {
		c.q.Type, c.q.ID, c.q.Count = "Patient", "a", 10
		page, err := s.History(t.Context(), c.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, v := range page.Versions {
			got = append(got, v.Version)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%+v: versions %v, want %v", c.q, got, c.want)
		}
	}
	v, err := s.VRead(t.Context(), "Patient", "a", 2)
	if err != nil || !v.LastUpdated.Equal(t0) {
		t.Fatalf("VRead: %v, %v; want LastUpdated %v", v, err, t0)
	}
}

// TestTransactPanicRollsBack: a panic in fn rolls the transaction back and
// leaves the writer usable.
func TestTransactPanicRollsBack(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		s.Transact(t.Context(), func(tx store.Tx) error {
			put(t, tx, "Patient", "a", 1, ts(1))
			panic("boom")
		})
	}()
	if _, err := s.Read(t.Context(), "Patient", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read after a panicking Transact: %v, want ErrNotFound", err)
	}
	put(t, s, "Patient", "a", 1, ts(2))
}

// TestCreateConflictLeavesNothing: a create of a resource that exists is
// ErrConflict without a read first (put inserts and lets uniqueness
// refuse), and a caller that goes on and commits keeps no trace of it:
// the resource still has its one version, with its body.
func TestCreateConflictLeavesNothing(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	put(t, s, "Patient", "a", 1, ts(1))
	err := s.Transact(t.Context(), func(tx store.Tx) error {
		w := store.Write{Type: "Patient", ID: "a", Version: 1, LastUpdated: ts(2), Method: store.MethodCreate, Body: []byte(`{"resourceType":"Patient","id":"a","gender":"male"}`)}
		if err := tx.Put(t.Context(), w); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "current version is 1") {
			t.Errorf("create over an existing resource: %v, want ErrConflict naming version 1", err)
		}
		put(t, tx, "Patient", "b", 1, ts(3))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.History(t.Context(), store.HistoryQuery{Type: "Patient", ID: "a", Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Versions) != 1 || page.Versions[0].Version != 1 || strings.Contains(string(page.Versions[0].Body), "male") {
		t.Fatalf("history of Patient/a after the refused create: %+v", page.Versions)
	}
	if _, err := s.Read(t.Context(), "Patient", "b"); err != nil {
		t.Fatalf("the write after the conflict: %v", err)
	}
}

// TestTxCallAfterCancelledContext: a call whose context is done fails
// alone; the transaction's later calls, with live contexts, still work
// (statements are bound to the transaction once, not under that context).
func TestTxCallAfterCancelledContext(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	err := s.Transact(t.Context(), func(tx store.Tx) error {
		done, cancel := context.WithCancel(t.Context())
		cancel()
		w := store.Write{Type: "Patient", ID: "a", Version: 1, LastUpdated: ts(1), Method: store.MethodCreate, Body: []byte(`{"resourceType":"Patient","id":"a"}`)}
		if err := tx.Put(done, w); !errors.Is(err, context.Canceled) {
			t.Errorf("Put under a cancelled context: %v, want context.Canceled", err)
		}
		if _, err := tx.Read(done, "Patient", "a"); !errors.Is(err, context.Canceled) {
			t.Errorf("Read under a cancelled context: %v, want context.Canceled", err)
		}
		if err := tx.Put(t.Context(), w); err != nil {
			t.Errorf("Put after the cancelled one: %v", err)
		}
		if _, err := tx.Read(t.Context(), "Patient", "a"); err != nil {
			t.Errorf("Read after the cancelled one: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTxSharedByGoroutines: goroutines sharing one Tx (reads, and writes
// with several range rows) each get their own answers: the Tx serialises
// them on its one connection.
func TestTxSharedByGoroutines(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for i := range 10 {
		put(t, s, "Patient", fmt.Sprint("p", i), 1, ts(1))
	}
	err := s.Transact(t.Context(), func(tx store.Tx) error {
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for g := range 4 {
			wg.Go(func() {
				for i := range 50 {
					id := fmt.Sprint("p", (i+g)%10)
					v, err := tx.Read(t.Context(), "Patient", id)
					if err != nil || v.ID != id || !strings.Contains(string(v.Body), `"`+id+`"`) {
						errs <- fmt.Errorf("goroutine %d: Read %s: %v %v", g, id, v, err)
						return
					}
					if g == 0 && i < 20 {
						nid := fmt.Sprint("n", i)
						w := store.Write{Type: "Patient", ID: nid, Version: 1, LastUpdated: ts(2), Method: store.MethodCreate,
							Body:  fmt.Appendf(nil, `{"resourceType":"Patient","id":%q}`, nid),
							Index: &search.Rows{Keys: []string{"k\x1f" + nid}, Dates: []search.DateRow{{Param: "d", Low: 1, High: 2}, {Param: "d", Low: 3, High: 4}, {Param: "d", Low: 5, High: 6}, {Param: "d", Low: 7, High: 8}, {Param: "d", Low: 9, High: 10}}}}
						if err := tx.Put(t.Context(), w); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.writer.QueryRowContext(t.Context(), `SELECT count(*) FROM search_dates`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("date rows: %d %v, want 100 (20 resources × 5)", n, err)
	}
}

// TestReopenKeepsEverything: versions, pointers, tombstones and the schema
// version survive Close and Open.
func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s := openTemp(t, path)
	var writes []store.Write
	for i := range 20 {
		id := fmt.Sprintf("p%d", i%5)
		writes = append(writes, put(t, s, "Patient", id, int64(i/5+1), ts(i)))
	}
	del := store.Write{Type: "Patient", ID: "p0", Version: 5, LastUpdated: ts(30), Method: store.MethodDelete, Deleted: true}
	if err := s.Put(t.Context(), del); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Errorf("WAL file left after Close: %v", err)
	}

	s = openTemp(t, path)
	defer s.Close()
	for _, w := range writes {
		v, err := s.VRead(t.Context(), w.Type, w.ID, w.Version)
		if err != nil || string(v.Body) != string(w.Body) || !v.LastUpdated.Equal(w.LastUpdated) {
			t.Fatalf("VRead %s/%s v%d after reopen: %+v, %v", w.Type, w.ID, w.Version, v, err)
		}
	}
	if v, err := s.Read(t.Context(), "Patient", "p0"); err != nil || !v.Deleted || v.Version != 5 {
		t.Fatalf("Read Patient/p0 after reopen: %+v, %v; want the tombstone v5", v, err)
	}
	if v, err := s.Read(t.Context(), "Patient", "p3"); err != nil || v.Version != 4 {
		t.Fatalf("Read Patient/p3 after reopen: %+v, %v; want v4", v, err)
	}
	page, err := s.History(t.Context(), store.HistoryQuery{Count: 100})
	if err != nil || len(page.Versions) != 21 {
		t.Fatalf("system history after reopen: %d versions, %v; want 21", len(page.Versions), err)
	}
	put(t, s, "Patient", "p0", 6, ts(40)) // writes continue where they were
	checkConsistent(t, s)
}

// TestSchemaVersion: Open records the schema version, reopening is a no-op,
// and a database from a newer build is refused rather than misread.
func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s := openTemp(t, path)
	var v, app int
	if err := s.reader.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion() {
		t.Fatalf("user_version %d (%v), want %d", v, err, schemaVersion())
	}
	if err := s.reader.QueryRow(`PRAGMA application_id`).Scan(&app); err != nil || app != applicationID {
		t.Fatalf("application_id %#x (%v), want %#x", app, err, applicationID)
	}
	if _, err := s.writer.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(t.Context(), path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want an error saying it is newer", err)
	}
}

// TestRefusesForeignDatabase: Open does not add its tables to some other
// application's SQLite file.
func TestRefusesForeignDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open(driverName, dsn(path, writerRole, defaultSynchronous))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE unrelated (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("Open of a foreign database succeeded")
	}
}

// TestPragmas: the connection settings the durability and concurrency
// arguments rest on are in force on both pools.
func TestPragmas(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for _, c := range []struct {
		db     *sql.DB
		pragma string
		want   string
	}{
		{s.writer, "journal_mode", "wal"},
		{s.writer, "synchronous", "2"}, // FULL
		{s.writer, "foreign_keys", "1"},
		{s.writer, "busy_timeout", fmt.Sprint(busyTimeoutMS)},
		{s.writer, "query_only", "0"},
		{s.reader, "journal_mode", "wal"},
		{s.reader, "foreign_keys", "1"},
		{s.reader, "busy_timeout", fmt.Sprint(busyTimeoutMS)},
		{s.reader, "query_only", "1"},
	} {
		var got string
		if err := c.db.QueryRow("PRAGMA " + c.pragma).Scan(&got); err != nil || got != c.want {
			t.Errorf("PRAGMA %s = %q (%v), want %q", c.pragma, got, err, c.want)
		}
	}
	// BEGIN IMMEDIATE: a writer transaction holds the write lock from the
	// start, so a second connection cannot even begin one.
	tx, err := s.writer.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sql.Open(driverName, dsn(s.path, readerRole, defaultSynchronous))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	if _, err := other.Exec(`PRAGMA busy_timeout = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(`BEGIN IMMEDIATE`); err == nil {
		t.Fatal("a second writer began while the store's transaction was open: _txlock=immediate not in force")
	}
}

// TestQueryPlans: Read is a unique-index lookup plus a rowid lookup, and no
// history page scans a table or sorts (the rows come in index order); the
// _at filter is one unique-index lookup per row.
func TestQueryPlans(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	plan := func(query string) string {
		return strings.Join(explain(t, s.reader, query, make([]any, strings.Count(query, "?"))...), "\n")
	}
	read := plan(readSQL)
	if !strings.Contains(read, "USING INDEX sqlite_autoindex_resources_1 (type=? AND id=?)") || !strings.Contains(read, "USING INTEGER PRIMARY KEY") || strings.Contains(read, "SCAN") {
		t.Errorf("Read plan:\n%s", read)
	}
	for l := range numLevels {
		for _, at := range []bool{false, true} {
			p := plan(historySQL(l, at))
			if strings.Contains(p, "SCAN") || strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("history level %d at=%v scans or sorts:\n%s", l, at, p)
			}
			// The _at subquery finds the next version by the UNIQUE (type,
			// id, version) index, not by a range (e.g. of the snapshot's
			// seq bound).
			if at && !strings.Contains(p, "SEARCH n USING INDEX sqlite_autoindex_resource_versions_1 (type=? AND id=? AND version=?)") {
				t.Errorf("history level %d at=%v: the next version is not an index lookup:\n%s", l, at, p)
			}
		}
	}
}

// TestCancelledMatchesContextError: an interrupted call reports ctx.Err()
// through errors.Is, not only SQLite's INTERRUPT.
func TestCancelledMatchesContextError(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	put(t, s, "Patient", "a", 1, ts(1))
	dead, cancel := context.WithCancel(t.Context())
	cancel()
	errs := map[string]error{
		"Read": func() error { _, err := s.Read(dead, "Patient", "a"); return err }(),
		"Put":  s.Put(dead, store.Write{Type: "Patient", ID: "a", Version: 2, LastUpdated: ts(2), Method: store.MethodUpdate, Body: []byte(`{}`)}),
		"Ping": s.Ping(dead),
		"History": func() error {
			_, err := s.History(dead, store.HistoryQuery{Count: 1})
			return err
		}(),
	}
	for name, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}
}

// TestPutWaitsForTransactBounded: a Put queued behind an open Transact (the
// single writer connection) gives up when its context ends.
func TestPutWaitsForTransactBounded(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	err := s.Transact(t.Context(), func(tx store.Tx) error {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := s.Put(ctx, store.Write{Type: "Patient", ID: "a", Version: 1, LastUpdated: ts(1), Method: store.MethodCreate, Body: []byte(`{}`)})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Errorf("Put behind a Transact: %v after %v, want DeadlineExceeded after ~100ms", err, time.Since(start))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInvalidWrites: writes the contract rules out are errors, and none of
// them is mistaken for a conflict.
func TestInvalidWrites(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	ok := store.Write{Type: "Patient", ID: "a", Version: 1, LastUpdated: ts(1), Method: store.MethodCreate, Body: []byte(`{}`)}
	for name, mutate := range map[string]func(*store.Write){
		"no type":           func(w *store.Write) { w.Type = "" },
		"no id":             func(w *store.Write) { w.ID = "" },
		"version 0":         func(w *store.Write) { w.Version = 0 },
		"no time":           func(w *store.Write) { w.LastUpdated = time.Time{} },
		"no body":           func(w *store.Write) { w.Body = nil },
		"tombstone body":    func(w *store.Write) { w.Deleted = true },
		"year out of range": func(w *store.Write) { w.LastUpdated = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		w := ok
		mutate(&w)
		if err := s.Put(t.Context(), w); err == nil || errors.Is(err, store.ErrConflict) {
			t.Errorf("%s: Put returned %v, want a validation error", name, err)
		}
	}
	if _, err := s.Read(t.Context(), "Patient", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invalid write landed: %v", err)
	}
	for _, q := range []store.HistoryQuery{{Count: 0}, {ID: "a", Count: 1}, {Count: 1, MaxBytes: -1}} {
		if _, err := s.History(t.Context(), q); err == nil {
			t.Errorf("History %+v: no error", q)
		}
	}
}

// TestHistorySnapshot: a history started before a write never shows that
// write, even when it is stamped inside the pages still to come (the cursor
// carries the snapshot's highest seq).
func TestHistorySnapshot(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for i := range 4 {
		put(t, s, "Patient", fmt.Sprintf("p%d", i), 1, ts(10*(i+1)))
	}
	q := store.HistoryQuery{Count: 2}
	page, err := s.History(t.Context(), q)
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	put(t, s, "Patient", "late", 1, ts(1)) // older than every version
	q.Cursor = page.Next
	page, err = s.History(t.Context(), q)
	if err != nil || len(page.Versions) != 2 || page.Next != "" || page.Versions[1].ID != "p0" {
		t.Fatalf("second page: %+v, %v; want p1, p0 and the end", page, err)
	}
}

// TestCursorBoundToQuery: a cursor is only valid for the filter it was issued
// for; replaying it elsewhere is ErrBadCursor, not a silently wrong page.
func TestCursorBoundToQuery(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for i := range 3 {
		put(t, s, "Patient", "a", int64(i+1), ts(i))
	}
	page, err := s.History(t.Context(), store.HistoryQuery{Type: "Patient", Count: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	for _, q := range []store.HistoryQuery{
		{Count: 1},
		{Type: "Observation", Count: 1},
		{Type: "Patient", ID: "a", Count: 1},
		{Type: "Patient", Since: ts(1), Count: 1},
		{Type: "Patient", AtLow: ts(1), AtHigh: ts(2), Count: 1},
	} {
		q.Cursor = page.Next
		if _, err := s.History(t.Context(), q); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor replayed on %+v: %v, want ErrBadCursor", q, err)
		}
	}
	// A different page size is fine.
	if _, err := s.History(t.Context(), store.HistoryQuery{Type: "Patient", Count: 5, Cursor: page.Next}); err != nil {
		t.Errorf("cursor with another Count: %v", err)
	}
}

// explain returns the detail lines of SQLite's plan for query.
func explain(t testing.TB, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return lines
}

// checkConsistent verifies the invariants a crash must not break: SQLite's
// own integrity check, versions 1..n without gaps per resource, and a pointer
// for every resource that names its highest version.
func checkConsistent(t testing.TB, s *Store) {
	t.Helper()
	var ok string
	if err := s.reader.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
	rows, err := s.reader.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Errorf("foreign_key_check reports violations")
	}
	rows.Close()
	var bad int
	err = s.reader.QueryRow(`
		SELECT count(*) FROM (
			SELECT type, id, count(*) AS n, min(version) AS lo, max(version) AS hi
			FROM resource_versions GROUP BY type, id
		) AS g
		LEFT JOIN resources AS r ON r.type = g.type AND r.id = g.id
		LEFT JOIN resource_versions AS v ON v.seq = r.seq
		WHERE g.lo != 1 OR g.hi != g.n OR r.version IS NULL OR r.version != g.hi
			OR v.version != r.version OR v.type != r.type OR v.id != r.id
			OR v.deleted != r.deleted OR v.last_updated != r.last_updated`).Scan(&bad)
	if err != nil || bad != 0 {
		t.Fatalf("%d resources with gaps or a stale pointer (%v)", bad, err)
	}
	var orphans int
	err = s.reader.QueryRow(`SELECT count(*) FROM resources AS r WHERE NOT EXISTS
		(SELECT 1 FROM resource_versions AS v WHERE v.type = r.type AND v.id = r.id)`).Scan(&orphans)
	if err != nil || orphans != 0 {
		t.Fatalf("%d pointers without versions (%v)", orphans, err)
	}
	// Index rows belong to live resources only, and carry their type.
	for _, table := range []string{"search_keys", "search_dates", "search_numbers"} {
		err = s.reader.QueryRow(`SELECT count(*) FROM ` + table + ` AS x LEFT JOIN resources AS r ON r.rid = x.rid
			WHERE r.rid IS NULL OR r.deleted = 1 OR r.type != x.type`).Scan(&orphans)
		if err != nil || orphans != 0 {
			t.Fatalf("%d rows of %s without a live resource (%v)", orphans, table, err)
		}
	}
	err = s.reader.QueryRow(`SELECT count(*) FROM search_sort_values AS x LEFT JOIN resources AS r ON r.rid = x.rid
		WHERE r.rid IS NULL OR r.deleted = 1`).Scan(&orphans)
	if err != nil || orphans != 0 {
		t.Fatalf("%d sort values without a live resource (%v)", orphans, err)
	}
	// Where the rows name a version (the crash test writes them so), it is
	// the current one.
	err = s.reader.QueryRow(`SELECT count(*) FROM search_sort_values AS x JOIN resources AS r ON r.rid = x.rid
		WHERE json_extract(x.vals, '$.v[0]') != r.version`).Scan(&orphans)
	if err != nil || orphans != 0 {
		t.Fatalf("%d resources with rows of another version (%v)", orphans, err)
	}
}

// TestPathNeedsEscaping: the DSN is a URI, so characters with a meaning there
// (space, ?, #, %) must still name the file they spell.
func TestPathNeedsEscaping(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%20e")
	path := filepath.Join(dir, "k?#%.db")
	s := openTemp(t, path)
	put(t, s, "Patient", "a", 1, ts(1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at %q: %v", path, err)
	}
	s = openTemp(t, path)
	defer s.Close()
	if _, err := s.Read(t.Context(), "Patient", "a"); err != nil {
		t.Fatalf("Read after reopen: %v", err)
	}
}

// The writer checkpoints the WAL only past writerCheckpointPages (fewer,
// larger checkpoints; see open), and the audit log's writer, a separate
// file with its own small writes, keeps SQLite's default.
func TestWriterCheckpointThreshold(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	var pages int
	if err := s.writer.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != writerCheckpointPages {
		t.Errorf("store writer: wal_autocheckpoint %d, want %d", pages, writerCheckpointPages)
	}
	db, err := openWriterPool(t.Context(), filepath.Join(t.TempDir(), "audit.db"), writerRole, defaultSynchronous)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil || pages != 1000 {
		t.Errorf("another writer pool: wal_autocheckpoint %d (%v), want SQLite's 1000", pages, err)
	}
}
