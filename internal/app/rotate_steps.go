package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
	"github.com/kiln-fhir/kiln/profiles"
)

// verifyRounds bounds the verification passes of a data rotation: a
// pass that finds values still under old keys (writes that outlived the
// bounds) re-wraps them, waits the write bound and looks again; after
// this many rounds the old keys are kept.
const verifyRounds = 3

// run carries the job from its phase to the end.
func (r *rotation) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch r.job.Phase {
		case PhaseStage:
			err = r.stage(ctx)
		case PhaseStaged:
			err = r.promote(ctx)
		case PhasePromoted:
			err = r.settle(ctx)
		case PhaseRewrap, PhaseVerify:
			err = r.rewrapBodies(ctx)
		case PhaseRewrapRecords, PhaseVerifyRecords:
			err = r.rewrapRecords(ctx)
		case PhaseRebuild:
			err = r.rebuild(ctx)
		case PhaseRetire:
			err = r.retire(ctx)
		case PhaseDone:
			return nil
		default:
			return fmt.Errorf("the %s partition's rotation record is in an unknown phase %q", r.job.Partition, r.job.Phase)
		}
		if err != nil {
			return err
		}
	}
}

// changeKeys updates the keys record and loads it into this command's
// own sealed store at once; it returns the record's bounds.
func (r *rotation) changeKeys(ctx context.Context, change func(k *partitionKeys) error) (view, write time.Duration, err error) {
	keys, err := updatePartitionKeys(ctx, r.s.inner, r.a.master, r.job.Partition, change)
	if err != nil {
		return 0, 0, err
	}
	view, write = keys.viewTTL(), keys.writeTTL()
	keys.wipe()
	if err := r.s.keys.Reload(ctx); err != nil {
		return 0, 0, err
	}
	return view, write, nil
}

// bounds reads the keys record's bounds.
func (r *rotation) bounds(ctx context.Context) (view, write time.Duration, err error) {
	keys, _, err := readPartitionKeys(ctx, r.s.inner, r.a.master, r.job.Partition)
	if err != nil {
		return 0, 0, err
	}
	defer keys.wipe()
	return keys.viewTTL(), keys.writeTTL(), nil
}

// propagation is how long a change of the keys record takes to reach
// every server: its view TTL, and a third more for the clocks' drift and
// the record's read.
func propagation(view time.Duration) time.Duration { return view + view/3 }

// stage adds the target key to its ring, staged: it opens and is looked
// up, but seals and tags nothing yet.
func (r *rotation) stage(ctx context.Context) error {
	j := r.job
	_, _, err := r.changeKeys(ctx, func(k *partitionKeys) error {
		k.DataCurrent, k.BlindCurrent = k.dataCurrent(), k.blindCurrent() // a version 1 record: the highest was current
		ring, current := ringOf(k, j.Ring)
		if _, ok := ring[j.Target]; ok && current < j.Target {
			return nil // staged before a crash
		}
		if newestID(ring) >= j.Target || current >= j.Target {
			return fmt.Errorf("the %s partition's %s ring already has key %d or newer: another rotation changed it", j.Partition, j.Ring, j.Target)
		}
		ring[j.Target] = randomKey()
		return nil
	})
	if err != nil {
		return err
	}
	return r.enter(ctx, PhaseStaged, 0)
}

