package mongo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Log is an append-only log in the collection audit_log of a database of
// its own: the audit partition (<db>_audit). One document per entry,
// {_id: seq (int64), at: date, body: binary}, so an append is one insert
// into the _id index and nothing else: the collection has no other index
// (FerretDB, the CI stand-in, needs none either). at keeps milliseconds.
// It is safe for concurrent use.
type Log struct {
	client    *mongo.Client
	c         *mongo.Collection
	closeOnce sync.Once
	closeErr  error
}

// logDoc is one entry as stored.
type logDoc struct {
	Seq  int64         `bson:"_id"`
	At   bson.DateTime `bson:"at"`
	Body []byte        `bson:"body"`
}

// OpenLog connects as Open does (cfg.WriteConcern applies to appends and
// deletes) and uses the collection audit_log of cfg.Database.
//
// Earlier builds kept the audit chain as AuditEvent resources of a store
// (Open) in that database. Those collections are left as they are and not
// read: a log started on such a database begins a new chain at seq 1.
// (The SQLite log copies the old records over, in the transaction that
// creates its table; here a copy could not be made atomic.)
func OpenLog(ctx context.Context, cfg Config) (*Log, error) {
	client, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	l := &Log{client: client, c: client.Database(cfg.Database).Collection("audit_log")}
	// Fail now, not at the first append, if the server is unreachable.
	if err := client.Ping(ctx, nil); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, wrapErr(ctx, "log: ping", err)
	}
	return l, nil
}

// connect makes a client for cfg: its write concern ("majority" or a
// number), majority reads, and a 10 s server selection timeout unless the
// URI sets one. Open and OpenLog share it.
func connect(cfg Config) (*mongo.Client, error) {
	if cfg.URI == "" || cfg.Database == "" {
		return nil, errors.New("mongo store: a URI and a database name are required")
	}
	wc := writeconcern.Majority()
	switch cfg.WriteConcern {
	case "", "majority":
	default:
		var n int
		if _, err := fmt.Sscanf(cfg.WriteConcern, "%d", &n); err != nil || n < 1 || fmt.Sprint(n) != cfg.WriteConcern {
			return nil, fmt.Errorf("mongo store: write concern %q: want \"majority\" or a number >= 1", cfg.WriteConcern)
		}
		wc = &writeconcern.WriteConcern{W: n}
	}
	opts := options.Client().ApplyURI(cfg.URI).SetWriteConcern(wc).
		SetReadConcern(readconcern.Majority()).SetAppName("kiln")
	if opts.ServerSelectionTimeout == nil {
		opts.SetServerSelectionTimeout(10 * time.Second)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("mongo store: connect: %w", err)
	}
	return client, nil
}

// Append inserts entries in order (one InsertMany). A seq already present
// is store.ErrConflict; the entries before it are stored then.
func (l *Log) Append(ctx context.Context, entries []store.LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	docs := make([]logDoc, len(entries))
	for i, e := range entries {
		docs[i] = logDoc{Seq: e.Seq, At: bson.NewDateTimeFromTime(e.Time), Body: e.Body}
	}
	_, err := l.c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
	if err == nil {
		return nil
	}
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("mongo store: log append: a seq exists: %w (%v)", store.ErrConflict, err)
	}
	return wrapErr(ctx, "log append", err)
}

// Newest returns up to n entries with Seq < before (before <= 0: no
// bound), newest first.
func (l *Log) Newest(ctx context.Context, before int64, n int) ([]store.LogEntry, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	if n <= 0 {
		return nil, nil
	}
	cur, err := l.c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: before}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(int64(n)))
	if err != nil {
		return nil, wrapErr(ctx, "log newest", err)
	}
	defer cur.Close(ctx)
	out := make([]store.LogEntry, 0, min(n, 512))
	for cur.Next(ctx) {
		var d logDoc
		if err := cur.Decode(&d); err != nil {
			return nil, wrapErr(ctx, "log newest", err)
		}
		out = append(out, store.LogEntry{Seq: d.Seq, Time: d.At.Time().UTC(), Body: d.Body})
	}
	if err := cur.Err(); err != nil {
		return nil, wrapErr(ctx, "log newest", err)
	}
	return out, nil
}

// DeleteThrough removes up to limit of the oldest entries with Seq <= seq
// and returns how many it removed: it finds the limit-th oldest id (seqs
// are unique) and deletes everything up to it.
func (l *Log) DeleteThrough(ctx context.Context, seq int64, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	through := seq
	var d struct {
		Seq int64 `bson:"_id"`
	}
	err := l.c.FindOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: seq}}}},
		options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}}).SetSkip(int64(limit-1)).
			SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&d)
	switch {
	case err == nil:
		through = d.Seq
	case errors.Is(err, mongo.ErrNoDocuments):
		// Fewer than limit: all of them.
	default:
		return 0, wrapErr(ctx, "log delete", err)
	}
	res, err := l.c.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: through}}}})
	if err != nil {
		return 0, wrapErr(ctx, "log delete", err)
	}
	return int(res.DeletedCount), nil
}

// Close disconnects; idempotent.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.client.Disconnect(ctx); err != nil {
			l.closeErr = fmt.Errorf("mongo store: close log: %w", err)
		}
	})
	return l.closeErr
}
