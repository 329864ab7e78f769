// Package store defines the persistence contract of Kiln's FHIR service.
//
// A backend keeps every version of every resource exactly once, as the JSON
// bytes that will be served. The FHIR layer decides ids, version numbers and
// timestamps and writes them into the JSON before calling Put; the backend's
// job is to apply each write as a compare-and-swap on the current version, so
// no update is ever lost, and to answer reads and history queries.
//
// The contract is small on purpose: a MongoDB backend implements it with
// single-document atomic operations (a filter on the expected version) plus
// multi-document transactions where the deployment offers them.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// Errors every backend reports through errors.Is.
var (
	// ErrNotFound: no version of the resource (or of that version) exists.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: the resource's current version is not Write.Version-1.
	ErrConflict = errors.New("store: version conflict")
	// ErrTransactionsUnsupported: the deployment cannot run atomic
	// multi-write transactions (e.g. a standalone MongoDB).
	ErrTransactionsUnsupported = errors.New("store: transactions not supported by this deployment")
	// ErrBadCursor: a history cursor that this backend did not issue.
	ErrBadCursor = errors.New("store: invalid cursor")
)

// Method is the interaction that produced a version, as shown in history.
type Method string

const (
	MethodCreate Method = "POST"
	MethodUpdate Method = "PUT"
	MethodDelete Method = "DELETE"
	MethodPatch  Method = "PATCH"
)

// Version is one stored version of a resource.
type Version struct {
	Type        string
	ID          string
	Version     int64 // 1, 2, 3 … with no gaps per resource
	LastUpdated time.Time
	Method      Method
	Deleted     bool   // a tombstone: Body is nil
	Body        []byte // the exact JSON served, with id and meta already written in
}

// Write is one new version. The backend applies it only if the resource's
// current version is Version-1 (0 meaning the resource does not exist yet),
// and reports ErrConflict otherwise.
//
// Callers guarantee that LastUpdated never decreases across the versions of
// one resource (the _at query relies on it) and is in UTC; backends keep at
// least millisecond precision. A malformed Write (no Type or ID, a tombstone
// with a body) is a programming error and fails with a plain error.
type Write struct {
	Type        string
	ID          string
	Version     int64
	LastUpdated time.Time
	Method      Method
	Deleted     bool
	Body        []byte
	// Index holds the search index rows of Body; the backend replaces the
	// resource's previous rows with them in the same atomic step as the
	// version, so a search never sees a version without its rows or rows
	// of a version that is no longer current. Nil (and every tombstone)
	// leaves the resource with no rows: no clause matches it, though a
	// search without clauses lists it (tombstones never).
	Index *search.Rows
}

// HistoryQuery selects versions for the history interactions. Type and ID
// empty: the whole system; ID empty: one type; both set: one resource.
type HistoryQuery struct {
	Type string
	ID   string
	// Since keeps versions with LastUpdated >= Since (zero: no bound).
	Since time.Time
	// AtLow/AtHigh (zero: unused) keep versions that were current at some
	// moment in [AtLow, AtHigh): written before AtHigh and not superseded by a
	// later version of the same resource at or before AtLow.
	AtLow, AtHigh time.Time
	// Count is the page size; must be > 0.
	Count int
	// MaxBytes (0: no bound) ends a page early once the bodies of its
	// versions add up to at least MaxBytes, so a page of large resources
	// stays bounded in memory. A page always holds at least one version.
	MaxBytes int
	// Cursor continues a previous page (empty: first page).
	Cursor string
}

// HistoryPage is one page of history, newest version first.
type HistoryPage struct {
	Versions []*Version
	// Next is an opaque keyset cursor for the following page ("" at the end).
	Next string
}

// Reader answers reads.
type Reader interface {
	// Read returns the current version, which may be a tombstone
	// (Deleted=true). ErrNotFound when the resource never existed.
	Read(ctx context.Context, typ, id string) (*Version, error)
	// VRead returns one version (a tombstone too). ErrNotFound when absent.
	VRead(ctx context.Context, typ, id string, version int64) (*Version, error)
	// History pages through versions, newest first. The order is stable
	// while other clients write: new versions never shift later pages.
	History(ctx context.Context, q HistoryQuery) (*HistoryPage, error)
}

// SearchPage is one page of search results.
type SearchPage struct {
	// Matches are the current versions of the matching resources, in the
	// query's order (search.mode match).
	Matches []*Version
	// Included are the resources added by _include and _revinclude, each
	// once and none that is also in Matches (search.mode include).
	Included []*Version
	// Next and Prev are opaque keyset cursors for the following and the
	// preceding page ("" when there is none). They stay valid while other
	// clients write: a resource created after the first page either shows
	// up on a later page or not at all, and no match is returned twice.
	Next, Prev string
	// Total is the number of matches when the query asked for it
	// (TotalAccurate, or TotalEstimate where an estimate is cheap), else -1.
	Total int64
}

