package sealed

import (
	"context"
	"errors"
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// The re-wrap of a data-key rotation works on the store under the seal
// (the inner store given to New), whose bodies and record values are the
// sealed bytes: each value under a key other than the ring's current one
// gets its data key wrapped again (crypt.Keyring.Rewrap: neither the
// plaintext nor the additional data is needed, and the ciphertext does
// not change) and is written back in place through store.BodyRewriter,
// a compare-and-swap on the bytes read, so a value that a server changed
// meanwhile (sealed under the key it had) is left as that server wrote
// it. The job that pages through the store, remembers where it is and
// changes the partition's keys lives with the keys' owner.

// rewrapPageBytes bounds the bodies one page holds in memory.
const rewrapPageBytes = 8 << 20

// RewrapPage is what one page of RewrapBodies did.
type RewrapPage struct {
	// Next continues with the following page ("" when every version was
	// visited).
	Next string
	// Seen counts the versions of the page, tombstones included.
	Seen int
	// Rewrapped counts the values moved to the ring's current key.
	Rewrapped int
	// Changed counts the values that were under another key when read
	// and had been replaced when written back: a server rewrote them
	// meanwhile (an erasure), under the key it had.
	Changed int
}

// bodyRewriterOf is inner as a store.BodyRewriter, which a rotation
// needs.
func bodyRewriterOf(inner store.Store) (store.BodyRewriter, error) {
	b, ok := inner.(store.BodyRewriter)
	if !ok {
		return nil, fmt.Errorf("sealed: the store (%T) cannot rewrite values in place (store.BodyRewriter), which a key rotation needs", inner)
	}
	return b, nil
}

// RewrapBodies re-wraps under ring's current key the bodies of one page
// of inner's versions (every resource's, history included, newest
// first, at most count of them) from cursor ("" for the first page). A
// body that is no sealed value, or under a key ring lacks, is an error
// that names the version (never its bytes).
func RewrapBodies(ctx context.Context, inner store.Store, ring *crypt.Keyring, cursor string, count int) (RewrapPage, error) {
	br, err := bodyRewriterOf(inner)
	if err != nil {
		return RewrapPage{}, err
	}
	page, err := inner.History(ctx, store.HistoryQuery{Count: count, MaxBytes: rewrapPageBytes, Cursor: cursor})
	if err != nil {
		return RewrapPage{}, err
	}
	out := RewrapPage{Next: page.Next, Seen: len(page.Versions)}
	var rs []store.Replacement
	for _, v := range page.Versions {
		if v.Deleted {
			continue
		}
		moved, err := rewrapped(ring, v.Body)
		if err != nil {
			return RewrapPage{}, fmt.Errorf("sealed: %s/%s version %d: %w", v.Type, v.ID, v.Version, err)
		}
		if moved != nil {
			rs = append(rs, store.Replacement{Type: v.Type, ID: v.ID, Version: v.Version, Old: v.Body, New: moved})
		}
	}
	if len(rs) == 0 {
		return out, nil
	}
	n, err := br.RewriteBodies(ctx, rs)
	if err != nil {
		return RewrapPage{}, err
	}
	out.Rewrapped, out.Changed = n, len(rs)-n
	return out, nil
}

// rewrapped is sealed re-wrapped under ring's current key, nil when it is
// under that key already.
func rewrapped(ring *crypt.Keyring, sealed []byte) ([]byte, error) {
	kid, err := crypt.SealedKeyID(sealed)
	if err != nil {
		return nil, err
	}
	if kid == ring.CurrentID() {
		return nil, nil
	}
	moved, err := ring.Rewrap(sealed)
	if errors.Is(err, crypt.ErrUnknownKey) {
		return nil, fmt.Errorf("sealed under data key %d, which the ring lacks: %w", kid, err)
	}
	return moved, err
}

// RecordsRewrap is what RewrapRecords did.
type RecordsRewrap struct {
	// Seen counts the records visited; Rewrapped and Changed are as in
	// RewrapPage.
	Seen, Rewrapped, Changed int
}

// recordBatch is how many record values one write replaces.
const recordBatch = 500

// RewrapRecords re-wraps under ring's current key the values of every
// record of inner but those of the kinds skip names (records the sealed
// store did not seal: the keys' owner keeps its own beside them).
func RewrapRecords(ctx context.Context, inner store.Store, ring *crypt.Keyring, skip func(kind string) bool) (RecordsRewrap, error) {
	var out RecordsRewrap
	br, err := bodyRewriterOf(inner)
	if err != nil {
		return out, err
	}
	rec, ok := inner.(store.Records)
	if !ok {
		return out, nil // no records, none to re-wrap
	}
	kinds, err := br.RecordKinds(ctx)
	if err != nil {
		return out, err
	}
	for _, kind := range kinds {
		if skip != nil && skip(kind) {
			continue
		}
		list, err := rec.ListRecords(ctx, kind)
		if err != nil {
			return out, err
		}
		out.Seen += len(list)
		var rs []store.Replacement
		flush := func() error {
			if len(rs) == 0 {
				return nil
			}
			n, err := br.RewriteRecordValues(ctx, rs)
			if err != nil {
				return err
			}
			out.Rewrapped += n
			out.Changed += len(rs) - n
			rs = rs[:0]
			return nil
		}
		for _, r := range list {
			moved, err := rewrapped(ring, r.Value)
			if err != nil {
				return out, fmt.Errorf("sealed: record %s/%s version %d: %w", r.Kind, r.ID, r.Version, err)
			}
			if moved == nil {
				continue
			}
			rs = append(rs, store.Replacement{Type: r.Kind, ID: r.ID, Version: r.Version, Old: r.Value, New: moved})
			if len(rs) == recordBatch {
				if err := flush(); err != nil {
					return out, err
				}
			}
		}
		if err := flush(); err != nil {
			return out, err
		}
	}
	return out, nil
}
