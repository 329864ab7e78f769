package sqlite

import (
	"context"
	"encoding/json"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/compile"
)

// Bounds of _include and _revinclude: rounds of :iterate after the first,
// and resources added in all. A page stays bounded whatever the graph.
const (
	maxIncludeRounds = 4
	maxIncluded      = 1000
)

// node is a resource a round of includes starts from.
type node struct {
	rid     int64
	typ, id string
}

// includes adds the resources the page's includes reach: the first round
// applies every Include and RevInclude to the matches, each later round
// only the :iterate ones, to the resources the round before added. Each
// resource appears once, and never one that is a match.
func includes(ctx context.Context, r *runner, q *search.Query, rids []int64, matches []*store.Version) ([]*store.Version, error) {
	seen := make(map[int64]bool, len(rids))
	frontier := make([]node, 0, len(rids))
	for i, rid := range rids {
		seen[rid] = true
		if i < len(matches) {
			frontier = append(frontier, node{rid, matches[i].Type, matches[i].ID})
		}
	}
	var out []*store.Version
	for round := 0; round < maxIncludeRounds && len(frontier) > 0 && len(out) < maxIncluded; round++ {
		var found []int64
		add := func(ids []int64) {
			for _, id := range ids {
				if !seen[id] && len(out)+len(found) < maxIncluded {
					seen[id] = true
					found = append(found, id)
				}
			}
		}
		for _, inc := range q.Include {
			if round > 0 && !inc.Iterate {
				continue
			}
			ids, err := forwardInclude(ctx, r, inc, frontier)
			if err != nil {
				return nil, err
			}
			add(ids)
		}
		for _, inc := range q.RevInclude {
			if round > 0 && !inc.Iterate {
				continue
			}
			ids, err := reverseInclude(ctx, r, inc, frontier)
			if err != nil {
				return nil, err
			}
			add(ids)
		}
		vs, next, err := fetchRids(ctx, r, found)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
		frontier = next
	}
	return out, nil
}

// includeKeysSQL reads the keys of the frontier by rid. INDEXED BY, since
// with a "param\x1f" range added the planner may prefer that range of the
// primary key: every key of the parameter in the store.
const includeKeysSQL = `SELECT key FROM search_keys INDEXED BY search_keys_by_rid
	WHERE rid IN (SELECT value FROM json_each(?))`

const resolveSQL = `SELECT r.rid FROM json_each(?) AS j
	CROSS JOIN resources AS r ON r.type = j.value ->> 0 AND r.id = j.value ->> 1
	WHERE r.deleted = 0`

// forwardInclude: the resources that the frontier's resources of type
// inc.Source reference through inc.Param ("*": any reference), of type
// inc.Target if set.
func forwardInclude(ctx context.Context, r *runner, inc search.Include, frontier []node) ([]int64, error) {
	var rids []int64
	for _, n := range frontier {
		if inc.Source == "" || n.typ == inc.Source {
			rids = append(rids, n.rid)
		}
	}
	if len(rids) == 0 {
		return nil, nil
	}
	s := (&compile.SQL{}).Text(includeKeysSQL, intsJSON(rids))
	if inc.Param != "*" {
		s.Text(" AND ")
		compile.PrefixRange(s, "key", inc.Param+"\x1f")
	}
	rows, err := r.query(ctx, s)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var targets [][2]string
	dup := map[[2]string]bool{}
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return nil, err
		}
		param, typ, id, ok := search.RefKey(key)
		if !ok || inc.Param != "*" && param != inc.Param || inc.Target != "" && typ != inc.Target {
			continue
		}
		t := [2]string{typ, id}
		if !dup[t] {
			dup[t] = true
			targets = append(targets, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if len(targets) == 0 {
		return nil, nil
	}
	j, err := json.Marshal(targets)
	if err != nil {
		return nil, err
	}
	return queryInts(ctx, r, (&compile.SQL{}).Text(resolveSQL, string(j)))
}

const revIncludeSQL = `SELECT DISTINCT k.rid FROM search_keys AS k
	CROSS JOIN resources AS r ON r.rid = k.rid
	WHERE k.key IN (SELECT value FROM json_each(?)) AND k.type = ? AND r.deleted = 0`

// revIncludeAnySQL serves _revinclude=Source:* : every reference key of
// Source's resources is a candidate, which no index orders by value, so
// it reads all of them (slow on a large store; rare in practice).
const revIncludeAnySQL = `SELECT DISTINCT k.rid FROM search_keys AS k
	CROSS JOIN resources AS r ON r.rid = k.rid
	WHERE k.type = ? AND instr(k.key, char(31)) > 0
	AND instr(substr(k.key, 1, instr(k.key, char(31))), ':') = 0
	AND substr(k.key, instr(k.key, char(31)) + 1) IN (SELECT value FROM json_each(?))
	AND r.deleted = 0`

// reverseInclude: the resources of type inc.Source that reference a
// frontier resource (of type inc.Target if set) through inc.Param.
func reverseInclude(ctx context.Context, r *runner, inc search.Include, frontier []node) ([]int64, error) {
	var vals []string
	for _, n := range frontier {
		if inc.Target == "" || n.typ == inc.Target {
			if inc.Param == "*" {
				vals = append(vals, n.typ+"/"+n.id)
			} else {
				vals = append(vals, inc.Param+"\x1f"+n.typ+"/"+n.id)
			}
		}
	}
	if len(vals) == 0 || inc.Source == "" {
		return nil, nil
	}
	j, err := json.Marshal(vals)
	if err != nil {
		return nil, err
	}
	if inc.Param == "*" {
		return queryInts(ctx, r, (&compile.SQL{}).Text(revIncludeAnySQL, inc.Source, string(j)))
	}
	return queryInts(ctx, r, (&compile.SQL{}).Text(revIncludeSQL, string(j), inc.Source))
}

func queryInts(ctx context.Context, r *runner, s *compile.SQL) ([]int64, error) {
	rows, err := r.query(ctx, s)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var x int64
		if err := rows.Scan(&x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

const fetchRidsSQL = `SELECT r.rid, v.type, v.id, v.version, v.last_updated, v.method, v.body
	FROM resources AS r JOIN resource_versions AS v ON v.seq = r.seq
	WHERE r.rid IN (SELECT value FROM json_each(?)) AND r.deleted = 0`

// fetchRids reads the current versions of rids, in that order, and
// returns them also as the next round's frontier.
func fetchRids(ctx context.Context, r *runner, rids []int64) ([]*store.Version, []node, error) {
	if len(rids) == 0 {
		return nil, nil, nil
	}
	rows, err := r.query(ctx, (&compile.SQL{}).Text(fetchRidsSQL, intsJSON(rids)))
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	byRid := make(map[int64]*store.Version, len(rids))
	for rows.Next() {
		v := &store.Version{}
		var rid, lu int64
		var method string
		if err := rows.Scan(&rid, &v.Type, &v.ID, &v.Version, &lu, &method, &v.Body); err != nil {
			return nil, nil, err
		}
		v.LastUpdated, v.Method = fromMicros(lu), store.Method(method)
		byRid[rid] = v
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var vs []*store.Version
	var next []node
	for _, rid := range rids {
		if v := byRid[rid]; v != nil {
			vs = append(vs, v)
			next = append(next, node{rid, v.Type, v.ID})
		}
	}
	return vs, next, nil
}
