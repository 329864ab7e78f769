package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// store.Records on the records table (migration 4): one row per record,
// its current version only. Writes go through the writer connection,
// reads through the reader pool, like the resources.

var _ store.Records = (*Store)(nil)

// live is the condition of an unexpired row; its parameter is now in
// unix microseconds.
const live = `(expires = 0 OR expires > ?)`

func nowMicros() int64 { return time.Now().UnixMicro() }

const getRecordSQL = `SELECT version, value, expires FROM records WHERE kind = ? AND id = ? AND ` + live

// GetRecord returns the record kind/id; store.ErrNotFound when it is
// absent or expired.
func (s *Store) GetRecord(ctx context.Context, kind, id string) (*store.Record, error) {
	r := &store.Record{Kind: kind, ID: id}
	var exp int64
	err := s.rq.record.QueryRowContext(ctx, kind, id, nowMicros()).Scan(&r.Version, &r.Value, &exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("sqlite store: get record %s/%s: %w", kind, id, store.ErrNotFound)
	case err != nil:
		return nil, wrapErr(ctx, fmt.Sprintf("get record %s/%s", kind, id), err)
	}
	r.Expires = store.RecordExpires(exp)
	return r, nil
}

// PutRecord is a compare-and-swap inside one write transaction: the write
// lock is held from BEGIN IMMEDIATE, so nothing changes the row between
// the version check and the upsert. The transaction also purges the
// expired rows of every kind (through the partial index on expires, so
// the cost is that of the rows purged).
func (s *Store) PutRecord(ctx context.Context, r store.Record) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("sqlite store: put record: %w", err)
	}
	ref := fmt.Sprintf("%s/%s version %d", r.Kind, r.ID, r.Version)
	fail := func(step string, err error) error {
		return wrapErr(ctx, "put record "+ref+step, err)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fail(": begin", err)
	}
	defer tx.Rollback() // no-op after Commit

	now := nowMicros()
	if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE expires > 0 AND expires <= ?`, now); err != nil {
		return fail(": purge expired", err)
	}
	var cur int64
	err = tx.QueryRowContext(ctx, `SELECT version FROM records WHERE kind = ? AND id = ? AND `+live,
		r.Kind, r.ID, now).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		cur = 0
	case err != nil:
		return fail("", err)
	}
	if cur != r.Version-1 {
		return fmt.Errorf("sqlite store: put record %s: current version is %d: %w", ref, cur, store.ErrConflict)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO records (kind, id, version, value, expires) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (kind, id) DO UPDATE SET version = excluded.version, value = excluded.value, expires = excluded.expires`,
		r.Kind, r.ID, r.Version, r.Value, r.ExpiresMicros()); err != nil {
		return fail(": upsert", err)
	}
	if err := tx.Commit(); err != nil {
		return fail(": commit", err)
	}
	return nil
}

// ListRecords returns the unexpired records of kind in ID order (SQLite's
// BINARY collation: byte order).
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*store.Record, error) {
	rows, err := s.reader.QueryContext(ctx,
		`SELECT id, version, value, expires FROM records WHERE kind = ? AND `+live+` ORDER BY id`,
		kind, nowMicros())
	if err != nil {
		return nil, wrapErr(ctx, "list records "+kind, err)
	}
	defer rows.Close()
	var out []*store.Record
	for rows.Next() {
		r := &store.Record{Kind: kind}
		var exp int64
		if err := rows.Scan(&r.ID, &r.Version, &r.Value, &exp); err != nil {
			return nil, wrapErr(ctx, "list records "+kind, err)
		}
		r.Expires = store.RecordExpires(exp)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, "list records "+kind, err)
	}
	return out, nil
}

// DeleteRecord removes kind/id; an absent record is no error.
func (s *Store) DeleteRecord(ctx context.Context, kind, id string) error {
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM records WHERE kind = ? AND id = ?`, kind, id); err != nil {
		return wrapErr(ctx, fmt.Sprintf("delete record %s/%s", kind, id), err)
	}
	return nil
}
