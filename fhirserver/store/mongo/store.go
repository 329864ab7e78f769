// Package mongo is Kiln's production store: store.Store on MongoDB.
//
// Document model (DESIGN.md "The store"):
//
//   - resources: one document per resource, holding its current version
//     (the served JSON bytes, as a binary) and its index rows in a few
//     typed fields: k (equality keys, multikey strings), p (the parameters
//     present), d and n (date and number ranges, {p, lo, hi} arrays) and
//     s (sort values per parameter). One compound index per shape, never
//     one per search parameter.
//   - history: one document per version, append-only but for the
//     successor's time, which answers the _at query without a join.
//   - guards: short-lived locks on conditional-create criteria.
//   - records: the server's own state (store.Records), one document per
//     record; see records.go.
//   - sequences and sequence_values: named counters (store.Sequencer),
//     {_id: name, v: last value}, and the values handed out; see
//     erasure.go.
//
// Writes are compare-and-swap on the version number (a filter on the
// expected version). Where the deployment has multi-document transactions
// (a replica set or a sharded cluster), a write's resource and history
// documents land in one transaction, and so does a transaction Bundle; a
// standalone server answers Transact with store.ErrTransactionsUnsupported.
package mongo

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Config selects a deployment and a database.
type Config struct {
	// URI is a MongoDB connection string (mongodb:// or mongodb+srv://).
	URI string
	// Database is the database of this store (one per partition).
	Database string
	// WriteConcern is "majority" (the default when empty) or a number of
	// acknowledging members ("1").
	WriteConcern string
}

