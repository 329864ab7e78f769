package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var _ store.Purger = (*Store)(nil)

// Purge deletes, in one write transaction, up to limit resources of typ
// last updated before before: their versions, index rows and pointer.
func (s *Store) Purge(ctx context.Context, typ string, before time.Time, limit int) (int, error) {
	if typ == "" || limit <= 0 {
		return 0, fmt.Errorf("sqlite store: purge: a type and a positive limit are required")
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, wrapErr(ctx, "purge: begin", err)
	}
	defer tx.Rollback()
	// The victims, in a temporary table so every statement below deletes
	// exactly them.
	stmts := []string{
		`CREATE TEMP TABLE IF NOT EXISTS purge_victims (rid INTEGER PRIMARY KEY, id TEXT NOT NULL)`,
		`DELETE FROM temp.purge_victims`,
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, wrapErr(ctx, "purge", err)
		}
	}
	// The resource holding the highest rid is kept even when it is due:
	// rid is a plain rowid, so deleting the highest row would let the next
	// create reuse its number, and a search cursor's snapshot (every rid up
	// to the highest when it began) would then take in a resource created
	// after it. It is purged by the first run after anything newer exists.
	res, err := tx.ExecContext(ctx, `INSERT INTO temp.purge_victims (rid, id)
		SELECT rid, id FROM resources WHERE type = ? AND last_updated < ?
			AND rid < (SELECT max(rid) FROM resources) LIMIT ?`, typ, micros(before), limit)
	if err != nil {
		return 0, wrapErr(ctx, "purge: select", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, nil
	}
	for _, q := range []string{
		`DELETE FROM search_keys WHERE rid IN (SELECT rid FROM temp.purge_victims)`,
		`DELETE FROM search_dates WHERE rid IN (SELECT rid FROM temp.purge_victims)`,
		`DELETE FROM search_numbers WHERE rid IN (SELECT rid FROM temp.purge_victims)`,
		`DELETE FROM search_sort_values WHERE rid IN (SELECT rid FROM temp.purge_victims)`,
		`DELETE FROM resources WHERE rid IN (SELECT rid FROM temp.purge_victims)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, wrapErr(ctx, "purge", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM resource_versions WHERE type = ? AND id IN (SELECT id FROM temp.purge_victims)`, typ); err != nil {
		return 0, wrapErr(ctx, "purge: versions", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, wrapErr(ctx, "purge: commit", err)
	}
	return int(n), nil
}
