package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// store.Records on the records collection: one document per record, its
// current version only,
//
//	{_id: kind + "\x1f" + id, kind, id, v, value: binary, exp}
//
// where exp is the expiry in unix microseconds (0: never). An expired
// document counts as absent; PutRecord purges expired documents now and
// then (at most once per purgeEvery per Store), through the exp index.

var _ store.Records = (*Store)(nil)

// purgeEvery bounds how often a Store deletes expired records.
const purgeEvery = time.Minute

// putRecordAttempts bounds the retries of a version-1 PutRecord that
// meets an expired document which another writer replaces or deletes
// between our reads.
const putRecordAttempts = 3

type recDoc struct {
	Key   string `bson:"_id"`
	Kind  string `bson:"kind"`
	ID    string `bson:"id"`
	V     int64  `bson:"v"`
	Value []byte `bson:"value"`
	Exp   int64  `bson:"exp"`
}

func (d *recDoc) record() *store.Record {
	return &store.Record{Kind: d.Kind, ID: d.ID, Version: d.V, Value: d.Value, Expires: store.RecordExpires(d.Exp)}
}

func recordKey(kind, id string) string { return kind + "\x1f" + id }

// liveFilter matches the documents unexpired at now (unix micros).
func liveFilter(now int64) bson.E {
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "exp", Value: int64(0)}},
		bson.D{{Key: "exp", Value: bson.D{{Key: "$gt", Value: now}}}},
	}}
}

// GetRecord returns the record kind/id; store.ErrNotFound when it is
// absent or expired.
func (s *Store) GetRecord(ctx context.Context, kind, id string) (*store.Record, error) {
	var d recDoc
	err := s.records.FindOne(ctx, bson.D{{Key: "_id", Value: recordKey(kind, id)}, liveFilter(time.Now().UnixMicro())}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("mongo store: get record %s/%s: %w", kind, id, store.ErrNotFound)
	}
	if err != nil {
		return nil, wrapErr(ctx, fmt.Sprintf("get record %s/%s", kind, id), err)
	}
	return d.record(), nil
}

// PutRecord is a compare-and-swap on the document's version. Version 1 is
// an insert; if a document exists but has expired, it is replaced with a
// filter on its version and expiry, so that of two racing creators only
// one wins. A later version is an update filtered on the previous version
// being current and unexpired.
func (s *Store) PutRecord(ctx context.Context, r store.Record) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("mongo store: put record: %w", err)
	}
	ref := fmt.Sprintf("%s/%s version %d", r.Kind, r.ID, r.Version)
	key := recordKey(r.Kind, r.ID)
	now := time.Now().UnixMicro()
	if err := s.purgeRecords(ctx, now); err != nil {
		return err
	}
	d := recDoc{Key: key, Kind: r.Kind, ID: r.ID, V: r.Version, Value: r.Value, Exp: r.ExpiresMicros()}
	if r.Version > 1 {
		res, err := s.records.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: key}, {Key: "v", Value: r.Version - 1}, liveFilter(now)},
			bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: d.V}, {Key: "value", Value: d.Value}, {Key: "exp", Value: d.Exp}}}})
		if err != nil {
			return wrapErr(ctx, "put record "+ref, err)
		}
		if res.MatchedCount == 0 {
			return fmt.Errorf("mongo store: put record %s: the current version is not %d: %w", ref, r.Version-1, store.ErrConflict)
		}
		return nil
	}
	for range putRecordAttempts {
		_, err := s.records.InsertOne(ctx, d)
		if err == nil {
			return nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return wrapErr(ctx, "put record "+ref, err)
		}
		var old recDoc
		err = s.records.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&old)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue // deleted meanwhile: insert again
		}
		if err != nil {
			return wrapErr(ctx, "put record "+ref, err)
		}
		if old.Exp == 0 || old.Exp > now {
			return fmt.Errorf("mongo store: put record %s: the record exists: %w", ref, store.ErrConflict)
		}
		res, err := s.records.ReplaceOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "v", Value: old.V}, {Key: "exp", Value: old.Exp}}, d)
		if err != nil {
			return wrapErr(ctx, "put record "+ref, err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
		// Replaced or deleted meanwhile: look again.
	}
	return fmt.Errorf("mongo store: put record %s: lost %d races for an expired record: %w", ref, putRecordAttempts, store.ErrConflict)
}

// purgeRecords deletes the expired records, at most once per purgeEvery.
func (s *Store) purgeRecords(ctx context.Context, now int64) error {
	last := s.purgedAt.Load()
	if now-last < purgeEvery.Microseconds() || !s.purgedAt.CompareAndSwap(last, now) {
		return nil
	}
	_, err := s.records.DeleteMany(ctx, bson.D{{Key: "exp", Value: bson.D{{Key: "$gt", Value: int64(0)}, {Key: "$lte", Value: now}}}})
	if err != nil {
		s.purgedAt.CompareAndSwap(now, last) // try again next time
		return wrapErr(ctx, "purge expired records", err)
	}
	return nil
}

// ListRecords returns the unexpired records of kind, in ID byte order
// (sorted here, so that the order does not depend on the server's string
// comparison).
func (s *Store) ListRecords(ctx context.Context, kind string) ([]*store.Record, error) {
	cur, err := s.records.Find(ctx, bson.D{{Key: "kind", Value: kind}, liveFilter(time.Now().UnixMicro())})
	if err != nil {
		return nil, wrapErr(ctx, "list records "+kind, err)
	}
	defer cur.Close(ctx)
	var out []*store.Record
	for cur.Next(ctx) {
		var d recDoc
		if err := cur.Decode(&d); err != nil {
			return nil, wrapErr(ctx, "list records "+kind, err)
		}
		out = append(out, d.record())
	}
	if err := cur.Err(); err != nil {
		return nil, wrapErr(ctx, "list records "+kind, err)
	}
	slices.SortFunc(out, func(a, b *store.Record) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteRecord removes kind/id; an absent record is no error.
func (s *Store) DeleteRecord(ctx context.Context, kind, id string) error {
	if _, err := s.records.DeleteOne(ctx, bson.D{{Key: "_id", Value: recordKey(kind, id)}}); err != nil {
		return wrapErr(ctx, fmt.Sprintf("delete record %s/%s", kind, id), err)
	}
	return nil
}
