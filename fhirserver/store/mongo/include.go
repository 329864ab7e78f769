package mongo

import (
	"context"
	"regexp"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Bounds of _include and _revinclude, as on the embedded store: rounds of
// :iterate after the first, and resources added in all.
const (
	maxIncludeRounds = 4
	maxIncluded      = 1000
)

// includes adds what the page's includes reach: round one applies every
// Include and RevInclude to the matches, later rounds the :iterate ones to
// what the round before added. Each resource once, never a match. Every
// step is an indexed query over an id or key set (no $lookup).
func (s *Store) includes(ctx context.Context, q *search.Query, matches []*resDoc) ([]*store.Version, error) {
	if len(q.Include) == 0 && len(q.RevInclude) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(matches))
	for _, d := range matches {
		seen[d.Key] = true
	}
	frontier := matches
	var out []*store.Version
	for round := 0; round < maxIncludeRounds && len(frontier) > 0 && len(out) < maxIncluded; round++ {
		var found []*resDoc
		add := func(ds []*resDoc) {
			for _, d := range ds {
				if !seen[d.Key] && len(out)+len(found) < maxIncluded {
					seen[d.Key] = true
					found = append(found, d)
				}
			}
		}
		for _, inc := range q.Include {
			if round > 0 && !inc.Iterate {
				continue
			}
			ds, err := s.forwardInclude(ctx, inc, frontier)
			if err != nil {
				return nil, err
			}
			add(ds)
		}
		for _, inc := range q.RevInclude {
			if round > 0 && !inc.Iterate {
				continue
			}
			ds, err := s.reverseInclude(ctx, inc, frontier)
			if err != nil {
				return nil, err
			}
			add(ds)
		}
		for _, d := range found {
			out = append(out, d.version())
		}
		frontier = found
	}
	return out, nil
}

// forwardInclude: the live resources the frontier's resources of type
// inc.Source reference through inc.Param ("*": any), of type inc.Target if
// set.
func (s *Store) forwardInclude(ctx context.Context, inc search.Include, frontier []*resDoc) ([]*resDoc, error) {
	var ids bson.A
	dup := map[string]bool{}
	for _, d := range frontier {
		if inc.Source != "" && d.Type != inc.Source {
			continue
		}
		for _, k := range d.Keys {
			param, typ, id, ok := search.RefKey(k)
			if !ok || inc.Param != "*" && param != inc.Param || inc.Target != "" && typ != inc.Target {
				continue
			}
			if key := docKey(typ, id); !dup[key] {
				dup[key] = true
				ids = append(ids, key)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.fetch(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "del", Value: false}}, nil)
}

// reverseInclude: the live resources of type inc.Source that reference a
// frontier resource (of type inc.Target if set) through inc.Param. With
// "*" the parameter is unknown, so no index narrows the keys: the
// Source's keys ending in a frontier reference are read (rare, and slow on
// a large store, as on the embedded one).
func (s *Store) reverseInclude(ctx context.Context, inc search.Include, frontier []*resDoc) ([]*resDoc, error) {
	if inc.Source == "" {
		return nil, nil
	}
	var keys bson.A
	refs := map[string]bool{}
	var alts []string
	for _, d := range frontier {
		if inc.Target != "" && d.Type != inc.Target {
			continue
		}
		refs[d.Key] = true
		alts = append(alts, regexp.QuoteMeta(d.Key))
		keys = append(keys, inc.Param+"\x1f"+d.Key)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	if inc.Param != "*" {
		return s.fetch(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: "t", Value: inc.Source}, {Key: "del", Value: false}}, nil)
	}
	pattern := "\x1f(" + strings.Join(alts, "|") + ")$"
	return s.fetch(ctx, bson.D{{Key: "t", Value: inc.Source}, {Key: "del", Value: false}, {Key: "k", Value: bson.Regex{Pattern: pattern}}},
		func(d *resDoc) bool {
			for _, k := range d.Keys {
				if _, typ, id, ok := search.RefKey(k); ok && refs[docKey(typ, id)] {
					return true
				}
			}
			return false
		})
}

// fetch reads the documents matching an exact filter (keys included, for
// the next round), keeping those keep accepts (nil: all), at most
// maxIncluded.
func (s *Store) fetch(ctx context.Context, f bson.D, keep func(*resDoc) bool) ([]*resDoc, error) {
	var out []*resDoc
	test := func(*resDoc) bool { return true }
	exact := keep == nil
	if keep != nil {
		test = keep
	}
	err := s.scan(ctx, filter{mongo: f, test: test, exact: exact}, bson.D{{Key: "r", Value: 1}}, maxIncluded, func(d *resDoc) bool {
		out = append(out, d)
		return len(out) < maxIncluded
	})
	return out, err
}
