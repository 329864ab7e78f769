package mongo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Read returns the current version by _id.
func (s *Store) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	var d resDoc
	err := s.resources.FindOne(ctx, bson.D{{Key: "_id", Value: docKey(typ, id)}},
		options.FindOne().SetProjection(versionFields)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("mongo store: read %s/%s: %w", typ, id, store.ErrNotFound)
	}
	if err != nil {
		return nil, wrapErr(ctx, "read "+typ+"/"+id, err)
	}
	return d.version(), nil
}

// VRead returns one version through the unique (t, id, v) index.
func (s *Store) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	var d histDoc
	err := s.history.FindOne(ctx, bson.D{{Key: "t", Value: typ}, {Key: "id", Value: id}, {Key: "v", Value: version}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("mongo store: vread %s/%s/_history/%d: %w", typ, id, version, store.ErrNotFound)
	}
	if err != nil {
		return nil, wrapErr(ctx, fmt.Sprintf("vread %s/%s/_history/%d", typ, id, version), err)
	}
	return d.version(), nil
}

// Put applies w. Where the deployment has transactions, the resource and
// history documents change in one; otherwise the resource document (the
// compare-and-swap, atomic on its own) is written first and the history
// document after it, so a crash between the two loses a history entry,
// never the current version.
func (s *Store) Put(ctx context.Context, w store.Write) error {
	if err := w.Check(); err != nil {
		return fmt.Errorf("mongo store: put: %w", err)
	}
	return s.atomically(ctx, func(ctx context.Context) error { return s.put(ctx, w) })
}

// put is the compare-and-swap on the resource document, then the history
// append; ctx carries the session of a transaction, if any.
func (s *Store) put(ctx context.Context, w store.Write) error {
	ref := fmt.Sprintf("%s/%s version %d", w.Type, w.ID, w.Version)
	seq := s.clock.next()
	lu := micros(w.LastUpdated)
	var body []byte
	if !w.Deleted {
		body = w.Body
	}
	rows := rowsOf(w.Index)
	if w.Deleted {
		rows = rowsOf(nil)
	}
	if w.Version == 1 {
		d := resDoc{Key: docKey(w.Type, w.ID), Type: w.Type, ID: w.ID, Version: 1, LU: lu, Method: string(w.Method),
			Deleted: w.Deleted, Body: body, R: seq, IndexFields: rows}
		if _, err := s.resources.InsertOne(ctx, d); err != nil {
			if mongo.IsDuplicateKeyError(err) {
				return fmt.Errorf("mongo store: put %s: the resource exists: %w", ref, store.ErrConflict)
			}
			return wrapErr(ctx, "put "+ref, err)
		}
	} else {
		set := append(bson.D{{Key: "v", Value: w.Version}, {Key: "lu", Value: lu}, {Key: "m", Value: string(w.Method)},
			{Key: "del", Value: w.Deleted}}, rows.set()...)
		update := bson.D{}
		if w.Deleted {
			update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "body", Value: ""}}})
		} else {
			set = append(set, bson.E{Key: "body", Value: body})
		}
		update = append(update, bson.E{Key: "$set", Value: set})
		res, err := s.resources.UpdateOne(ctx, bson.D{{Key: "_id", Value: docKey(w.Type, w.ID)}, {Key: "v", Value: w.Version - 1}}, update)
		if err != nil {
			return wrapErr(ctx, "put "+ref, err)
		}
		if res.MatchedCount == 0 {
			return fmt.Errorf("mongo store: put %s: the current version is not %d: %w", ref, w.Version-1, store.ErrConflict)
		}
	}
	h := histDoc{Seq: seq, Type: w.Type, ID: w.ID, Version: w.Version, LU: lu, Method: string(w.Method), Deleted: w.Deleted, Body: body}
	if _, err := s.history.InsertOne(ctx, h); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("mongo store: put %s: history already holds it: %w", ref, store.ErrConflict)
		}
		return wrapErr(ctx, "put "+ref+": history", err)
	}
	if w.Version > 1 {
		_, err := s.history.UpdateOne(ctx, bson.D{{Key: "t", Value: w.Type}, {Key: "id", Value: w.ID}, {Key: "v", Value: w.Version - 1}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "nlu", Value: lu}, {Key: "nseq", Value: seq}}}})
		if err != nil {
			return wrapErr(ctx, "put "+ref+": history", err)
		}
	}
	return nil
}

// Transact runs fn in a multi-document transaction (snapshot reads,
// majority writes), once: a write conflict with another transaction is
// store.ErrConflict, for the caller to retry. Deployments without
// transactions get store.ErrTransactionsUnsupported and fn is not called.
func (s *Store) Transact(ctx context.Context, fn func(tx store.Tx) error) error {
	if !s.server.Transactions {
		return store.ErrTransactionsUnsupported
	}
	return s.inTransaction(ctx, func(sess *mongo.Session) (func(), error) {
		t := &tx{s: s, sess: sess}
		if err := fn(t); err != nil {
			return nil, err
		}
		t.mu.Lock()
		return t.mu.Unlock, nil
	})
}

