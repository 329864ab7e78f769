package fhirserver

import (
	"context"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// txKey marks a request context that runs inside a store transaction (an
// entry of a transaction Bundle): every read and write of the interaction
// then goes through that transaction, so the Bundle commits or rolls back
// as one.
type txKey struct{}

func withTx(ctx context.Context, tx store.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

func txFrom(ctx context.Context) (store.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(store.Tx)
	return tx, ok
}

// view is what an interaction reads and searches through.
type view interface {
	store.Reader
	store.Searcher
}

// db is the store, or the transaction the request runs in.
func (s *Server) db(ctx context.Context) view {
	if tx, ok := txFrom(ctx); ok {
		return tx
	}
	return s.store
}

// transact runs fn in a store transaction, or inside the one the request
// already runs in.
func (s *Server) transact(ctx context.Context, fn func(tx store.Tx) error) error {
	if tx, ok := txFrom(ctx); ok {
		return fn(tx)
	}
	return s.store.Transact(ctx, fn)
}
