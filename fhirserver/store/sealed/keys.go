package sealed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
)

// Rings are the keys a sealed store works with at one moment.
type Rings struct {
	// Data seals and opens the bodies and record values; its current key
	// seals.
	Data *crypt.Keyring
	// Blind keys the blind index: its current key tags the rows written,
	// and a query looks for the tags of every key it holds.
	Blind *BlindKeys
	// MaxAge (0: no bound) is how long after they were loaded these rings
	// may still seal, tag or look up tags: an older copy is loaded again
	// first. Where the rings come from (a record that several servers
	// read) a rotation waits this long after each change, so that no
	// server still works with the copy from before it.
	MaxAge time.Duration
}

// Keys hold the rings of a sealed store while it serves, so that a key
// rotation reaches a running server without a restart. Fixed keys never
// change; loaded keys come from a load function that Reload calls again,
// and that the store itself calls:
//
//   - before it seals, tags or looks up tags with a copy older than its
//     MaxAge (the call waits for the load, and fails if it fails: keys
//     that may be stale never seal);
//   - when a stored value names a key id its copy lacks (another server
//     sealed it under a key this one has not loaded yet), at most once a
//     second, and then opens the value again.
//
// Safe for concurrent use.
type Keys struct {
	load func(context.Context) (Rings, error)
	cur  atomic.Pointer[keysView]
	mu   sync.Mutex // one load at a time
	// lastUnknown is when a value under an unknown key last made the
	// keys load (under mu).
	lastUnknown time.Time
	// now is the clock of the rings' age (time.Now; tests move it).
	now func() time.Time
}

// keysView is a copy of the rings and when it was loaded (the instant
// before the load began, so that its age is never understated).
type keysView struct {
	Rings
	loaded time.Time
}

// unknownKeyReloadEvery bounds the loads that values under unknown key
// ids cause: a value sealed under a key that no longer exists (or was
// never the partition's) would otherwise load the keys on every read.
const unknownKeyReloadEvery = time.Second

// FixedKeys are rings that never change (MaxAge is ignored).
func FixedKeys(r Rings) (*Keys, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	r.MaxAge = 0
	k := &Keys{now: time.Now}
	k.cur.Store(&keysView{Rings: r, loaded: k.now()})
	return k, nil
}

// LoadKeys loads the rings once through load, which Reload and the store
// call again (see Keys). load must not log or return key material.
func LoadKeys(ctx context.Context, load func(context.Context) (Rings, error)) (*Keys, error) {
	if load == nil {
		return nil, errors.New("sealed: no function to load the keys")
	}
	k := &Keys{load: load, now: time.Now}
	if err := k.Reload(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

func (r Rings) check() error {
	switch {
	case r.Data == nil:
		return errors.New("sealed: no data-key ring")
	case r.Blind == nil:
		return errors.New("sealed: no blind-index keys")
	case r.MaxAge < 0:
		return errors.New("sealed: negative MaxAge")
	}
	return nil
}

// Reload loads the rings again (nothing for fixed keys); until it
// returns, the store keeps working with the copy it has.
func (k *Keys) Reload(ctx context.Context) error {
	if k.load == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, err := k.reloadLocked(ctx)
	return err
}

func (k *Keys) reloadLocked(ctx context.Context) (*keysView, error) {
	start := k.now()
	r, err := k.load(ctx)
	if err == nil {
		err = r.check()
	}
	if err != nil {
		return nil, fmt.Errorf("sealed store: loading the partition's keys: %w", err)
	}
	v := &keysView{Rings: r, loaded: start}
	k.cur.Store(v)
	return v, nil
}

// Rings are the rings as the store has them now.
func (k *Keys) Rings() Rings { return k.cur.Load().Rings }

// fresh returns rings that may seal, tag and look up tags: the copy the
// store has, loaded again first if it is older than its MaxAge.
func (k *Keys) fresh(ctx context.Context) (*keysView, error) {
	v := k.cur.Load()
	if k.load == nil || v.MaxAge == 0 || k.now().Sub(v.loaded) <= v.MaxAge {
		return v, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if v = k.cur.Load(); v.MaxAge == 0 || k.now().Sub(v.loaded) <= v.MaxAge {
		return v, nil // another caller loaded them meanwhile
	}
	return k.reloadLocked(ctx)
}

// afterUnknownKey returns the rings to open again with after a value did
// not open with seen because it names a key id seen lacks: a newer copy
// (loaded now, or by another caller meanwhile), or nil when there is none
// to try.
func (k *Keys) afterUnknownKey(ctx context.Context, seen *keysView) *keysView {
	if k.load == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if v := k.cur.Load(); v != seen {
		return v
	}
	now := k.now()
	if !k.lastUnknown.IsZero() && now.Sub(k.lastUnknown) < unknownKeyReloadEvery {
		return nil
	}
	k.lastUnknown = now
	v, err := k.reloadLocked(ctx)
	if err != nil {
		return nil // the value's own error is the one to report
	}
	return v
}

// openWith opens a sealed value with the store's rings, loading them
// again once when the value names a key id they lack.
func (k *Keys) openWith(ctx context.Context, sealed, aad []byte) ([]byte, error) {
	v := k.cur.Load()
	plain, err := v.Data.Open(sealed, aad)
	if err == nil || !errors.Is(err, crypt.ErrUnknownKey) {
		return plain, err
	}
	if again := k.afterUnknownKey(ctx, v); again != nil {
		return again.Data.Open(sealed, aad)
	}
	return nil, err
}
