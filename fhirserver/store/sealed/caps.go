package sealed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

//go:generate go run gen_caps.go

// The optional capabilities, in the order of store.Capabilities: bit i of
// a capability mask is capabilityNames[i] (a test holds the two lists
// together). Each has a small type below that implements it on a core;
// combos (caps_gen.go) embeds those of a mask beside the core.
var capabilityNames = [...]string{"Indexer", "Records", "Sequencer", "Rewriter", "Forgetter", "Purger", "SecretKeeper", "BodyRewriter"}

// capabilityMask is the set of optional capabilities s implements.
func capabilityMask(s store.Store) int {
	m := 0
	for i, has := range [...]bool{
		is[store.Indexer](s), is[store.Records](s), is[store.Sequencer](s), is[store.Rewriter](s),
		is[store.Forgetter](s), is[store.Purger](s), is[store.SecretKeeper](s), is[store.BodyRewriter](s),
	} {
		if has {
			m |= 1 << i
		}
	}
	return m
}

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// indexer blinds the rows of a reindex as Put does.
type indexer struct{ c *core }

func (x indexer) Reindex(ctx context.Context, updates []store.IndexUpdate) (int, error) {
	keys, err := x.c.p.keys.fresh(ctx)
	if err != nil {
		return 0, err
	}
	blinded := make([]store.IndexUpdate, len(updates))
	for i, u := range updates {
		u.Rows = x.c.p.blindRows(keys.Blind, u.Rows)
		blinded[i] = u
	}
	return x.c.inner.(store.Indexer).Reindex(ctx, blinded)
}

// records seals every record's value, bound to the partition, kind, id
// and record version. Kind and id stay readable: callers key records by
// names and hashes, never by personal data (the idempotency records key
// by a SHA-256 and hold the answer, which may hold personal data).
type records struct{ c *core }

func (x records) recordAD(kind, id string, version int64) []byte {
	return x.c.p.additionalData(adRecord, kind, id, version)
}

func (x records) open(ctx context.Context, r *store.Record) (*store.Record, error) {
	plain, err := x.c.p.keys.openWith(ctx, r.Value, x.recordAD(r.Kind, r.ID, r.Version))
	if err != nil {
		return nil, fmt.Errorf("sealed store: record %s/%s version %d does not open: %w", r.Kind, r.ID, r.Version, err)
	}
	out := *r
	out.Value = plain
	return &out, nil
}

