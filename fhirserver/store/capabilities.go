package store

import (
	"context"
	"fmt"
	"reflect"
)

// SecretKeeper keeps the server's own secrets (the page cursor key, the
// audit query key) in the store, so that the instances sharing a store
// share them. Stores without it leave them to files in the data folder.
type SecretKeeper interface {
	// Secret returns the secret of that name, size random bytes created
	// once, by whichever instance asks first.
	Secret(ctx context.Context, name string, size int) ([]byte, error)
}

// BodyRewriter replaces stored bytes where they are, and nothing else: a
// version's body, or a record's value, becomes other bytes while the
// version keeps its number, time, method, place in history and index
// rows, and the record its version and expiry. It is for jobs that
// transform every stored value in place: the key rotation of an encrypted
// partition (fhirserver/store/sealed) re-wraps each sealed value this way.
//
// Each replacement is a compare-and-swap on the bytes it replaces: it
// applies only if the stored body or value is still Old, byte for byte,
// so a write that changed it meanwhile (an erasure's Rewrite, a record's
// PutRecord) is never undone. A replacement of a version or record that
// does not exist (or no longer: a purge, an expiry) or no longer holds
// Old is skipped, and applied counts the others. A tombstone has no body
// to replace: it is skipped too.
type BodyRewriter interface {
	// RewriteBodies applies replacements of version bodies (Type: the
	// resource type), atomically where the store has transactions.
	RewriteBodies(ctx context.Context, rs []Replacement) (applied int, err error)
	// RewriteRecordValues applies replacements of record values (Type:
	// the record's kind; Version: the record's version), atomically where
	// the store has transactions.
	RewriteRecordValues(ctx context.Context, rs []Replacement) (applied int, err error)
	// RecordKinds lists the kinds of the stored records, ascending, so
	// that a job can visit every record with ListRecords.
	RecordKinds(ctx context.Context) ([]string, error)
	// CountVersions counts the stored versions, tombstones included: the
	// total of a job that visits every version through History.
	CountVersions(ctx context.Context) (int64, error)
}

// Replacement is one value of BodyRewriter: the body of version Version
// of Type/ID, or the value of record Type/ID at record version Version,
// to become New if it is still Old.
type Replacement struct {
	Type, ID string
	Version  int64
	Old, New []byte
}

// Check rejects replacements no backend applies: caller bugs, so the
// error matches none of the sentinels. It never quotes the bytes.
func (r Replacement) Check() error {
	var why string
	switch {
	case r.Type == "" || r.ID == "":
		why = "type and id are required"
	case r.Version < 1:
		why = "version must be >= 1"
	case len(r.Old) == 0 || len(r.New) == 0:
		why = "the old and the new bytes are required"
	default:
		return nil
	}
	return fmt.Errorf("invalid replacement of %s/%s version %d: %s", r.Type, r.ID, r.Version, why)
}

// Capabilities are the optional interfaces a Store may implement beyond
// Store. Code finds one by asserting its named interface, never an
// anonymous one, and a store that wraps another (the encrypted partition)
// must implement every one its inner store has: a capability it dropped
// would silently turn a feature off (Dropped finds those). A new optional
// capability is declared here, and nowhere else.
var Capabilities = []reflect.Type{
	reflect.TypeFor[Indexer](),
	reflect.TypeFor[Records](),
	reflect.TypeFor[Sequencer](),
	reflect.TypeFor[Rewriter](),
	reflect.TypeFor[Forgetter](),
	reflect.TypeFor[Purger](),
	reflect.TypeFor[SecretKeeper](),
	reflect.TypeFor[BodyRewriter](),
}

// TxCapabilities are the optional interfaces of a transaction's view (Tx).
var TxCapabilities = []reflect.Type{
	reflect.TypeFor[Rewriter](),
}

// CapabilitiesOf names the interfaces of caps that v implements.
func CapabilitiesOf(v any, caps []reflect.Type) []string {
	var out []string
	t := reflect.TypeOf(v)
	for _, c := range caps {
		if t != nil && t.Implements(c) {
			out = append(out, c.Name())
		}
	}
	return out
}

// Dropped names the interfaces of caps that inner implements and outer,
// a store wrapping it, does not.
func Dropped(inner, outer any, caps []reflect.Type) []string {
	var out []string
	ti, to := reflect.TypeOf(inner), reflect.TypeOf(outer)
	for _, c := range caps {
		if ti != nil && ti.Implements(c) && (to == nil || !to.Implements(c)) {
			out = append(out, c.Name())
		}
	}
	return out
}
