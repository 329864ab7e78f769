package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var (
	_ store.Sequencer = (*Store)(nil)
	_ store.Rewriter  = (*Store)(nil)
	_ store.Rewriter  = (*tx)(nil)
)

// nextValueSQL takes the next value of a counter in one statement: the
// write lock it holds makes the increment and the read one atomic step,
// across the handles and processes sharing the file.
const nextValueSQL = `INSERT INTO sequences (name, value) VALUES (?, 1)
	ON CONFLICT (name) DO UPDATE SET value = value + 1
	RETURNING value`

// NextValue increments the counter name on the writer connection, in its
// own (autocommit) transaction. Calling it from inside Transact's fn waits
// for the connection fn holds, until ctx ends.
func (s *Store) NextValue(ctx context.Context, name string) (int64, error) {
	if err := store.CheckSequenceName(name); err != nil {
		return 0, fmt.Errorf("sqlite store: next value: %w", err)
	}
	var v int64
	if err := s.writer.QueryRowContext(ctx, nextValueSQL, name).Scan(&v); err != nil {
		return 0, wrapErr(ctx, "next value of "+name, err)
	}
	return v, nil
}

const (
	rewriteFindSQL    = `SELECT deleted FROM resource_versions WHERE type = ? AND id = ? AND version = ?`
	rewriteBodySQL    = `UPDATE resource_versions SET body = ? WHERE type = ? AND id = ? AND version = ?`
	rewriteCurrentSQL = `SELECT rid, version FROM resources WHERE type = ? AND id = ?`
)

// Rewrite replaces the body of one version (and the index rows, when it
// is the current one) in its own IMMEDIATE transaction.
func (s *Store) Rewrite(ctx context.Context, w store.Write) error {
	if err := w.CheckRewrite(); err != nil {
		return fmt.Errorf("sqlite store: rewrite: %w", err)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr(ctx, "rewrite: begin", err)
	}
	defer tx.Rollback()
	if err := s.rewrite(ctx, newWriteTx(tx), w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return wrapErr(ctx, "rewrite: commit", err)
	}
	return nil
}

// Rewrite inside Transact: part of the transaction, rolled back with it.
func (t *tx) Rewrite(ctx context.Context, w store.Write) error {
	if err := w.CheckRewrite(); err != nil {
		return fmt.Errorf("sqlite store: rewrite: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.s.rewrite(ctx, t.tx, w)
}

// rewrite updates the version row in the caller's write transaction and,
// when the version is current, replaces the resource's index rows. The
// write lock is held from BEGIN IMMEDIATE, so the version cannot stop
// being current between the check and the rows' replacement.
func (s *Store) rewrite(ctx context.Context, tx *writeTx, w store.Write) error {
	ref := "rewrite " + writeRef(w)
	var deleted bool
	err := tx.QueryRowContext(ctx, rewriteFindSQL, w.Type, w.ID, w.Version).Scan(&deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite store: %s: %w", ref, store.ErrNotFound)
	}
	if err != nil {
		return wrapErr(ctx, ref, err)
	}
	if deleted {
		return fmt.Errorf("sqlite store: %w", store.TombstoneRewrite(w))
	}
	if _, err := tx.ExecContext(ctx, rewriteBodySQL, w.Body, w.Type, w.ID, w.Version); err != nil {
		return wrapErr(ctx, ref, err)
	}
	var rid, current int64
	if err := tx.QueryRowContext(ctx, rewriteCurrentSQL, w.Type, w.ID).Scan(&rid, &current); err != nil {
		// A version row always has its resource's pointer row.
		return wrapErr(ctx, ref+": pointer", err)
	}
	if current != w.Version {
		return nil
	}
	if err := s.putRows(ctx, tx, w, rid, false); err != nil {
		return wrapErr(ctx, ref+": index rows", err)
	}
	return nil
}

var _ store.Forgetter = (*Store)(nil)

// forgetAttempts bounds Forget: each attempt may wait busyTimeoutMS for
// readers still on older WAL frames, so an erasure answers within about
// forgetAttempts × 5 s, with an error when readers never let go.
const forgetAttempts = 3

// Forget copies every committed frame of the WAL into the database and
// truncates the WAL to zero bytes (PRAGMA wal_checkpoint(TRUNCATE)), so
// that no frame holding replaced content stays in clinical.db-wal; with
// secure_delete on (dsn), the space the replaced content took in the
// database file was zeroed when it was freed. The checkpoint runs on the
// writer connection, after the commits it must cover, and waits (the busy
// timeout) for readers still reading older frames; when they hold the WAL
// through every attempt, Forget fails rather than report the content gone.
func (s *Store) Forget(ctx context.Context) error {
	wal := s.path + "-wal"
	var last string
	for attempt := range forgetAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return wrapErr(ctx, "forget", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
		var busy, frames, copied int64
		if err := s.writer.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied); err != nil {
			return wrapErr(ctx, "forget: checkpoint", err)
		}
		if busy != 0 {
			last = fmt.Sprintf("readers held the WAL (%d of %d frames copied)", copied, frames)
			continue
		}
		fi, err := os.Stat(wal)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite store: forget: %w", err)
		}
		last = fmt.Sprintf("the WAL still has %d bytes after the checkpoint", fi.Size())
	}
	return fmt.Errorf("sqlite store: forget: the WAL was not emptied after %d attempts: %s", forgetAttempts, last)
}
