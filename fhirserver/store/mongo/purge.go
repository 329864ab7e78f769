package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var _ store.Purger = (*Store)(nil)

// Purge deletes up to limit resources of typ last updated before before:
// their history first, then the resource documents (a crash between the
// two leaves documents that the next purge removes).
func (s *Store) Purge(ctx context.Context, typ string, before time.Time, limit int) (int, error) {
	if typ == "" || limit <= 0 {
		return 0, fmt.Errorf("mongo store: purge: a type and a positive limit are required")
	}
	cur, err := s.resources.Find(ctx, bson.D{{Key: "t", Value: typ}, {Key: "lu", Value: bson.D{{Key: "$lt", Value: micros(before)}}}},
		options.Find().SetProjection(bson.D{{Key: "id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return 0, wrapErr(ctx, "purge", err)
	}
	var docs []struct {
		Key string `bson:"_id"`
		ID  string `bson:"id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return 0, wrapErr(ctx, "purge", err)
	}
	if len(docs) == 0 {
		return 0, nil
	}
	keys, ids := bson.A{}, bson.A{}
	for _, d := range docs {
		keys, ids = append(keys, d.Key), append(ids, d.ID)
	}
	if _, err := s.history.DeleteMany(ctx, bson.D{{Key: "t", Value: typ}, {Key: "id", Value: bson.D{{Key: "$in", Value: ids}}}}); err != nil {
		return 0, wrapErr(ctx, "purge: history", err)
	}
	if _, err := s.resources.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}); err != nil {
		return 0, wrapErr(ctx, "purge", err)
	}
	return len(docs), nil
}
