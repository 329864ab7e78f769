package mongo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

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
// documents included), sorted here in byte order.
func (s *Store) RecordKinds(ctx context.Context) ([]string, error) {
	var kinds []string
	if err := s.records.Distinct(ctx, "kind", bson.D{}).Decode(&kinds); err != nil {
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
