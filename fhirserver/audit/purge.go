package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// purgeBatch bounds the records one DeleteThrough removes.
const purgeBatch = 1000

// Purge removes the audit records written before before (retention).
// First it appends, through rec, a checkpoint naming the newest of them
// and its hash, and waits until the checkpoint is stored; then it deletes.
// The chain therefore still verifies: it starts after the checkpointed
// record, whose hash the checkpoint (itself chained) vouches for. A purge
// cut short leaves a chain that verifies too; the next one finishes it.
// It returns how many records were removed.
func Purge(ctx context.Context, rec *Recorder, l Log, before time.Time) (int, error) {
	last, ok, err := newestBefore(ctx, l, before)
	if err != nil {
		return 0, fmt.Errorf("audit: purge: %w", err)
	}
	if !ok {
		return 0, nil
	}
	r, err := parseRecord(last.Body)
	if err != nil || r.Seq != last.Seq || r.Computed == "" || r.Computed != r.Hash {
		return 0, fmt.Errorf("audit: purge: %s does not verify; run kiln admin audit verify before purging", idFor(last.Seq))
	}
	if err := rec.Record(ctx, Event{Subtype: SubtypePurge, Purged: &Checkpoint{Seq: r.Seq, Hash: r.Hash},
		Agent: Agent{Who: "system/retention"}}); err != nil {
		return 0, err
	}
	if err := rec.Flush(ctx); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := l.DeleteThrough(ctx, r.Seq, purgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("audit: purge: %w", err)
		}
		if n == 0 {
			return total, nil
		}
	}
}

// newestBefore finds the newest entry written before t, by binary search
// over seq: entry times never decrease along the log (the recorder makes
// them strictly increase), so "every entry up to seq m was written before
// t" holds for every m up to some bound and for none above it.
func newestBefore(ctx context.Context, l Log, t time.Time) (store.LogEntry, bool, error) {
	// upTo returns the newest entry with Seq <= m.
	upTo := func(m int64) (store.LogEntry, bool, error) {
		es, err := l.Newest(ctx, m+1, 1)
		if err != nil || len(es) == 0 {
			return store.LogEntry{}, false, err
		}
		return es[0], true, nil
	}
	es, err := l.Newest(ctx, 0, 1)
	if err != nil || len(es) == 0 {
		return store.LogEntry{}, false, err
	}
	head := es[0]
	if head.Time.Before(t) {
		return head, true, nil
	}
	// Invariant: every entry up to lo is older than t; entry hi is not.
	lo, hi := int64(0), head.Seq
	var found store.LogEntry
	var have bool
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		e, ok, err := upTo(mid)
		if err != nil {
			return store.LogEntry{}, false, err
		}
		if !ok || e.Time.Before(t) {
			lo = mid
			found, have = e, ok
		} else {
			hi = e.Seq // <= mid: and the entries between are absent
		}
	}
	// found is upTo(lo), from the step that set lo (none if lo is 0).
	return found, have, nil
}
