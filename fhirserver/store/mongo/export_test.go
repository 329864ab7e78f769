package mongo

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// ExplainStages explains (queryPlanner) the find of each partition of q's
// first page as Search would issue it with $elemMatch, and returns the
// stage names of each winning plan.
func ExplainStages(ctx context.Context, s *Store, q *search.Query) ([]map[string]bool, error) {
	c := &compiler{s: s, ctx: ctx, elemMatch: true}
	f, err := c.query(q)
	if err != nil {
		return nil, err
	}
	plan, err := newSortPlan(q.Sort)
	if err != nil {
		return nil, err
	}
	var out []map[string]bool
	for part := range plan.parts() {
		pf := and([]filter{f, {mongo: plan.partFilter(part), test: func(*resDoc) bool { return true }, exact: true}})
		cmd := bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: s.resources.Name()}, {Key: "filter", Value: pf.mongo},
			{Key: "sort", Value: plan.order(part, false)}, {Key: "limit", Value: 21}}}, {Key: "verbosity", Value: "queryPlanner"}}
		var res bson.M
		if err := s.db.RunCommand(ctx, cmd).Decode(&res); err != nil {
			return nil, err
		}
		stages := map[string]bool{}
		collectStages(field(field(res, "queryPlanner"), "winningPlan"), stages)
		out = append(out, stages)
	}
	return out, nil
}

func collectStages(v any, into map[string]bool) {
	switch v := v.(type) {
	case bson.M:
		if st, ok := v["stage"].(string); ok {
			into[st] = true
		}
		for _, x := range v {
			collectStages(x, into)
		}
	case bson.D:
		for _, e := range v {
			if e.Key == "stage" {
				if st, ok := e.Value.(string); ok {
					into[st] = true
				}
			}
			collectStages(e.Value, into)
		}
	case bson.A:
		for _, x := range v {
			collectStages(x, into)
		}
	}
}

// field is v[key] for a document decoded either as bson.M or as bson.D.
func field(v any, key string) any {
	switch v := v.(type) {
	case bson.M:
		return v[key]
	case bson.D:
		for _, e := range v {
			if e.Key == key {
				return e.Value
			}
		}
	}
	return nil
}

// DatabaseName is the database of s, for a second Store on the same data.
func DatabaseName(s *Store) string { return s.db.Name() }