func (x records) GetRecord(ctx context.Context, kind, id string) (*store.Record, error) {
	r, err := x.c.inner.(store.Records).GetRecord(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	return x.open(ctx, r)
}

func (x records) PutRecord(ctx context.Context, r store.Record) error {
	// Checked before sealing: a sealed empty value is not empty.
	if err := r.Check(); err != nil {
		return fmt.Errorf("sealed store: %w", err)
	}
	keys, err := x.c.p.keys.fresh(ctx)
	if err != nil {
		return err
	}
	sealed, err := keys.Data.Seal(r.Value, x.recordAD(r.Kind, r.ID, r.Version))
	if err != nil {
		return fmt.Errorf("sealed store: seal record %s/%s: %w", r.Kind, r.ID, err)
	}
	r.Value = sealed
	return x.c.inner.(store.Records).PutRecord(ctx, r)
}

func (x records) ListRecords(ctx context.Context, kind string) ([]*store.Record, error) {
	rs, err := x.c.inner.(store.Records).ListRecords(ctx, kind)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Record, len(rs))
	for i, r := range rs {
		if out[i], err = x.open(ctx, r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (x records) DeleteRecord(ctx context.Context, kind, id string) error {
	return x.c.inner.(store.Records).DeleteRecord(ctx, kind, id)
}

// sequencer passes through: a counter holds a name and a number.
type sequencer struct{ c *core }

func (x sequencer) NextValue(ctx context.Context, name string) (int64, error) {
	return x.c.inner.(store.Sequencer).NextValue(ctx, name)
}

// rewriter seals the rewritten body under the version it replaces.
type rewriter struct{ c *core }

func (x rewriter) Rewrite(ctx context.Context, w store.Write) error {
	return x.c.p.rewrite(ctx, x.c.inner.(store.Rewriter), w)
}

// forgetter passes through: what the inner store forgets was sealed.
type forgetter struct{ c *core }

func (x forgetter) Forget(ctx context.Context) error {
	return x.c.inner.(store.Forgetter).Forget(ctx)
}

// purger passes through: it selects by type and time.
type purger struct{ c *core }

func (x purger) Purge(ctx context.Context, typ string, before time.Time, limit int) (int, error) {
	return x.c.inner.(store.Purger).Purge(ctx, typ, before, limit)
}

// secretKeeper passes through: the server's own secrets (the cursor
// key) are kept by the inner store as they are in every partition.
type secretKeeper struct{ c *core }

func (x secretKeeper) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	return x.c.inner.(store.SecretKeeper).Secret(ctx, name, size)
}

// bodyRewriter replaces plain bytes by plain bytes, as the store is seen
// through the seal: a body (or record value) that still opens to Old is
// replaced by New sealed under the current key and bound to its place,
// through the inner store's compare-and-swap on the sealed bytes it read.
// A key rotation does not come this way: it re-wraps the sealed bytes of
// the inner store itself (Rewrap).
type bodyRewriter struct{ c *core }

func (x bodyRewriter) RewriteBodies(ctx context.Context, rs []store.Replacement) (int, error) {
	if err := checkReplacements(rs); err != nil {
		return 0, err
	}
	keys, err := x.c.p.keys.fresh(ctx)
	if err != nil {
		return 0, err
	}
	raw := make([]store.Replacement, 0, len(rs))
	for _, r := range rs {
		v, err := x.c.inner.VRead(ctx, r.Type, r.ID, r.Version)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if v.Deleted {
			continue
		}
		opened, err := x.c.p.open(ctx, v)
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(opened.Body, r.Old) {
			continue
		}
		sealed, err := keys.Data.Seal(r.New, x.c.p.bodyAD(r.Type, r.ID, r.Version))
		if err != nil {
			return 0, fmt.Errorf("sealed store: seal %s/%s version %d: %w", r.Type, r.ID, r.Version, err)
		}
		raw = append(raw, store.Replacement{Type: r.Type, ID: r.ID, Version: r.Version, Old: v.Body, New: sealed})
	}
	return x.c.inner.(store.BodyRewriter).RewriteBodies(ctx, raw)
}

func (x bodyRewriter) RewriteRecordValues(ctx context.Context, rs []store.Replacement) (int, error) {
	if err := checkReplacements(rs); err != nil {
		return 0, err
	}
	keys, err := x.c.p.keys.fresh(ctx)
	if err != nil {
		return 0, err
	}
	recs := records(x)
	raw := make([]store.Replacement, 0, len(rs))
	for _, r := range rs {
		got, err := x.c.inner.(store.Records).GetRecord(ctx, r.Type, r.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if got.Version != r.Version {
			continue
		}
		opened, err := recs.open(ctx, got)
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(opened.Value, r.Old) {
			continue
		}
		sealed, err := keys.Data.Seal(r.New, recs.recordAD(r.Type, r.ID, r.Version))
		if err != nil {
			return 0, fmt.Errorf("sealed store: seal record %s/%s: %w", r.Type, r.ID, err)
		}
		raw = append(raw, store.Replacement{Type: r.Type, ID: r.ID, Version: r.Version, Old: got.Value, New: sealed})
	}
	return x.c.inner.(store.BodyRewriter).RewriteRecordValues(ctx, raw)
}

// RecordKinds passes through: kinds are stored in plain.
func (x bodyRewriter) RecordKinds(ctx context.Context) ([]string, error) {
	return x.c.inner.(store.BodyRewriter).RecordKinds(ctx)
}

// CountVersions passes through.
func (x bodyRewriter) CountVersions(ctx context.Context) (int64, error) {
	return x.c.inner.(store.BodyRewriter).CountVersions(ctx)
}

func checkReplacements(rs []store.Replacement) error {
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return fmt.Errorf("sealed store: %w", err)
		}
	}
	return nil
}