// atomically runs fn in a transaction where the deployment has them, and
// directly otherwise; fn gets the context to issue its operations with.
func (s *Store) atomically(ctx context.Context, fn func(ctx context.Context) error) error {
	if !s.server.Transactions {
		return fn(ctx)
	}
	return s.inTransaction(ctx, func(sess *mongo.Session) (func(), error) {
		return func() {}, fn(mongo.NewSessionContext(ctx, sess))
	})
}

// inTransaction starts a session and a transaction, runs fn and commits
// unless fn failed. fn returns what to run once the commit is over (an
// unlock of the callers sharing the session).
func (s *Store) inTransaction(ctx context.Context, fn func(sess *mongo.Session) (func(), error)) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return wrapErr(ctx, "transaction: start session", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	opts := options.Transaction().SetReadConcern(readconcern.Snapshot()).SetWriteConcern(writeconcern.Majority())
	if err := sess.StartTransaction(opts); err != nil {
		return wrapErr(ctx, "transaction: start", err)
	}
	after, err := fn(sess)
	if err != nil {
		_ = sess.AbortTransaction(context.WithoutCancel(ctx))
		return err
	}
	defer after()
	if err := sess.CommitTransaction(ctx); err != nil {
		_ = sess.AbortTransaction(context.WithoutCancel(ctx))
		return wrapErr(ctx, "transaction: commit", err)
	}
	return nil
}

// tx is store.Tx over one session. A session serves one operation at a
// time, so mu serialises the callers sharing the Tx.
type tx struct {
	s    *Store
	sess *mongo.Session
	mu   sync.Mutex
}

func (t *tx) in(ctx context.Context) (context.Context, func()) {
	t.mu.Lock()
	return mongo.NewSessionContext(ctx, t.sess), t.mu.Unlock
}

func (t *tx) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	c, done := t.in(ctx)
	defer done()
	return t.s.Read(c, typ, id)
}

func (t *tx) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	c, done := t.in(ctx)
	defer done()
	return t.s.VRead(c, typ, id, version)
}

func (t *tx) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	c, done := t.in(ctx)
	defer done()
	return t.s.History(c, q)
}

func (t *tx) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	c, done := t.in(ctx)
	defer done()
	return t.s.Search(c, q)
}

func (t *tx) Put(ctx context.Context, w store.Write) error {
	if err := w.Check(); err != nil {
		return fmt.Errorf("mongo store: put: %w", err)
	}
	c, done := t.in(ctx)
	defer done()
	return t.s.put(c, w)
}

var _ store.Indexer = (*Store)(nil)

// Reindex replaces the rows of each update's resource if its current
// version is still the one the rows were extracted from (a filter on the
// version: a newer write carries its own rows).
func (s *Store) Reindex(ctx context.Context, updates []store.IndexUpdate) (int, error) {
	applied := 0
	err := s.atomically(ctx, func(ctx context.Context) error {
		applied = 0
		for _, u := range updates {
			n, err := s.reindexOne(ctx, u)
			if err != nil {
				return err
			}
			applied += n
		}
		return nil
	})
	return applied, err
}

func (s *Store) reindexOne(ctx context.Context, u store.IndexUpdate) (int, error) {
	{
		rows := rowsOf(u.Rows)
		res, err := s.resources.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: docKey(u.Type, u.ID)}, {Key: "v", Value: u.Version}, {Key: "del", Value: false}},
			bson.D{{Key: "$set", Value: rows.set()}})
		if err != nil {
			return 0, wrapErr(ctx, "reindex "+u.Type+"/"+u.ID, err)
		}
		return int(res.MatchedCount), nil
	}
}

// guardTTL is how long a criteria lock may be held: a lock older than this
// belongs to an instance that died holding it, and is taken over.
const guardTTL = 30 * time.Second

// LockCriteria holds the lock of a conditional interaction's criteria
// until unlock is called: a document in guards whose _id is the key, so
// the unique _id index decides between racing requests. MongoDB's
// transactions are snapshot-isolated, so two conditional creates could
// otherwise both find no match and both create.
func (s *Store) LockCriteria(ctx context.Context, key string) (func(), error) {
	id := "criteria:" + key
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		_, err := s.guards.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "at", Value: time.Now().UnixMilli()}})
		if err == nil {
			return func() {
				_, _ = s.guards.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: id}})
			}, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return nil, wrapErr(ctx, "lock criteria", err)
		}
		stale := time.Now().Add(-guardTTL).UnixMilli()
		if _, err := s.guards.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "at", Value: bson.D{{Key: "$lt", Value: stale}}}}); err != nil {
			return nil, wrapErr(ctx, "lock criteria", err)
		}
		select {
		case <-ctx.Done():
			return nil, wrapErr(ctx, "lock criteria", ctx.Err())
		case <-time.After(wait + rand.N(wait)):
		}
	}
}
