package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/cursor"
)

// history runs one page of q with the statements of qs, inside tx when it is
// not nil (Transact).
//
// Paging is keyset paging over (last_updated DESC, seq DESC): the cursor is
// the position of the last version returned, so a page costs an index range
// scan of its own rows plus one (which tells whether there is a next page)
// wherever it starts, and versions written meanwhile cannot shift it. See
// cursor.History for the snapshot bound. A page holds Count versions, or
// fewer when their bodies reach MaxBytes first.
func history(ctx context.Context, q store.HistoryQuery, qs *readQueries, tx *sql.Tx) (*store.HistoryPage, error) {
	var l level
	switch {
	case q.Type == "" && q.ID == "":
		l = systemLevel
	case q.ID == "":
		l = typeLevel
	case q.Type != "":
		l = instanceLevel
	default:
		return nil, fmt.Errorf("sqlite store: history: an id (%q) needs a type", q.ID)
	}
	if q.Count <= 0 {
		return nil, fmt.Errorf("sqlite store: history: count must be > 0, got %d", q.Count)
	}
	if q.MaxBytes < 0 {
		return nil, fmt.Errorf("sqlite store: history: max bytes must be >= 0, got %d", q.MaxBytes)
	}

	since, atLow, atHigh := q.HistoryBounds()
	hash := cursor.HistoryHash(byte(l), q.Type, q.ID, since, atLow, atHigh)

	// First page: start above every position and see every seq; the page
	// query reports max(seq) to freeze the set for the following pages.
	pos := cursor.History{LastUpdated: math.MaxInt64, Seq: math.MaxInt64, MaxSeq: math.MaxInt64, Query: hash}
	if q.Cursor != "" {
		c, err := cursor.DecodeHistory(q.Cursor)
		if err != nil {
			return nil, err
		}
		if c.Query != hash {
			return nil, fmt.Errorf("sqlite store: history: cursor was issued for another query: %w", store.ErrBadCursor)
		}
		pos = c
	}

	args := make([]any, 0, 10)
	switch l {
	case typeLevel:
		args = append(args, q.Type)
	case instanceLevel:
		args = append(args, q.Type, q.ID)
	}
	// [since, hi] is the index range: AtHigh is exclusive, and nothing after
	// the cursor's position can be on this page.
	hi := pos.LastUpdated
	if atHigh != math.MaxInt64 {
		hi = min(hi, atHigh-1)
	}
	args = append(args, since, hi, pos.LastUpdated, pos.Seq, pos.MaxSeq)
	withAt := 0
	if !q.AtLow.IsZero() {
		withAt = 1
		args = append(args, atLow, pos.MaxSeq)
	}

	st := qs.history[l][withAt]
	if tx != nil {
		st = tx.StmtContext(ctx, st)
		defer st.Close()
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, wrapErr(ctx, "history", err)
	}
	defer rows.Close()

	page := &store.HistoryPage{}
	var last cursor.History
	more := false
	size := 0 // bytes of the bodies on the page
	for rows.Next() {
		// One row beyond the page tells whether there is a next page.
		// A page also ends once its bodies reach MaxBytes. The row that
		// tells is stepped but never scanned: its body is not copied out.
		if len(page.Versions) == q.Count || q.MaxBytes > 0 && size >= q.MaxBytes {
			more = true
			break
		}
		v := &store.Version{}
		var seq, lu int64
		var maxSeq sql.NullInt64
		var method string
		if err := rows.Scan(&seq, &v.Type, &v.ID, &v.Version, &lu, &method, &v.Deleted, &v.Body, &maxSeq); err != nil {
			return nil, wrapErr(ctx, "history", err)
		}
		v.LastUpdated, v.Method = fromMicros(lu), store.Method(method)
		page.Versions = append(page.Versions, v)
		size += len(v.Body)
		last = cursor.History{LastUpdated: lu, Seq: seq, MaxSeq: pos.MaxSeq, Query: hash}
		if q.Cursor == "" {
			last.MaxSeq = maxSeq.Int64
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, "history", err)
	}
	if err := rows.Close(); err != nil {
		return nil, wrapErr(ctx, "history", err)
	}
	if more {
		page.Next = last.Encode()
	}
	return page, nil
}
