package sqlite

import (
	"context"
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var _ store.BodyRewriter = (*Store)(nil)

// The compare-and-swaps of store.BodyRewriter: the old bytes are part of
// the condition, so a row changed since it was read is left alone. A
// tombstone's body is NULL and never equals Old.
const (
	rewriteBodyCASSQL   = `UPDATE resource_versions SET body = ? WHERE type = ? AND id = ? AND version = ? AND body = ?`
	rewriteRecordCASSQL = `UPDATE records SET value = ? WHERE kind = ? AND id = ? AND version = ? AND value = ? AND ` + live
)

// RewriteBodies applies the replacements in one IMMEDIATE transaction.
// Only resource_versions.body changes: the index tables, the resources
// row and the version's other columns are not touched.
func (s *Store) RewriteBodies(ctx context.Context, rs []store.Replacement) (int, error) {
	return s.replaceAll(ctx, "rewrite bodies", rs, func(r store.Replacement) []any {
		return []any{r.New, r.Type, r.ID, r.Version, r.Old}
	}, rewriteBodyCASSQL)
}

// RewriteRecordValues applies the replacements in one IMMEDIATE
// transaction; an expired record is skipped, as it is absent.
func (s *Store) RewriteRecordValues(ctx context.Context, rs []store.Replacement) (int, error) {
	now := nowMicros()
	return s.replaceAll(ctx, "rewrite record values", rs, func(r store.Replacement) []any {
		return []any{r.New, r.Type, r.ID, r.Version, r.Old, now}
	}, rewriteRecordCASSQL)
}

func (s *Store) replaceAll(ctx context.Context, op string, rs []store.Replacement, args func(store.Replacement) []any, query string) (int, error) {
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return 0, fmt.Errorf("sqlite store: %s: %w", op, err)
		}
	}
	if len(rs) == 0 {
		return 0, nil
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, wrapErr(ctx, op+": begin", err)
	}
	defer tx.Rollback() // no-op after Commit
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return 0, wrapErr(ctx, op+": prepare", err)
	}
	defer st.Close()
	applied := 0
	for _, r := range rs {
		res, err := st.ExecContext(ctx, args(r)...)
		if err != nil {
			return 0, wrapErr(ctx, fmt.Sprintf("%s: %s/%s version %d", op, r.Type, r.ID, r.Version), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, wrapErr(ctx, op, err)
		}
		applied += int(n)
	}
	if err := tx.Commit(); err != nil {
		return 0, wrapErr(ctx, op+": commit", err)
	}
	return applied, nil
}

// RecordKinds reads the distinct kinds from the records table's primary
// key (kind, id), expired rows included: a job visiting them lists each
// kind, which skips those.
func (s *Store) RecordKinds(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT DISTINCT kind FROM records ORDER BY kind`)
	if err != nil {
		return nil, wrapErr(ctx, "record kinds", err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, wrapErr(ctx, "record kinds", err)
		}
		kinds = append(kinds, k)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, "record kinds", err)
	}
	return kinds, nil
}

// CountVersions counts the rows of resource_versions (a scan of its
// smallest index).
func (s *Store) CountVersions(ctx context.Context) (int64, error) {
	var n int64
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM resource_versions`).Scan(&n); err != nil {
		return 0, wrapErr(ctx, "count versions", err)
	}
	return n, nil
}
