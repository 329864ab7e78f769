package store

import (
	"context"
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
