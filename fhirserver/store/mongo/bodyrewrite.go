package mongo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var _ store.BodyRewriter = (*Store)(nil)

// RewriteBodies applies the replacements in one transaction where the
// deployment has them. A version's body is stored twice while it is
// current, in its history document and in the resource document: each
// copy is swapped on its own condition (body still Old), the resource
// document's first, so that a history body no longer Old implies the
// resource document moved on too (a job interrupted between the two
// finds the history body unchanged and repeats the replacement, which
// then completes it). applied counts the history documents replaced.
func (s *Store) RewriteBodies(ctx context.Context, rs []store.Replacement) (int, error) {
	if err := checkReplacements(rs); err != nil {
		return 0, err
	}
	applied := 0
	err := s.atomically(ctx, func(ctx context.Context) error {
		applied = 0 // a transaction may run again
		for _, r := range rs {
			ref := fmt.Sprintf("rewrite body %s/%s version %d", r.Type, r.ID, r.Version)
			if _, err := s.resources.UpdateOne(ctx,
				bson.D{{Key: "_id", Value: docKey(r.Type, r.ID)}, {Key: "v", Value: r.Version}, {Key: "body", Value: r.Old}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "body", Value: r.New}}}}); err != nil {
				return wrapErr(ctx, ref, err)
			}
			res, err := s.history.UpdateOne(ctx,
				bson.D{{Key: "t", Value: r.Type}, {Key: "id", Value: r.ID}, {Key: "v", Value: r.Version}, {Key: "body", Value: r.Old}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "body", Value: r.New}}}})
			if err != nil {
				return wrapErr(ctx, ref, err)
			}
			applied += int(res.MatchedCount)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return applied, nil
}

// RewriteRecordValues applies the replacements in one transaction where
// the deployment has them; an expired record is skipped.
func (s *Store) RewriteRecordValues(ctx context.Context, rs []store.Replacement) (int, error) {
	if err := checkReplacements(rs); err != nil {
		return 0, err
	}
	applied := 0
	err := s.atomically(ctx, func(ctx context.Context) error {
		applied = 0
		now := time.Now().UnixMicro()
		for _, r := range rs {
			res, err := s.records.UpdateOne(ctx,
				bson.D{{Key: "_id", Value: recordKey(r.Type, r.ID)}, {Key: "v", Value: r.Version}, {Key: "value", Value: r.Old}, liveFilter(now)},
				bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: r.New}}}})
			if err != nil {
				return wrapErr(ctx, fmt.Sprintf("rewrite record value %s/%s version %d", r.Type, r.ID, r.Version), err)
			}
			applied += int(res.MatchedCount)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return applied, nil
}

func checkReplacements(rs []store.Replacement) error {
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return fmt.Errorf("mongo store: %w", err)
		}
	}
	return nil
}

// RecordKinds is the distinct kinds of the records collection (expired
// documents included), by a $group (FerretDB answers distinct on an
// empty collection with a reply the driver cannot decode), sorted here in
// byte order.
func (s *Store) RecordKinds(ctx context.Context) ([]string, error) {
	cur, err := s.records.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$kind"}}}}})
	if err != nil {
		return nil, wrapErr(ctx, "record kinds", err)
	}
	defer cur.Close(ctx)
	var kinds []string
	for cur.Next(ctx) {
		var d struct {
			Kind string `bson:"_id"`
		}
		if err := cur.Decode(&d); err != nil {
			return nil, wrapErr(ctx, "record kinds", err)
		}
		kinds = append(kinds, d.Kind)
	}
	if err := cur.Err(); err != nil {
		return nil, wrapErr(ctx, "record kinds", err)
	}
	slices.Sort(kinds)
	return kinds, nil
}

// CountVersions counts the history documents: one per version.
func (s *Store) CountVersions(ctx context.Context) (int64, error) {
	n, err := s.history.CountDocuments(ctx, bson.D{})
	if err != nil {
		return 0, wrapErr(ctx, "count versions", err)
	}
	return n, nil
}
