package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/walbuf"
)

// TestWALBufferOnlyWhenCommitsSync proves the store buffers the WAL only
// on the writer, and only where SQLite syncs the WAL before publishing a
// commit: with synchronous=NORMAL a commit's frames would be published
// while still in the buffer. Readers never write frames; the migrator
// must be free to spill (migratorRole).
func TestWALBufferOnlyWhenCommitsSync(t *testing.T) {
	for _, sync := range []string{"FULL", "EXTRA", "NORMAL", "OFF"} {
		for _, r := range []role{writerRole, readerRole, migratorRole} {
			u, err := url.Parse(dsn("/tmp/kiln.db", r, sync))
			if err != nil {
				t.Fatal(err)
			}
			want := r == writerRole && (sync == "FULL" || sync == "EXTRA")
			if got := u.Query().Get("vfs") == walbuf.VFSName; got != want {
				t.Errorf("synchronous=%s, role %d: buffered WAL %v, want %v (%s)", sync, r, got, want, u.RawQuery)
			}
			if spills := !slices.Contains(u.Query()["_pragma"], "cache_spill(0)"); spills == want {
				t.Errorf("synchronous=%s, role %d: cache spill %v with buffered WAL %v", sync, r, spills, want)
			}
		}
	}
	if !strings.Contains(defaultSynchronous, "FULL") {
		t.Errorf("the default is synchronous=%s; the buffered WAL needs FULL", defaultSynchronous)
	}
}

// TestBufferedWALThroughTheStore writes through the store transactions
// larger than the WAL buffer, one rolled back and one committed, and checks
// that the reader pool sees each commit as soon as it returns, and that the
// database is whole after a reopen.
func TestBufferedWALThroughTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	s := openTemp(t, path)
	big := func(id string, version int64) store.Write {
		pad := strings.Repeat("x", 32<<10)
		return store.Write{Type: "Binary", ID: id, Version: version, LastUpdated: ts(int(version)), Method: store.MethodUpdate,
			Body: fmt.Appendf(nil, `{"resourceType":"Binary","id":%q,"data":%q}`, id, pad)}
	}
	const n = 3 * walbuf.Limit / (32 << 10) // bodies alone: three buffers' worth
	errRollBack := errors.New("roll back")
	err := s.Transact(t.Context(), func(tx store.Tx) error {
		for i := range n {
			if err := tx.Put(t.Context(), big(fmt.Sprint("gone", i), 1)); err != nil {
				return err
			}
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatal(err)
	}
	for round := range 2 {
		err := s.Transact(t.Context(), func(tx store.Tx) error {
			for i := range n {
				if err := tx.Put(t.Context(), big(fmt.Sprint("kept", i), int64(round+1))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var count, versions int
		if err := s.reader.QueryRow(`SELECT count(*), sum(version) FROM resources WHERE id LIKE 'kept%'`).Scan(&count, &versions); err != nil {
			t.Fatal(err)
		}
		if count != n || versions != n*(round+1) {
			t.Fatalf("round %d: the reader pool sees %d resources at %d versions in all; want %d at %d", round, count, versions, n, n*(round+1))
		}
		for i := range n {
			w := big(fmt.Sprint("kept", i), int64(round+1))
			if v, err := s.Read(t.Context(), w.Type, w.ID); err != nil || v.Version != w.Version || !bytes.Equal(v.Body, w.Body) {
				t.Fatalf("round %d: the reader pool reads %s: %v", round, w.ID, err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, path)
	defer s.Close()
	checkConsistent(t, s)
	for i := range n {
		v, err := s.Read(t.Context(), "Binary", fmt.Sprint("kept", i))
		if err != nil || v.Version != 2 || !bytes.Equal(v.Body, big(fmt.Sprint("kept", i), 2).Body) {
			t.Fatalf("kept%d after reopen: %v", i, err)
		}
		if _, err := s.Read(t.Context(), "Binary", fmt.Sprint("gone", i)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("gone%d, rolled back, after reopen: %v", i, err)
		}
	}
}

// walOf is the WAL file of conn's main database, as SQLite holds it.
func walOf(t *testing.T, conn *sql.Conn) (wal any) {
	t.Helper()
	err := conn.Raw(func(dc any) error {
		c := dc.(interface{ Raw() *sqlite3.Conn }).Raw()
		var err error
		wal, err = c.FileControl("main", sqlite3.FCNTL_JOURNAL_POINTER)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return wal
}

// TestStoreWriterSettings checks, on the store's live writer connection,
// the settings the buffered WAL relies on: it is in use, commits sync the
// WAL, and pages never spill to the WAL before a commit.
func TestStoreWriterSettings(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	put(t, s, "Patient", "a", 1, ts(1))
	conn, err := s.writer.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var sync, spill int
	if err := conn.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(t.Context(), `PRAGMA cache_spill`).Scan(&spill); err != nil {
		t.Fatal(err)
	}
	if sync != 2 || spill != 0 {
		t.Errorf("synchronous %d, cache_spill %d; want 2 (FULL) and 0", sync, spill)
	}
	if !walbuf.IsBuffered(walOf(t, conn)) {
		t.Errorf("the writer's WAL is a %T, not buffered", walOf(t, conn))
	}
}

// TestWALNotBufferedWithoutPowersafeOverwrite: without power-safe
// overwrite SQLite writes part of a commit's last frame after syncing the
// WAL, so such a WAL must not be buffered.
func TestWALNotBufferedWithoutPowersafeOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	db, err := sql.Open(driverName, dsn(path, writerRole, defaultSynchronous)+"&psow=0")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	if wal := walOf(t, conn); wal == nil {
		t.Fatal("no WAL open")
	} else if walbuf.IsBuffered(wal) {
		t.Error("the WAL of a database without power-safe overwrite is buffered")
	}
}

// TestRolledBackTransactionLeavesNoFrames: a transaction larger than the
// writer's page cache rolls back, another writer commits, and then the
// first touches the WAL again. Had the first transaction's pages spilled
// into the buffer, that touch would write them over the second writer's
// committed frames (a corrupt database).
func TestRolledBackTransactionLeavesNoFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kiln.db")
	open := func() *sql.DB {
		db, err := openWriterPool(t.Context(), path, writerRole, defaultSynchronous, "cache_size(10)") // 10 pages
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	w1, w2 := open(), open()
	defer w1.Close()
	defer w2.Close()
	exec := func(db *sql.DB, q string) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(w1, `CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`)
	exec(w1, `INSERT INTO t VALUES (0, 'seed')`)
	exec(w1, `PRAGMA wal_checkpoint(TRUNCATE)`)
	tx, err := w1.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), `INSERT INTO t SELECT value, randomblob(3000) FROM generate_series(1000, 1400)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	exec(w2, `INSERT INTO t SELECT value, zeroblob(3000) FROM generate_series(1, 200)`)
	var n int
	if err := w1.QueryRowContext(t.Context(), `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 201 {
		t.Fatalf("the first writer counts %d rows (%v), want 201", n, err)
	}
	var ok string
	if err := w2.QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
}
