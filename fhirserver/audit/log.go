package audit

import (
	"context"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Log is the audit partition: chained records kept in seq order,
// append-only. Entry seq is the record's chain seq, its Time the record's
// meta.lastUpdated and its Body the record's bytes. sqlite.Log and
// mongo.Log implement it.
type Log interface {
	// Append adds entries whose seqs follow the newest one's. A seq
	// already present is store.ErrConflict. On error a prefix of entries
	// may have been stored (the recorder resyncs from Newest).
	Append(ctx context.Context, entries []store.LogEntry) error
	// Newest returns up to n entries with Seq < before (before <= 0: no
	// bound), newest first.
	Newest(ctx context.Context, before int64, n int) ([]store.LogEntry, error)
	// DeleteThrough removes up to limit of the oldest entries with
	// Seq <= seq and returns how many.
	DeleteThrough(ctx context.Context, seq int64, limit int) (int, error)
}
