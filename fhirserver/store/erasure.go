package store

import (
	"context"
	"fmt"
)

// Sequencer issues the values of named counters, for identifiers the
// server assigns itself (e.g. the PT-<n> of the platform's patients).
//
// NextValue returns the next value of the counter name: 1 for the first
// call, then 2, 3 … Every value is returned at most once, across
// concurrent callers, restarts, and processes sharing the store (several
// Kiln instances on one MongoDB). Gaps are allowed: a value taken by a
// request that later fails is never handed out again. A counter is
// independent of the resources and of Transact: a value is taken for good
// even if the transaction that uses it rolls back, so call NextValue
// before Transact, not from inside its fn (a single-writer backend would
// wait on itself). name must be non-empty.
type Sequencer interface {
	NextValue(ctx context.Context, name string) (int64, error)
}

// Rewriter replaces stored versions in place, for the right to erasure:
// the one operation that changes a version once written (history is
// otherwise append-only).
//
// Rewrite replaces the body of the existing version w.Version of
// w.Type/w.ID with w.Body. The version keeps its LastUpdated, Method and
// place in history (w.LastUpdated and w.Method are ignored); the caller
// writes id and meta into w.Body as they were. When that version is the
// resource's current one, its search index rows are replaced by w.Index in
// the same atomic step, with Put's semantics (nil: no rows); the rows of
// an older version are not kept, so w.Index is ignored then.
//
// Rewrite reports ErrNotFound when the version does not exist. A tombstone
// cannot be rewritten, and w must carry a body and no Deleted flag: those
// are caller bugs, plain errors (see CheckRewrite).
//
// Backends implement Rewriter on their Store and on the Tx that Transact
// passes to fn, so that an erasure can rewrite every version of a resource
// atomically: callers type-assert st.(Rewriter) or tx.(Rewriter). A Store
// without transactions applies each Rewrite on its own.
type Rewriter interface {
	Rewrite(ctx context.Context, w Write) error
}

// CheckRewrite rejects rewrites no backend applies: caller bugs, so the
// error matches none of the sentinels.
func (w Write) CheckRewrite() error {
	why := w.identityProblem()
	switch {
	case why != "":
	case w.Deleted:
		why = "a rewrite cannot make a tombstone"
	case len(w.Body) == 0:
		why = "body is required"
	default:
		return nil
	}
	return fmt.Errorf("invalid rewrite of %s/%s version %d: %s", w.Type, w.ID, w.Version, why)
}

// TombstoneRewrite is the error a backend returns for a Rewrite aimed at
// a tombstone: a plain error (a caller bug), matching none of the
// sentinels.
func TombstoneRewrite(w Write) error {
	return fmt.Errorf("cannot rewrite %s/%s version %d: it is a deletion (tombstone)", w.Type, w.ID, w.Version)
}

// CheckSequenceName rejects an empty counter name.
func CheckSequenceName(name string) error {
	if name == "" {
		return fmt.Errorf("store: a sequence name is required")
	}
	return nil
}

// Forgetter is a store whose files can keep what a commit replaced (a
// write-ahead log's frames, free space inside pages) until later writes
// overwrite it. Forget makes the content that committed writes replaced
// or deleted unrecoverable from the store's own files, or fails: an
// erasure calls it after it commits, and claims the erasure done only
// when it succeeds. Safe to call again (a retried erasure does).
// Stores that never keep such copies, or cannot remove them (a database
// server's own files), do not implement it.
type Forgetter interface {
	Forget(ctx context.Context) error
}
