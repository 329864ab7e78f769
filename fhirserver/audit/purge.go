package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// purgeBatch bounds the records one store call removes.
const purgeBatch = 1000

// Purge removes the audit records written before before (retention).
// First it appends, through rec, a checkpoint naming the newest of them
// and its hash, and waits until the checkpoint is stored; then it deletes.
// The chain therefore still verifies: it starts after the checkpointed
// record, whose hash the checkpoint (itself chained) vouches for. A purge
// cut short leaves a chain that verifies too; the next one finishes it.
// It returns how many records were removed.
func Purge(ctx context.Context, rec *Recorder, st store.Store, before time.Time) (int, error) {
	p, ok := st.(store.Purger)
	if !ok {
		return 0, errors.New("audit: purge: the audit store cannot purge")
	}
	// The newest record written before the cut-off: audit records are
	// never superseded, so the _at query lists exactly those.
	page, err := st.History(ctx, store.HistoryQuery{Type: "AuditEvent", AtLow: before, AtHigh: before, Count: 1})
	if err != nil {
		return 0, fmt.Errorf("audit: purge: %w", err)
	}
	if len(page.Versions) == 0 {
		return 0, nil
	}
	last := page.Versions[0]
	r, err := parseRecord(last.Body)
	if err != nil || r.Computed == "" || r.Computed != r.Hash {
		return 0, fmt.Errorf("audit: purge: %s does not verify; run kiln admin audit verify before purging", last.ID)
	}
	if err := rec.Record(ctx, Event{Subtype: SubtypePurge, Purged: &Checkpoint{Seq: r.Seq, Hash: r.Hash},
		Agent: Agent{Who: "system/retention"}}); err != nil {
		return 0, err
	}
	if err := rec.Flush(ctx); err != nil {
		return 0, err
	}
	// Records are written with strictly increasing times, so everything up
	// to and including the checkpointed one is older than this.
	cut := last.LastUpdated.Add(time.Microsecond)
	total := 0
	for {
		n, err := p.Purge(ctx, "AuditEvent", cut, purgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("audit: purge: %w", err)
		}
		if n == 0 {
			return total, nil
		}
	}
}
