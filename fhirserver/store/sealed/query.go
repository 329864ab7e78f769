package sealed

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// The reasons a search is refused. None quotes a searched value: the
// diagnostics of an OperationOutcome reach logs.
const (
	wholeValues    = "the encrypted partition's index holds keyed hashes of whole values (a blind index), not the values"
	whyPrefix      = "a string search matches the start of values; " + wholeValues + ", so only :exact (the whole value) can be searched"
	whySystemOnly  = "system| (any code of a system) matches the start of codes; " + wholeValues + ", so search system|code"
	whyText        = ":text matches the start of display texts; " + wholeValues
	whyBelow       = ":below matches the start of URLs; " + wholeValues + ", so search the whole URL"
	whyContains    = ":contains matches text inside values; " + wholeValues
	whyDate        = "a date comparison needs the dates, which the encrypted partition does not index (only _lastUpdated)"
	whyNumber      = "a number or quantity comparison needs the values, which the encrypted partition does not index"
	whySort        = "sorting needs the values, which the encrypted partition does not index (they would reveal the data); it sorts by _id and _lastUpdated only"
	whyUnknownKind = "this kind of search is not known to the encrypted partition"
)

// refusals collects what a query asks that the partition cannot answer,
// each reason once.
type refusals []outcome.Issue

func (r *refusals) add(param, why string) {
	msg := "search parameter " + strconv.Quote(param) + ": " + why + "; the encrypted partition cannot answer it"
	if !slices.ContainsFunc(*r, func(is outcome.Issue) bool { return is.Diagnostics == msg }) {
		*r = append(*r, outcome.Issue{Severity: "error", Code: "not-supported", Diagnostics: msg})
	}
}

// blindQuery is q as the inner store must run it: its keys blinded as the
// rows are, in a copy (q is left as it was). A query the blind index
// cannot answer exactly is refused with a 400 that lists why, never run:
// it would find nothing, or the wrong resources.
func (p *params) blindQuery(ctx context.Context, q *search.Query) (*search.Query, error) {
	keys, err := p.keys.fresh(ctx)
	if err != nil {
		return nil, err
	}
	var r refusals
	out := p.mapQuery(keys.Blind, q, "", &r)
	if len(r) > 0 {
		return nil, &outcome.Error{Status: http.StatusBadRequest, Issues: r}
	}
	return out, nil
}

// mapQuery maps q and the queries of its chains and _has. outer names
// the parameter of the enclosing clause ("" at the top), which messages
// name: the client wrote that one.
func (p *params) mapQuery(blind *BlindKeys, q *search.Query, outer string, r *refusals) *search.Query {
	out := *q
	for _, s := range q.Sort {
		if s.Param != "_id" && s.Param != lastUpdated {
			r.add("_sort="+s.Param, whySort)
		}
	}
	out.Where = make([]search.Clause, len(q.Where))
	for i, cl := range q.Where {
		name := outer
		if name == "" {
			name = cl.Param
		}
		mapped := search.Clause{Param: cl.Param, Any: make([]search.Match, len(cl.Any))}
		for j := range cl.Any {
			mapped.Any[j] = p.mapMatch(blind, cl.Any[j], name, r)
		}
		out.Where[i] = mapped
	}
	return &out
}

// mapMatch maps one match (a copy); name is the clause's parameter.
func (p *params) mapMatch(blind *BlindKeys, m search.Match, name string, r *refusals) search.Match {
	if name == "" {
		name = matchParam(&m)
	}
	switch m.Op {
	case search.OpKey:
		keys := make([]string, 0, len(m.Keys)*len(blind.ids))
		for _, k := range m.Keys {
			keys = p.queryKeys(blind, keys, k)
		}
		m.Keys = keys
	case search.OpKeyPrefix:
		r.add(name, prefixReason(m.Prefix, name))
	case search.OpKeyContains:
		r.add(name, whyContains)
	case search.OpDate:
		if m.Param != lastUpdated {
			r.add(name, whyDate)
		}
	case search.OpNumber:
		r.add(name, whyNumber)
	case search.OpMissing:
		// Presence is kept (a sort row without values).
	case search.OpChain:
		if m.Chain != nil && m.Chain.Query != nil {
			c := *m.Chain
			c.Query = p.mapQuery(blind, c.Query, name, r)
			m.Chain = &c
		}
	case search.OpHas:
		if m.Has != nil && m.Has.Query != nil {
			h := *m.Has
			h.Query = p.mapQuery(blind, h.Query, name, r)
			m.Has = &h
		}
	default:
		r.add(name, whyUnknownKind)
	}
	return m
}

// prefixReason says why a prefix match is refused, by what made it: a
// token's :text or system|, a uri's :below, or a string search.
func prefixReason(prefix, name string) string {
	param, val, _ := strings.Cut(prefix, keySep)
	switch {
	case strings.HasSuffix(param, ":text"):
		return whyText
	case strings.HasSuffix(val, "|"):
		return whySystemOnly
	case strings.Contains(name, ":below"):
		return whyBelow
	}
	return whyPrefix
}

// matchParam is the parameter a match names, for a clause written without
// one (the server's own queries).
func matchParam(m *search.Match) string {
	switch {
	case m.Param != "":
		return m.Param
	case m.Prefix != "":
		param, _, _ := strings.Cut(m.Prefix, keySep)
		return param
	case len(m.Keys) > 0:
		param, _, _ := strings.Cut(m.Keys[0], keySep)
		return param
	}
	return "?"
}
