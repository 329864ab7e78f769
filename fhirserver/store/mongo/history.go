package mongo

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// historyCursor is the position after a history page's last version in
// (lu DESC, seq DESC) order, and the snapshot of the first page: later
// pages ignore versions with a higher seq, so versions written while a
// client pages (even back-dated ones) never shift the pages.
type historyCursor struct {
	LU     int64  `bson:"l"`
	Seq    int64  `bson:"s"`
	MaxSeq int64  `bson:"m"`
	Query  uint32 `bson:"q"`
}

// History pages through versions newest first.
func (s *Store) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	switch {
	case q.ID != "" && q.Type == "":
		return nil, fmt.Errorf("mongo store: history: an id (%q) needs a type", q.ID)
	case q.Count <= 0:
		return nil, fmt.Errorf("mongo store: history: count must be > 0, got %d", q.Count)
	case q.MaxBytes < 0:
		return nil, fmt.Errorf("mongo store: history: max bytes must be >= 0, got %d", q.MaxBytes)
	}
	since, atLow, atHigh := q.HistoryBounds()
	hash := hashOf(q.Type, q.ID, since, atLow, atHigh, !q.AtLow.IsZero())

	var pos historyCursor
	if q.Cursor != "" {
		if err := decodeCursor(q.Cursor, &pos); err != nil {
			return nil, err
		}
		if pos.Query != hash {
			return nil, fmt.Errorf("mongo store: history: cursor was issued for another query: %w", store.ErrBadCursor)
		}
	} else {
		// The snapshot: the newest seq now.
		var last histDoc
		err := s.history.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}}).
			SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&last)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return &store.HistoryPage{}, nil
		}
		if err != nil {
			return nil, wrapErr(ctx, "history", err)
		}
		pos = historyCursor{LU: math.MaxInt64, Seq: math.MaxInt64, MaxSeq: last.Seq, Query: hash}
	}

	filter := bson.D{}
	if q.Type != "" {
		filter = append(filter, bson.E{Key: "t", Value: q.Type})
	}
	if q.ID != "" {
		filter = append(filter, bson.E{Key: "id", Value: q.ID})
	}
	hi := min(pos.LU, atHigh-1)
	filter = append(filter,
		bson.E{Key: "lu", Value: bson.D{{Key: "$gte", Value: since}, {Key: "$lte", Value: hi}}},
		bson.E{Key: "_id", Value: bson.D{{Key: "$lte", Value: pos.MaxSeq}}})
	var ors bson.A
	if q.Cursor != "" {
		ors = append(ors, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "lu", Value: bson.D{{Key: "$lt", Value: pos.LU}}}},
			bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: pos.Seq}}}},
		}}})
	}
	if !q.AtLow.IsZero() {
		// Current at some moment in [AtLow, AtHigh): not superseded at or
		// before AtLow by a version inside the snapshot.
		ors = append(ors, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "nlu", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "nlu", Value: bson.D{{Key: "$gt", Value: atLow}}}},
			bson.D{{Key: "nseq", Value: bson.D{{Key: "$gt", Value: pos.MaxSeq}}}},
		}}})
	}
	if len(ors) > 0 {
		filter = append(filter, bson.E{Key: "$and", Value: ors})
	}
	opts := options.Find().SetSort(bson.D{{Key: "lu", Value: -1}, {Key: "_id", Value: -1}}).
		SetBatchSize(int32(min(q.Count+1, 1000)))
	if q.MaxBytes == 0 {
		opts.SetLimit(int64(q.Count + 1))
	}
	cur, err := s.history.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrapErr(ctx, "history", err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	page := &store.HistoryPage{}
	var last historyCursor
	size, more := 0, false
	for cur.Next(ctx) {
		if len(page.Versions) == q.Count || q.MaxBytes > 0 && size >= q.MaxBytes {
			more = true
			break
		}
		var d histDoc
		if err := cur.Decode(&d); err != nil {
			return nil, wrapErr(ctx, "history", err)
		}
		page.Versions = append(page.Versions, d.version())
		size += len(d.Body)
		last = historyCursor{LU: d.LU, Seq: d.Seq, MaxSeq: pos.MaxSeq, Query: hash}
	}
	if err := cur.Err(); err != nil {
		return nil, wrapErr(ctx, "history", err)
	}
	if more {
		page.Next = encodeCursor(last)
	}
	return page, nil
}