// Searcher answers searches. Deleted resources never match.
type Searcher interface {
	// Search runs q. A malformed or foreign q.Cursor is ErrBadCursor.
	Search(ctx context.Context, q *search.Query) (*SearchPage, error)
}

// IndexUpdate replaces the index rows of one resource's current version.
type IndexUpdate struct {
	Type, ID string
	Version  int64 // the version the rows were extracted from
	Rows     *search.Rows
}

// Indexer rebuilds index rows without writing new versions: a reindex
// after a search parameter was added.
type Indexer interface {
	// Reindex applies the updates atomically. An update whose resource's
	// current version is no longer Version is skipped (its rows were
	// rewritten with that newer version); applied counts the others.
	Reindex(ctx context.Context, updates []IndexUpdate) (applied int, err error)
}

// Writer applies new versions.
type Writer interface {
	// Put appends w as the new current version, atomically with the
	// compare-and-swap on the previous version.
	Put(ctx context.Context, w Write) error
}

// Tx is the view of the store inside a transaction.
type Tx interface {
	Reader
	Searcher
	Writer
}

// Store is a backend. Every method honours ctx: a cancelled call returns an
// error matching ctx.Err() and writes nothing.
type Store interface {
	Reader
	Searcher
	Writer
	// Transact runs fn atomically: all of its writes land or none do. If fn
	// returns an error the transaction is rolled back and that error is
	// returned. Backends without transactions return
	// ErrTransactionsUnsupported without calling fn. Inside fn only tx may
	// be used: a single-writer backend would wait on itself otherwise.
	Transact(ctx context.Context, fn func(tx Tx) error) error
	// Ping reports whether the store can serve requests (readiness).
	Ping(ctx context.Context) error
	// Close releases the store; in-flight calls should be finished first.
	Close() error
}

// Check rejects writes no backend can store faithfully. These are caller
// bugs, not conflicts, so the error matches none of the sentinels above.
func (w Write) Check() error {
	why := w.identityProblem()
	switch {
	case why != "":
	case w.LastUpdated.IsZero():
		why = "LastUpdated is required"
	case w.LastUpdated.Year() < 1 || w.LastUpdated.Year() > 9999:
		why = fmt.Sprintf("LastUpdated %v out of range", w.LastUpdated)
	case w.Deleted && len(w.Body) != 0:
		why = "a tombstone has no body"
	case !w.Deleted && len(w.Body) == 0:
		why = "body is required"
	default:
		return nil
	}
	return fmt.Errorf("invalid write of %s/%s version %d: %s", w.Type, w.ID, w.Version, why)
}

// identityProblem says what is wrong with the version a write names, ""
// if nothing: every write and rewrite names one.
func (w Write) identityProblem() string {
	switch {
	case w.Type == "" || w.ID == "":
		return "type and id are required"
	case w.Version < 1:
		return "version must be >= 1"
	}
	return ""
}

// HistoryBounds are a HistoryQuery's time filters in unix microseconds, the
// precision backends keep, each rounded so that its comparison stays exact
// on stored values: lu >= Since ⇔ lu >= ceil(Since), lu < AtHigh ⇔
// lu < ceil(AtHigh), next.lu <= AtLow ⇔ next.lu <= floor(AtLow). An absent
// filter is the extreme value (AtLow: 0, unused).
func (q HistoryQuery) HistoryBounds() (since, atLow, atHigh int64) {
	since, atHigh = math.MinInt64, math.MaxInt64
	if !q.Since.IsZero() {
		since = microsCeil(q.Since)
	}
	if !q.AtLow.IsZero() {
		atLow = q.AtLow.UnixMicro()
	}
	if !q.AtHigh.IsZero() {
		atHigh = microsCeil(q.AtHigh)
	}
	return since, atLow, atHigh
}

// microsCeil rounds t up to a whole microsecond (UnixMicro rounds down:
// the nanoseconds of a time.Time are never negative).
func microsCeil(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

// Purger removes resources for good, for retention in an append-only
// partition (the audit trail): every version of the resources of typ
// whose current version was last updated before before, at most limit of
// them per call. It returns how many resources it removed. Nothing else
// ever deletes a version.
type Purger interface {
	Purge(ctx context.Context, typ string, before time.Time, limit int) (int, error)
}