// Store is the MongoDB backend. It is safe for concurrent use.
type Store struct {
	client    *mongo.Client
	db        *mongo.Database
	resources *mongo.Collection
	history   *mongo.Collection
	guards    *mongo.Collection
	settings  *mongo.Collection
	records   *mongo.Collection // store.Records, see records.go
	sequences *mongo.Collection // store.Sequencer, see erasure.go
	seqValues *mongo.Collection // the values NextValue handed out
	server    Server
	clock     clock
	purgedAt  atomic.Int64 // unix micros of the last purge of expired records
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Server is what Open learned about the deployment.
type Server struct {
	Version string
	// Transactions: the deployment runs multi-document transactions.
	Transactions bool
	// FerretDB: the server is FerretDB, a MongoDB-wire front end that lacks
	// $elemMatch on fields, among others. Range matches then use a looser
	// filter and the store checks the candidates in Go.
	FerretDB bool
}

// Open connects, learns what the deployment offers and creates the
// indexes (idempotently: creating an existing index is a no-op).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	client, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, db: client.Database(cfg.Database), clock: newClock()}
	s.resources = s.db.Collection("resources")
	s.history = s.db.Collection("history")
	s.guards = s.db.Collection("guards")
	s.settings = s.db.Collection("settings")
	s.records = s.db.Collection("records")
	s.sequences = s.db.Collection("sequences")
	s.seqValues = s.db.Collection("sequence_values")
	if err := s.inspect(ctx); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := s.ensureIndexes(ctx); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// Server reports what the deployment offers.
func (s *Store) Server() Server { return s.server }

// inspect reads buildInfo and hello: FerretDB names itself in buildInfo;
// a replica set member reports setName, a mongos "isdbgrid".
func (s *Store) inspect(ctx context.Context) error {
	var info struct {
		Version  string `bson:"version"`
		FerretDB string `bson:"ferretdbVersion"`
	}
	admin := s.client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return fmt.Errorf("mongo store: buildInfo: %w", err)
	}
	var hello struct {
		SetName string `bson:"setName"`
		Msg     string `bson:"msg"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return fmt.Errorf("mongo store: hello: %w", err)
	}
	s.server = Server{
		Version:      info.Version,
		FerretDB:     info.FerretDB != "",
		Transactions: hello.SetName != "" || hello.Msg == "isdbgrid",
	}
	if s.server.FerretDB {
		s.server.Transactions = false
	}
	return nil
}

// ensureIndexes creates one index per row shape, and those of reads and
// history. Names are fixed so that a changed definition fails loudly
// instead of adding a second index.
func (s *Store) ensureIndexes(ctx context.Context) error {
	idx := func(name string, unique bool, keys ...string) namedIndex {
		d := bson.D{}
		for _, k := range keys {
			dir := 1
			if strings.HasPrefix(k, "-") {
				k, dir = k[1:], -1
			}
			d = append(d, bson.E{Key: k, Value: dir})
		}
		o := options.Index().SetName(name)
		if unique {
			o.SetUnique(true)
		}
		return namedIndex{name, mongo.IndexModel{Keys: d, Options: o}}
	}
	// The multikey indexes of the row shapes. FerretDB indexes an array as
	// one PostgreSQL index entry (refused past 2.7 kB, which a resource
	// with many keys exceeds) and answers every query by a scan anyway, so
	// it gets none of them.
	var rowIndexes []namedIndex
	if !s.server.FerretDB {
		rowIndexes = []namedIndex{
			idx("keys", false, "k", "t"),
			idx("present", false, "p", "t"),
			idx("dates_low", false, "d.p", "d.lo", "d.hi"),
			idx("dates_high", false, "d.p", "d.hi"),
			idx("numbers_low", false, "n.p", "n.lo", "n.hi"),
			idx("numbers_high", false, "n.p", "n.hi"),
		}
	}
	sets := []struct {
		c      *mongo.Collection
		models []namedIndex
	}{
		{s.resources, append(rowIndexes,
			idx("type_order", false, "t", "del", "r", "_id"),
			idx("order", false, "del", "r", "_id"),
			idx("type_id", false, "t", "id"),
			idx("type_updated", false, "t", "lu"),
		)},
		{s.history, []namedIndex{
			idx("version", true, "t", "id", "v"),
			idx("system_time", false, "-lu", "-_id"),
			idx("type_time", false, "t", "-lu", "-_id"),
			idx("instance_time", false, "t", "id", "-lu", "-_id"),
		}},
		{s.records, []namedIndex{
			idx("kind_id", false, "kind", "id"),
			idx("expiry", false, "exp"),
		}},
	}
	for _, set := range sets {
		// Only the missing ones: re-creating an existing index is a no-op
		// on MongoDB but crashes FerretDB's handler.
		have, err := indexNames(ctx, set.c)
		if err != nil {
			return err
		}
		var missing []mongo.IndexModel
		for _, m := range set.models {
			if !have[m.name] {
				missing = append(missing, m.model)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if _, err := set.c.Indexes().CreateMany(ctx, missing); err != nil {
			return fmt.Errorf("mongo store: create indexes of %s: %w", set.c.Name(), err)
		}
	}
	return nil
}

type namedIndex struct {
	name  string
	model mongo.IndexModel
}

func indexNames(ctx context.Context, c *mongo.Collection) (map[string]bool, error) {
	cur, err := c.Indexes().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("mongo store: list indexes of %s: %w", c.Name(), err)
	}
	defer cur.Close(ctx)
	names := map[string]bool{}
	for cur.Next(ctx) {
		var ix struct {
			Name string `bson:"name"`
		}
		if err := cur.Decode(&ix); err != nil {
			return nil, fmt.Errorf("mongo store: list indexes of %s: %w", c.Name(), err)
		}
		names[ix.Name] = true
	}
	return names, cur.Err()
}

// Close disconnects; idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.client.Disconnect(ctx); err != nil {
			s.closeErr = fmt.Errorf("mongo store: close: %w", err)
		}
	})
	return s.closeErr
}

// Ping asks the primary (readiness).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx, nil); err != nil {
		return wrapErr(ctx, "ping", err)
	}
	return nil
}

// Secret returns the random secret stored under name, creating it on
// first use: instances sharing the database share it (e.g. the key that
// seals page cursors, so that any instance accepts any instance's links).
func (s *Store) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	var doc struct {
		Value []byte `bson:"value"`
	}
	err := s.settings.FindOne(ctx, bson.D{{Key: "_id", Value: "secret:" + name}}).Decode(&doc)
	if err == nil && len(doc.Value) == size {
		return doc.Value, nil
	}
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, wrapErr(ctx, "read secret", err)
	}
	fresh := make([]byte, size)
	if _, err := crand.Read(fresh); err != nil {
		return nil, fmt.Errorf("mongo store: secret: %w", err)
	}
	_, err = s.settings.InsertOne(ctx, bson.D{{Key: "_id", Value: "secret:" + name}, {Key: "value", Value: fresh}})
	if mongo.IsDuplicateKeyError(err) {
		// Another instance won the race: use its secret.
		if err := s.settings.FindOne(ctx, bson.D{{Key: "_id", Value: "secret:" + name}}).Decode(&doc); err != nil {
			return nil, wrapErr(ctx, "read secret", err)
		}
		return doc.Value, nil
	}
	if err != nil {
		return nil, wrapErr(ctx, "store secret", err)
	}
	return fresh, nil
}

// clock issues int64 sequence numbers: microseconds since the epoch in the
// high bits, an instance tag in the low 8, strictly increasing within the
// process. They order history (the tie-break of equal times, and the
// snapshot of a paged history) and creation (the default search order).
type clock struct {
	last atomic.Int64
	tag  int64
}

func newClock() clock { return clock{tag: rand.Int64N(256)} }

func (c *clock) next() int64 {
	for {
		last := c.last.Load()
		n := time.Now().UnixMicro()<<8 | c.tag
		if n <= last {
			n = last + 256
		}
		if c.last.CompareAndSwap(last, n) {
			return n
		}
	}
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// wrapErr names the step; a cancelled context is reported as such, and a
// write conflict inside a transaction as store.ErrConflict.
func wrapErr(ctx context.Context, step string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("mongo store: %s: %w", step, ctxErr)
	}
	if isWriteConflict(err) {
		return fmt.Errorf("mongo store: %s: %w (%v)", step, store.ErrConflict, err)
	}
	return fmt.Errorf("mongo store: %s: %w", step, err)
}

// isWriteConflict: MongoDB's WriteConflict (112), or an error labelled as
// a transient transaction error (the transaction lost a race).
func isWriteConflict(err error) bool {
	var se mongo.ServerError
	if errors.As(err, &se) {
		return se.HasErrorCode(112) || se.HasErrorLabel("TransientTransactionError")
	}
	return false
}