// promote makes the staged key current once every server has loaded it:
// it waits the propagation first (again, in full, when a command carries
// the job on here).
func (r *rotation) promote(ctx context.Context) error {
	j := r.job
	view, _, err := r.bounds(ctx)
	if err != nil {
		return err
	}
	if err := r.wait(ctx, propagation(view)); err != nil {
		return err
	}
	_, _, err = r.changeKeys(ctx, func(k *partitionKeys) error {
		ring, _ := ringOf(k, j.Ring)
		if _, ok := ring[j.Target]; !ok {
			return fmt.Errorf("the %s partition's %s ring lost the staged key %d: another command changed it", j.Partition, j.Ring, j.Target)
		}
		if j.Ring == RingBlind {
			k.BlindCurrent = j.Target
		} else {
			k.DataCurrent = j.Target
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.enter(ctx, PhasePromoted, 0)
}

// settle waits until no server works with the keys from before the
// promotion (the view TTL) and every write sealed or tagged under the
// old key has landed (the write TTL); what the pass then finds under
// old keys stays found.
func (r *rotation) settle(ctx context.Context) error {
	view, write, err := r.bounds(ctx)
	if err != nil {
		return err
	}
	if err := r.wait(ctx, propagation(view)+write); err != nil {
		return err
	}
	if r.job.Ring == RingBlind {
		r.job.UpdatedBefore = r.now()
		total, err := r.countResources(ctx)
		if err != nil {
			return err
		}
		return r.enter(ctx, PhaseRebuild, total)
	}
	total, err := r.countValues(ctx)
	if err != nil {
		return err
	}
	return r.enter(ctx, PhaseRewrap, total)
}

// dataRing is the data ring as the keys record has it, which must seal
// under the target.
func (r *rotation) dataRing(ctx context.Context) (*crypt.Keyring, error) {
	keys, _, err := readPartitionKeys(ctx, r.s.inner, r.a.master, r.job.Partition)
	if err != nil {
		return nil, err
	}
	defer keys.wipe()
	if keys.dataCurrent() != r.job.Target {
		return nil, fmt.Errorf("the %s partition's data key %d is current, not %d as the rotation made it: another command changed the keys", r.job.Partition, keys.dataCurrent(), r.job.Target)
	}
	return crypt.NewKeyringWithCurrent(keys.Data, keys.dataCurrent())
}

// notSealedHere are the records of the store under the seal that the
// sealed store did not seal: the keys record and the job record.
func notSealedHere(kind string) bool { return kind == partitionKeysKind || kind == rotationJobKind }

// countValues is the total of a re-wrap pass: every version, and every
// record the sealed store sealed.
func (r *rotation) countValues(ctx context.Context) (int64, error) {
	br, ok := r.s.inner.(store.BodyRewriter)
	if !ok {
		return 0, fmt.Errorf("the %s partition's store cannot rewrite values in place (store.BodyRewriter), which a data-key rotation needs", r.job.Partition)
	}
	n, err := br.CountVersions(ctx)
	if err != nil {
		return 0, err
	}
	kinds, err := br.RecordKinds(ctx)
	if err != nil {
		return 0, err
	}
	for _, kind := range kinds {
		if notSealedHere(kind) {
			continue
		}
		list, err := r.s.inner.ListRecords(ctx, kind)
		if err != nil {
			return 0, err
		}
		n += int64(len(list))
	}
	return n, nil
}

// rewrapBodies pages through every version of the store under the seal,
// re-wrapping what is under an old key (PhaseRewrap), or counting and
// re-wrapping what a previous pass left (PhaseVerify).
func (r *rotation) rewrapBodies(ctx context.Context) error {
	ring, err := r.dataRing(ctx)
	if err != nil {
		return err
	}
	j := r.job
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := sealed.RewrapBodies(ctx, r.s.inner, ring, j.Cursor, r.opts.Page)
		if errors.Is(err, store.ErrBadCursor) && j.Cursor != "" {
			// A cursor the store no longer takes (a purge, an upgrade):
			// the pass starts again, which re-wraps nothing twice.
			j.Cursor, j.Done = "", 0
			continue
		}
		if err != nil {
			return err
		}
		j.Cursor = page.Next
		j.Rewrapped += int64(page.Rewrapped)
		if j.Phase == PhaseVerify {
			j.Found += int64(page.Rewrapped + page.Changed)
		}
		if page.Next == "" {
			next := PhaseRewrapRecords
			if j.Phase == PhaseVerify {
				next = PhaseVerifyRecords
			}
			j.Phase = next
		}
		if err := r.stepped(ctx, page.Seen); err != nil {
			return err
		}
		if page.Next == "" {
			return nil
		}
	}
}

// rewrapRecords re-wraps the records (one step: they are few), then
// moves to the verification, or decides on it.
func (r *rotation) rewrapRecords(ctx context.Context) error {
	ring, err := r.dataRing(ctx)
	if err != nil {
		return err
	}
	j := r.job
	done, err := sealed.RewrapRecords(ctx, r.s.inner, ring, notSealedHere)
	if err != nil {
		return err
	}
	j.Rewrapped += int64(done.Rewrapped)
	verifying := j.Phase == PhaseVerifyRecords
	if verifying {
		j.Found += int64(done.Rewrapped + done.Changed)
	}
	if err := r.stepped(ctx, done.Seen); err != nil {
		return err
	}
	switch {
	case !verifying || j.Found > 0 && j.Round < verifyRounds:
		if verifying {
			// Writes outlived the bounds: let them land, and look again.
			_, write, err := r.bounds(ctx)
			if err != nil {
				return err
			}
			if err := r.wait(ctx, write); err != nil {
				return err
			}
		}
		total, err := r.countValues(ctx)
		if err != nil {
			return err
		}
		j.Round++
		j.Found = 0
		return r.enter(ctx, PhaseVerify, total)
	case j.Found == 0:
		return r.enter(ctx, PhaseRetire, 0)
	default:
		// Values kept turning up under old keys: keep the keys they
		// need, and say so.
		keys, _, err := readPartitionKeys(ctx, r.s.inner, r.a.master, j.Partition)
		if err != nil {
			return err
		}
		j.Kept = slices.DeleteFunc(ringIDs(keys.Data), func(id uint32) bool { return id == j.Target })
		keys.wipe()
		j.Finished = r.now()
		return r.enter(ctx, PhaseDone, 0)
	}
}

// countResources is the total of a rebuild: the current resources last
// updated before its bound.
func (r *rotation) countResources(ctx context.Context) (int64, error) {
	var n int64
	for _, typ := range resourceTypes() {
		q := &search.Query{Types: []string{typ}, Count: 1, Total: search.TotalAccurate}
		if before := r.job.UpdatedBefore; !before.IsZero() {
			us := before.UnixMicro()
			q.Where = []search.Clause{{Param: "_lastUpdated", Any: []search.Match{{Op: search.OpDate, Param: "_lastUpdated", Cmp: search.CmpLt, Low: us, High: us + 1}}}}
		}
		page, err := r.s.Store.Search(ctx, q)
		if err != nil {
			return 0, err
		}
		n += max(page.Total, 0)
	}
	return n, nil
}

func resourceTypes() []string {
	types := profiles.ResourceTypes()
	slices.Sort(types)
	return types
}

// rebuild reindexes every current resource, type by type, through the
// sealed store, which tags under the new key (this command's copy of the
// keys was loaded at the promotion).
func (r *rotation) rebuild(ctx context.Context) error {
	j := r.job
	if cur := r.s.keys.Rings().Blind.CurrentID(); cur != j.Target {
		if err := r.s.keys.Reload(ctx); err != nil {
			return err
		}
		if cur = r.s.keys.Rings().Blind.CurrentID(); cur != j.Target {
			return fmt.Errorf("the %s partition's blind key %d is current, not %d as the rotation made it: another command changed the keys", j.Partition, cur, j.Target)
		}
	}
	types := resourceTypes()
	i := 0
	if j.CursorType != "" {
		i = slices.Index(types, j.CursorType)
		if i < 0 {
			return fmt.Errorf("the %s partition's rotation record names an unknown resource type", j.Partition)
		}
	}
	for ; i < len(types); i++ {
		if j.CursorType != types[i] {
			j.CursorType, j.Cursor = types[i], ""
		}
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			step, err := r.s.FHIR.ReindexPage(ctx, types[i], j.Cursor, r.opts.Page, j.UpdatedBefore)
			if errors.Is(err, store.ErrBadCursor) && j.Cursor != "" {
				j.Cursor = "" // the type's pass starts again
				continue
			}
			if err != nil {
				return err
			}
			j.Cursor = step.Next
			if step.Seen == 0 && step.Next == "" {
				break // an empty type: not worth a write of the record
			}
			if err := r.stepped(ctx, step.Seen); err != nil {
				return err
			}
			if step.Next == "" {
				break
			}
		}
	}
	return r.enter(ctx, PhaseRetire, 0)
}

// retire removes the old keys from the ring: for the data ring after a
// verification found nothing under them, for the blind ring after the
// rebuild, which left no row tagged under them.
func (r *rotation) retire(ctx context.Context) error {
	j := r.job
	var retired []uint32
	_, _, err := r.changeKeys(ctx, func(k *partitionKeys) error {
		ring, current := ringOf(k, j.Ring)
		if current != j.Target {
			return fmt.Errorf("the %s partition's %s key %d is current, not %d as the rotation made it: another command changed the keys", j.Partition, j.Ring, current, j.Target)
		}
		retired = retired[:0]
		for _, id := range slices.Sorted(maps.Keys(ring)) {
			if id != j.Target {
				clear(ring[id])
				delete(ring, id)
				retired = append(retired, id)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The keys record as it was, and the values as they were, may stay in
	// the store's own files (SQLite's write-ahead log) until later writes
	// replace them: clear them now where the store can.
	if f, ok := r.s.inner.(store.Forgetter); ok {
		if err := f.Forget(ctx); err != nil {
			r.a.logger.Warn("the retired keys may stay in the store's write-ahead log until its next checkpoint", "partition", j.Partition, "err", err)
		}
	}
	j.Retired, j.Finished = retired, r.now()
	return r.enter(ctx, PhaseDone, 0)
}
