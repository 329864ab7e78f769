package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// putRows replaces the index rows of resource rid with w.Index, inside the
// caller's write transaction (the one that appends the version), so rows
// and version commit or roll back together. A new resource has no rows to
// delete.
func (s *Store) putRows(ctx context.Context, tx *sql.Tx, w store.Write, rid int64, created bool) error {
	if !created {
		for i := range numShapes {
			st := tx.StmtContext(ctx, s.pq.delete[i])
			_, err := st.ExecContext(ctx, rid)
			st.Close()
			if err != nil {
				return err
			}
		}
	}
	if w.Deleted || w.Index == nil {
		return nil
	}
	rows := w.Index
	arrays := [numShapes][]byte{}
	if len(rows.Keys) > 0 {
		arrays[shapeKeys] = keysJSON(rows.Keys)
	}
	if len(rows.Dates) > 0 {
		arrays[shapeDates] = datesJSON(rows.Dates)
	}
	if len(rows.Numbers) > 0 {
		b, err := numbersJSON(rows.Numbers)
		if err != nil {
			return err
		}
		arrays[shapeNumbers] = b
	}
	if len(rows.Sorts) > 0 {
		b, err := sortsJSON(rows.Sorts)
		if err != nil {
			return err
		}
		arrays[shapeSorts] = b
	}
	for i, a := range arrays {
		if a == nil {
			continue
		}
		st := tx.StmtContext(ctx, s.pq.insRow[i])
		// Bound as TEXT: json_each parses its argument as JSON text.
		_, err := st.ExecContext(ctx, string(a), w.Type, rid)
		st.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func appendJSONString(b []byte, s string) []byte {
	// encoding/json escapes control characters (the key separator \x1f)
	// as \u001f, which SQLite's JSON decodes back; invalid UTF-8 would be
	// replaced, but keys are normalized UTF-8.
	q, _ := json.Marshal(s)
	return append(b, q...)
}

func keysJSON(keys []string) []byte {
	b := []byte{'['}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
	}
	return append(b, ']')
}

func datesJSON(rows []search.DateRow) []byte {
	b, _ := rangesJSON(rows, func(r search.DateRow) (string, int64, int64) { return r.Param, r.Low, r.High }, appendJSONInt)
	return b
}

// rangesJSON writes rows as a JSON array of [param, low, high], the shape
// the date, number and sort inserts read; appendBound writes one bound.
func rangesJSON[R, V any](rows []R, split func(R) (string, V, V), appendBound func([]byte, V) ([]byte, error)) ([]byte, error) {
	b := []byte{'['}
	var err error
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		param, lo, hi := split(r)
		b = append(b, '[')
		b = appendJSONString(b, param)
		b = append(b, ',')
		if b, err = appendBound(b, lo); err != nil {
			return nil, err
		}
		b = append(b, ',')
		if b, err = appendBound(b, hi); err != nil {
			return nil, err
		}
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

func appendJSONInt(b []byte, v int64) ([]byte, error) {
	return strconv.AppendInt(b, v, 10), nil
}

// appendJSONFloat writes f so that SQLite reads it back as REAL (an
// exponent forces that even for whole numbers) and exactly ('e' with the
// shortest round-tripping precision).
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %v cannot be indexed", f)
	}
	return strconv.AppendFloat(b, f, 'e', -1, 64), nil
}

func numbersJSON(rows []search.NumberRow) ([]byte, error) {
	return rangesJSON(rows, func(r search.NumberRow) (string, float64, float64) { return r.Param, r.Low, r.High }, appendJSONFloat)
}

// appendSortValue keeps the value's type: a string as TEXT, an integer as
// INTEGER, a float as REAL, anything else (composites) as NULL.
func appendSortValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case float64:
		return appendJSONFloat(b, v)
	default:
		return append(b, "null"...), nil
	}
}

func sortsJSON(rows []search.SortRow) ([]byte, error) {
	return rangesJSON(rows, func(r search.SortRow) (string, any, any) { return r.Param, r.Lo, r.Hi }, appendSortValue)
}

var _ store.Indexer = (*Store)(nil)

const reindexCurrentSQL = `SELECT rid, version, deleted FROM resources WHERE type = ? AND id = ?`

// Reindex replaces the rows of each update's resource in one write
// transaction, skipping resources whose current version is no longer the
// one the rows were extracted from (or that were deleted since): their
// newer version was written with its own rows.
func (s *Store) Reindex(ctx context.Context, updates []store.IndexUpdate) (int, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, wrapErr(ctx, "reindex: begin", err)
	}
	defer tx.Rollback()
	applied := 0
	for _, u := range updates {
		var rid, version int64
		var deleted bool
		err := tx.QueryRowContext(ctx, reindexCurrentSQL, u.Type, u.ID).Scan(&rid, &version, &deleted)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, wrapErr(ctx, "reindex "+u.Type+"/"+u.ID, err)
		}
		if version != u.Version || deleted {
			continue
		}
		if err := s.putRows(ctx, tx, store.Write{Type: u.Type, ID: u.ID, Index: u.Rows}, rid, false); err != nil {
			return 0, wrapErr(ctx, "reindex "+u.Type+"/"+u.ID, err)
		}
		applied++
	}
	if err := tx.Commit(); err != nil {
		return 0, wrapErr(ctx, "reindex: commit", err)
	}
	return applied, nil
}
