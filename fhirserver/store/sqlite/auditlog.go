package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Log is an append-only log in a SQLite database file of its own: the audit
// partition (<data>/audit.db). One row per entry, keyed by seq, so an
// append is one b-tree insert. It is safe for concurrent use.
//
// It uses one connection, set up like the store's writer (WAL, the same
// synchronous level and busy timeout): appends come from a single
// group-committing writer, and reads (the recorder's start, verify, purge)
// are rare.
type Log struct {
	path string
	db   *sql.DB

	insert, newest, deleteThrough *sql.Stmt

	closeOnce sync.Once
	closeErr  error
}

const (
	// at is unix microseconds, UTC.
	logSchemaSQL = `CREATE TABLE IF NOT EXISTS audit_log (
		seq  INTEGER PRIMARY KEY,
		at   INTEGER NOT NULL,
		body BLOB    NOT NULL
	) STRICT`

	// Before this build the audit partition was a full store (sqlite.Open)
	// whose AuditEvents, written once each as version 1 with the id
	// "ae-" + 12 digits of seq, hold exactly the bodies of the log. Creating
	// the table copies them over once, so the chain continues across the
	// upgrade. The old rows are left where they are (nothing reads them any
	// more; a later version may drop them).
	logImportSQL = `INSERT OR IGNORE INTO audit_log (seq, at, body)
		SELECT CAST(substr(id, 4) AS INTEGER), last_updated, body
		FROM resource_versions
		WHERE type = 'AuditEvent' AND version = 1 AND deleted = 0
			AND length(id) = 15 AND id GLOB 'ae-[0-9]*' AND body IS NOT NULL
			AND CAST(substr(id, 4) AS INTEGER) > 0`

	// A seq already present inserts nothing: Append reports store.ErrConflict
	// without depending on the driver's error codes.
	logInsertSQL = `INSERT INTO audit_log (seq, at, body) VALUES (?, ?, ?) ON CONFLICT (seq) DO NOTHING`

	logNewestSQL = `SELECT seq, at, body FROM audit_log WHERE seq < ? ORDER BY seq DESC LIMIT ?`

	logDeleteSQL = `DELETE FROM audit_log WHERE seq IN (
		SELECT seq FROM audit_log WHERE seq <= ? ORDER BY seq LIMIT ?)`
)

// OpenLog opens (creating if needed) the log in the database file at path,
// whose parent folder is created with mode 0700 if missing. The file may
// hold a store's tables too: an audit.db written by earlier builds, whose
// AuditEvents are copied into the log when its table is created.
func OpenLog(ctx context.Context, path string) (_ *Log, err error) {
	abs, err := createPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite log: open %s: %w", path, err)
	}
	l := &Log{path: abs}
	defer func() {
		if err != nil {
			l.closeAll()
		}
	}()
	if l.db, err = openWriterPool(ctx, abs, writerRole, defaultSynchronous); err != nil {
		return nil, fmt.Errorf("sqlite log: open %s: %w", path, err)
	}
	if err := l.initSchema(ctx); err != nil {
		return nil, fmt.Errorf("sqlite log: open %s: %w", path, err)
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{{&l.insert, logInsertSQL}, {&l.newest, logNewestSQL}, {&l.deleteThrough, logDeleteSQL}} {
		if *p.stmt, err = l.db.PrepareContext(ctx, p.sql); err != nil {
			return nil, fmt.Errorf("sqlite log: open %s: prepare: %w", path, err)
		}
	}
	return l, nil
}

// createPrivate makes path absolute, creates its parent folder (0700) and
// the file itself (0600: SQLite would use 0666 less the umask) if missing.
// SQLite treats an empty file as an empty database.
func createPrivate(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return "", err
	}
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return abs, nil
}

// openWriterPool opens a pool of one connection of a writing role r
// (writerRole or migratorRole, see dsn), kept open with its prepared
// statements, and checks that the file is in WAL mode.
func openWriterPool(ctx context.Context, abs string, r role, synchronous string, extra ...string) (*sql.DB, error) {
	db, err := sql.Open(driverName, dsn(abs, r, synchronous, extra...))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		db.Close()
		return nil, err
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	return db, nil
}

// initSchema creates the table (importing an earlier build's AuditEvents,
// see logImportSQL) in one transaction. Like the store, it refuses a file
// that is some other application's SQLite database.
func (l *Log) initSchema(ctx context.Context) error {
	tx, err := l.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see dsn
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var appID, objects, have int
	if err := tx.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE name = 'audit_log') FROM sqlite_schema`).Scan(&objects, &have); err != nil {
		return err
	}
	switch {
	case appID == applicationID:
	case appID == 0 && objects == 0:
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA application_id = %d`, applicationID)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("not a Kiln database (application_id %#x, %d schema objects)", appID, objects)
	}
	if have == 1 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, logSchemaSQL); err != nil {
		return fmt.Errorf("create audit_log: %w", err)
	}
	var old int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'resource_versions'`).Scan(&old); err != nil {
		return err
	}
	if old == 1 {
		if _, err := tx.ExecContext(ctx, logImportSQL); err != nil {
			return fmt.Errorf("import the AuditEvents of the earlier store: %w", err)
		}
	}
	return tx.Commit()
}

// Append adds entries in one transaction. A seq already present fails the
// whole transaction with store.ErrConflict; nothing is stored then.
func (l *Log) Append(ctx context.Context, entries []store.LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr(ctx, "log append: begin", err)
	}
	defer tx.Rollback()
	ins := tx.StmtContext(ctx, l.insert)
	for _, e := range entries {
		res, err := ins.ExecContext(ctx, e.Seq, micros(e.Time), e.Body)
		if err != nil {
			return wrapErr(ctx, "log append", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return wrapErr(ctx, "log append", err)
		} else if n == 0 {
			return fmt.Errorf("sqlite log: append: seq %d exists: %w", e.Seq, store.ErrConflict)
		}
	}
	if err := tx.Commit(); err != nil {
		return wrapErr(ctx, "log append: commit", err)
	}
	return nil
}

// Newest returns up to n entries with Seq < before (before <= 0: no
// bound), newest first.
func (l *Log) Newest(ctx context.Context, before int64, n int) ([]store.LogEntry, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	if n <= 0 {
		return nil, nil
	}
	rows, err := l.newest.QueryContext(ctx, before, n)
	if err != nil {
		return nil, wrapErr(ctx, "log newest", err)
	}
	defer rows.Close()
	out := make([]store.LogEntry, 0, min(n, 512))
	for rows.Next() {
		var e store.LogEntry
		var at int64
		if err := rows.Scan(&e.Seq, &at, &e.Body); err != nil {
			return nil, wrapErr(ctx, "log newest", err)
		}
		e.Time = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, "log newest", err)
	}
	return out, nil
}

// DeleteThrough removes up to limit of the oldest entries with Seq <= seq
// and returns how many it removed.
func (l *Log) DeleteThrough(ctx context.Context, seq int64, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	res, err := l.deleteThrough.ExecContext(ctx, seq, limit)
	if err != nil {
		return 0, wrapErr(ctx, "log delete", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrapErr(ctx, "log delete", err)
	}
	return int(n), nil
}

// Close closes the database; idempotent. Calls after Close fail.
func (l *Log) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.closeAll() })
	return l.closeErr
}

func (l *Log) closeAll() error {
	var errs []error
	for _, s := range []*sql.Stmt{l.insert, l.newest, l.deleteThrough} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if l.db != nil {
		errs = append(errs, l.db.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite log: close %s: %w", l.path, err)
	}
	return nil
}
