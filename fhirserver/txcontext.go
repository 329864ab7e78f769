package fhirserver

import (
	"context"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/internal/preindex"
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

// Transact runs fn inside one store transaction, for a transaction Bundle:
// every interaction begun with fn's ctx reads and writes through tx, and
// its writes are stamped with one lastUpdated, taken once the transaction
// holds the store's writer. A store without transactions answers
// store.ErrTransactionsUnsupported.
func (s *Server) Transact(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.store.Transact(ctx, func(tx store.Tx) error {
		return fn(withNow(withTx(ctx, tx), s.now()), tx)
	})
}

// ReloadSearchParameters rebuilds the custom search parameters from the
// store: after a transaction that wrote SearchParameters failed, the
// registry holds what its entries registered and the store does not.
func (s *Server) ReloadSearchParameters(ctx context.Context) {
	s.params.Reload(ctx, s.store)
}

type nowKey struct{}
type preindexKey struct{}

// withNow fixes the time of every write made with ctx.
func withNow(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, nowKey{}, t)
}

// nowFor is the time of a write: the transaction's, or the clock's.
func (s *Server) nowFor(ctx context.Context) time.Time {
	if t, ok := ctx.Value(nowKey{}).(time.Time); ok {
		return t
	}
	return s.now()
}

// Preindex prepares the writes of a transaction before it takes the
// store's writer (fhirserver/internal/preindex): their second validation
// layer and index rows, as written at ctx's time (Transact's, or now).
func (s *Server) Preindex(ctx context.Context, jobs []preindex.Job) preindex.Set {
	return preindex.Run(ctx, jobs, s.nowFor(ctx), s.registry, s.checkedRows)
}

// WithPreindexed makes the writes made with ctx use what Preindex
// prepared for them.
func WithPreindexed(ctx context.Context, p preindex.Set) context.Context {
	return context.WithValue(ctx, preindexKey{}, p)
}

// preindexedFor returns what was prepared for the write of typ/id with
// body src, or nil.
func (s *Server) preindexedFor(ctx context.Context, typ, id string, src []byte) *preindex.Prepared {
	ps, _ := ctx.Value(preindexKey{}).(preindex.Set)
	return ps.For(typ, id, src, s.registry.Generation())
}
