package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Record is a small document of the server's own state kept beside the
// resources: users, machine clients, signing keys, revoked token ids,
// refresh tokens. Kind and ID name it; Value is opaque to the store (JSON,
// or bytes sealed by fhirserver/crypt).
type Record struct {
	// Kind and ID are non-empty, e.g. "user", "alice@example.org"; Kind
	// never contains U+001F.
	Kind, ID string
	// Version is 1, 2, 3 … per record; PutRecord is a compare-and-swap on it.
	Version int64
	// Value is the record's bytes, stored and returned byte for byte;
	// never empty.
	Value []byte
	// Expires (zero: never) is when the record stops existing. An expired
	// record is invisible: GetRecord reports ErrNotFound, ListRecords
	// skips it and PutRecord treats it as absent. Backends may purge
	// expired records lazily. Backends keep microsecond precision
	// (rounded down) and return Expires in UTC.
	Expires time.Time
}

// Records is the server-state store. Every method honours ctx like the
// methods of Store. Backends judge expiry against their own clock
// (time.Now).
type Records interface {
	// GetRecord returns the record; ErrNotFound when it is absent or
	// expired.
	GetRecord(ctx context.Context, kind, id string) (*Record, error)
	// PutRecord stores r only if the record's current version is
	// r.Version-1 (0: absent or expired), and reports ErrConflict
	// otherwise. An invalid record (see Record.Check) fails with a plain
	// error.
	PutRecord(ctx context.Context, r Record) error
	// ListRecords returns the unexpired records of kind, ordered by ID
	// (byte order).
	ListRecords(ctx context.Context, kind string) ([]*Record, error)
	// DeleteRecord removes the record; deleting an absent one is no error.
	DeleteRecord(ctx context.Context, kind, id string) error
}

// Check rejects records no backend stores: caller bugs, so the error
// matches none of the sentinels. It never quotes the value, which may be
// a secret.
func (r Record) Check() error {
	var why string
	switch {
	case r.Kind == "" || r.ID == "":
		why = "kind and id are required"
	case strings.ContainsRune(r.Kind, '\x1f'):
		// A backend may key records by kind + U+001F + id.
		why = "kind must not contain U+001F"
	case r.Version < 1:
		why = "version must be >= 1"
	case len(r.Value) == 0:
		why = "value is required"
	case !r.Expires.IsZero() && (r.Expires.Year() < 1 || r.Expires.Year() > 9999):
		why = "expiry out of range"
	default:
		return nil
	}
	return fmt.Errorf("invalid record %s/%s version %d: %s", r.Kind, r.ID, r.Version, why)
}

// ExpiresMicros is r.Expires in unix microseconds, rounded down (so that a
// record never outlives its expiry), 0 for never. An expiry at or before
// the epoch (long past either way) is 1, so that every expiring record
// has a positive value and "expired" is the range (0, now].
func (r Record) ExpiresMicros() int64 {
	if r.Expires.IsZero() {
		return 0
	}
	return max(r.Expires.UnixMicro(), 1)
}

// RecordExpires is the inverse of ExpiresMicros: 0 is never (the zero
// time), anything else an instant in UTC.
func RecordExpires(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
