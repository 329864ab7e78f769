package search

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// This file turns a FHIR search query string (already split into
// url.Values) into the IR of query.go. The value syntax of each parameter
// type is in parse_values.go, references, chains and _has in parse_ref.go,
// the result parameters (_count, _sort, _include, …) in parse_result.go and
// tokens with the terminology modifiers (:in, :below, …) in parse_token.go.
//
// Choices where the specification leaves room:
//   - ne is the row comparison CmpNe ("a value that is not eq"), not a
//     negated match: a resource without the parameter does not match.
//   - :not and :not-in with several values mean "none of them" (one
//     negated match over all the keys), not an OR of negations.
//   - system|code of a CodeSystem held here also matches "|code": elements
//     of type code are stored without their implied system.
//   - A chain or _has whose parameter no target type defines is an unknown
//     parameter (ignored, or an error when strict); a malformed value in
//     it is always an error.
//   - Empty values (name=) are ignored and reported.

// ParseOptions configure Parse.
type ParseOptions struct {
	// Strict is Prefer: handling=strict: unknown and unsupported
	// parameters are errors instead of being ignored and reported.
	Strict bool
	// DefaultCount is the page size without _count (<= 0: 20); MaxCount
	// clamps _count (<= 0: no maximum).
	DefaultCount, MaxCount int
	// BaseURL is this server's FHIR base (https://host/fhir): absolute
	// references under it are searched as relative Type/id references.
	BaseURL string
	// Now is the reference instant of the ap prefix on dates (zero: the
	// current time).
	Now time.Time
	// Terminology is the ValueSets and CodeSystems the server holds (nil:
	// the built-in ones only).
	Terminology Terminology
}

// Parsed is the result of Parse.
type Parsed struct {
	Query *Query
	// Applied holds the parameters that were applied, names with their
	// modifiers as written and values as given (_count as used), for the
	// Bundle self link.
	Applied url.Values
	// Ignored lists the parameters that were not applied, in query order.
	Ignored []Ignored
}

// Ignored is a parameter Parse left out, with the reason (for an
// OperationOutcome warning).
type Ignored struct {
	Param, Reason string
}

// Error is a search request error: a malformed value, a modifier the
// parameter's type does not have, or (in strict handling) an unknown
// parameter. The HTTP layer answers 400 naming Param.
type Error struct {
	Param, Message string
}

func (e *Error) Error() string {
	return "search parameter " + e.Param + ": " + e.Message
}

func errf(param, msg string) *Error { return &Error{Param: param, Message: msg} }

// httpParams are owned by the HTTP layer: neither applied nor ignored.
var httpParams = map[string]bool{"_format": true, "_pretty": true, "_cursor": true}

// unsupported are the special parameters this server does not implement.
var unsupported = map[string]string{
	"_text":          "full-text search (_text) is not supported",
	"_content":       "full-text search (_content) is not supported",
	"_list":          "_list is not supported",
	"_query":         "named queries (_query) are not supported",
	"_filter":        "_filter is not supported",
	"_containedType": "searching contained resources is not supported",
}

// maxDepth bounds the nesting of chains and _has.
const maxDepth = 4

// maxValues bounds the comma-separated values of one parameter and the
// parameters of one query (a hostile query must not make a huge IR).
const maxValues = 1000

// maxMatches bounds the matches of a whole query, chains included: a
// chain without a type modifier over references to any resource type
// multiplies at each hop.
const maxMatches = 2000

type parser struct {
	r   *Registry
	opt ParseOptions
	now time.Time
	// matches counts the matches made so far (see maxMatches).
	matches int
}

// Parse parses the search parameters of a search on types: one type for a
// type-level search, nil for a system search (where _type may list the
// types). Parameters are processed in name order, so the IR does not
// depend on the map order of params.
//
// Unknown and unsupported parameters are reported in Ignored, or, when
// opt.Strict, make an *Error naming the first and listing all of them. Malformed values, modifiers invalid for the
// parameter type and invalid result parameters are always an *Error.
func (r *Registry) Parse(types []string, params url.Values, opt ParseOptions) (*Parsed, error) {
	ps := &parser{r: r, opt: opt, now: opt.Now}
	if ps.now.IsZero() {
		ps.now = time.Now()
	}
	q := &Query{Count: opt.DefaultCount}
	if q.Count <= 0 {
		q.Count = 20
	}
	if opt.MaxCount > 0 && q.Count > opt.MaxCount {
		q.Count = opt.MaxCount
	}
	out := &Parsed{Query: q, Applied: url.Values{}}
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > maxValues {
		return nil, errf(names[maxValues], "too many parameters")
	}

	// _type first: the other parameters are resolved against its types.
	system := types == nil
	if vs, ok := params["_type"]; ok {
		if !system {
			return nil, errf("_type", "_type is only allowed in a system search")
		}
		ts, err := parseTypes(vs)
		if err != nil {
			return nil, err
		}
		if len(ts) > 0 {
			out.Applied["_type"] = slices.Clone(vs)
		}
		types = ts
	}
	q.Types = slices.Clone(types)

	// ignore records a parameter left out; in strict handling they make
	// the error at the end, which names all of them.
	ignore := func(name, reason string) error {
		out.Ignored = append(out.Ignored, Ignored{name, reason})
		return nil
	}
	rp := resultParams{}
	for _, name := range names {
		vals := params[name]
		base := name
		if i := strings.IndexByte(name, ':'); i >= 0 {
			base = name[:i]
		}
		switch {
		case name == "_type" || httpParams[name]:
			continue
		case isResultParam(base):
			applied, err := rp.add(ps, types, name, base, vals)
			if err != nil {
				return nil, err
			}
			if applied != nil {
				out.Applied[name] = slices.Clone(applied)
			}
			for _, ig := range rp.ignored {
				if err := ignore(ig.Param, ig.Reason); err != nil {
					return nil, err
				}
			}
			rp.ignored = rp.ignored[:0]
			continue
		case unsupported[base] != "":
			if err := ignore(name, unsupported[base]); err != nil {
				return nil, err
			}
			continue
		case base == "_contained":
			if len(vals) == 1 && vals[0] == "false" && name == base {
				out.Applied[name] = slices.Clone(vals)
			} else if err := ignore(name, "searching contained resources is not supported"); err != nil {
				return nil, err
			}
			continue
		}
		var applied []string
		for _, v := range vals {
			if v == "" {
				if err := ignore(name, "empty value"); err != nil {
					return nil, err
				}
				continue
			}
			cs, reason, err := ps.clause(types, name, v, 0)
			if err != nil {
				// Name the parameter as the client wrote it, not the part
				// of a chain or _has that failed.
				if se, ok := err.(*Error); ok && se.Param != name {
					se.Message = se.Param + ": " + se.Message
					se.Param = name
				}
				return nil, err
			}
			if reason != "" {
				if err := ignore(name, reason); err != nil {
					return nil, err
				}
				continue
			}
			q.Where = append(q.Where, cs...)
			applied = append(applied, v)
		}
		if len(applied) > 0 {
			out.Applied[name] = applied
		}
	}
	if opt.Strict && len(out.Ignored) > 0 {
		return nil, strictError(out.Ignored)
	}
	if err := rp.apply(ps, q, out.Applied); err != nil {
		return nil, err
	}
	return out, nil
}

// strictError reports every ignored parameter; Param is the first.
func strictError(ig []Ignored) *Error {
	var b strings.Builder
	b.WriteString(ig[0].Reason)
	for _, x := range ig[1:] {
		b.WriteString("; " + x.Param + ": " + x.Reason)
	}
	return errf(ig[0].Param, b.String())
}

// parseTypes reads the _type values: comma lists of resource types,
// repeated or not, without duplicates.
func parseTypes(vals []string) ([]string, error) {
	var ts []string
	for _, v := range vals {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if !profiles.IsResourceType(t) {
				return nil, errf("_type", "unknown resource type "+syntax.Quote(t))
			}
			if !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
	}
	return ts, nil
}

// typedParam is the definition of a parameter code for some of the
// searched types (types sharing one definition are grouped).
type typedParam struct {
	types []string // nil: every searched type (the definition is shared)
	p     *Param
}

// lookup resolves code on every type of types; with no types, only
// parameters defined on Resource or DomainResource exist. ok is false
// when some type lacks the parameter.
func (ps *parser) lookup(types []string, code string) ([]typedParam, bool) {
	if len(types) == 0 {
		p, ok := ps.r.Lookup("Patient", code)
		if !ok || !(slices.Contains(p.Base, "Resource") || slices.Contains(p.Base, "DomainResource")) {
			return nil, false
		}
		return []typedParam{{p: p}}, true
	}
	var out []typedParam
	for _, t := range types {
		p, ok := ps.r.Lookup(t, code)
		if !ok {
			return nil, false
		}
		found := false
		for i := range out {
			if out[i].p.URL == p.URL && out[i].p.Type == p.Type && slices.Equal(out[i].p.Targets, p.Targets) {
				out[i].types = append(out[i].types, t)
				found = true
				break
			}
		}
		if !found {
			out = append(out, typedParam{types: []string{t}, p: p})
		}
	}
	if len(out) == 1 {
		out[0].types = nil
	}
	return out, true
}

// splitName splits "code:modifier.chain" into its parts; the chain is
// everything after the first '.' (parameter codes of the core
// specification contain no '.').
func splitName(name string) (code, mod, chain string) {
	code = name
	if i := strings.IndexByte(code, '.'); i >= 0 {
		code, chain = code[:i], code[i+1:]
	}
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code, mod = code[:i], code[i+1:]
	}
	return code, mod, chain
}

// clause parses one occurrence name=value on types: one clause, or more
// that must all hold (see partMatches). A non-empty reason means the
// parameter is unknown and no clause was made.
func (ps *parser) clause(types []string, name, value string, depth int) ([]Clause, string, error) {
	if depth > maxDepth {
		return nil, "", errf(name, "chains and _has are nested too deeply")
	}
	if ps.matches > maxMatches {
		return nil, "", errf(name, "the query is too complex")
	}
	if strings.HasPrefix(name, "_has:") {
		c, reason, err := ps.hasClause(types, name, value, depth)
		if err != nil || reason != "" {
			return nil, reason, err
		}
		return []Clause{c}, "", nil
	}
	code, mod, chain := splitName(name)
	tps, ok := ps.lookup(types, code)
	if !ok {
		return nil, "unknown parameter " + syntax.Quote(code) + forTypes(types), nil
	}
	c := Clause{Param: name}
	var all []Clause
	var terms [][]Match // conjunctions, OR'ed with c.Any
	for _, tp := range tps {
		if tp.p.Type == "special" {
			return nil, "special parameter " + syntax.Quote(code) + " is not supported", nil
		}
		params := []*Param{tp.p}
		if len(tp.p.Parts) > 0 {
			params = tp.p.Parts
		}
		var parts [][]Match
		for _, p := range params {
			var ms []Match
			var err error
			var reason string
			if p.Conjoined != nil && chain == "" {
				ts, missing, err := ps.conjoinedTerms(p, name, mod, value)
				if err != nil {
					return nil, "", err
				}
				for _, t := range ts {
					terms = append(terms, withTypes(t, tp.types))
				}
				switch {
				case missing == nil:
				case len(params) > 1 && tp.types == nil:
					// Missing on a union means missing on every part.
					all = append(all, Clause{Param: name, Any: missing})
				default:
					// Any component missing; a clause of its own would
					// exclude the other searched types.
					for _, m := range withTypes(missing, tp.types) {
						terms = append(terms, []Match{m})
					}
				}
				continue
			}
			if chain != "" {
				ms, reason, err = ps.chainMatches(p, name, mod, chain, value, depth)
			} else {
				ms, err = ps.valueMatches(p, name, mod, value)
			}
			if err != nil {
				return nil, "", err
			}
			if reason != "" {
				return nil, reason, nil
			}
			parts = append(parts, withTypes(ms, tp.types))
			// The values p leaves to the parameters covering its parts
			// are found by their keys. Not for :missing: p's sort row
			// stands for all its values.
			if mod == "missing" || chain != "" {
				continue
			}
			for _, q := range p.Covered {
				ms, err := ps.valueMatches(q, name, mod, value)
				if err != nil {
					return nil, "", err
				}
				parts = append(parts, withTypes(ms, tp.types))
			}
		}
		anyOf, each := partMatches(parts, tp.types == nil)
		// Negations must all hold (":not=a,http://s|" is neither): one
		// negated key match holds the keys, but each negated prefix is a
		// match of its own, so they make one conjunction.
		if nots := slices.DeleteFunc(slices.Clone(anyOf), func(m Match) bool { return !m.Not }); len(nots) > 1 {
			terms = append(terms, nots)
			anyOf = slices.DeleteFunc(anyOf, func(m Match) bool { return m.Not })
		}
		c.Any = append(c.Any, anyOf...)
		for _, ms := range each {
			all = append(all, Clause{Param: name, Any: ms})
		}
	}
	if len(terms) > 0 {
		cnf, err := conjunctive(name, c.Any, terms)
		if err != nil {
			return nil, "", err
		}
		all = append(cnf, all...)
	} else if len(c.Any) > 0 {
		all = append([]Clause{c}, all...)
	}
	for _, cl := range all {
		ps.matches += len(cl.Any)
		if len(cl.Any) > maxValues {
			return nil, "", errf(name, "too many values")
		}
	}
	if ps.matches > maxMatches {
		return nil, "", errf(name, "the query is too complex")
	}
	return all, "", nil
}

// maxConjunctive bounds the clauses one parameter occurrence may expand
// into (see conjunctive): 2^6 for six comma values of a two-part
// composite, or 64 negated system| values.
const maxConjunctive = 64

// conjunctive turns "any of single, or any of the conjunctions terms" into
// clauses that must all hold, by distributing OR over AND: each clause
// holds single and one match from every term. (a∧b)∨(c∧d) is
// (a∨c)∧(a∨d)∧(b∨c)∧(b∨d); the IR needs no conjunction inside a clause.
func conjunctive(name string, single []Match, terms [][]Match) ([]Clause, error) {
	n := 1
	for _, t := range terms {
		if n *= len(t); n > maxConjunctive {
			return nil, errf(name, "too many values to combine (at most "+strconv.Itoa(maxConjunctive)+" combinations; repeat the parameter, or search in parts)")
		}
	}
	out := []Clause{{Param: name, Any: slices.Clone(single)}}
	for _, t := range terms {
		next := make([]Clause, 0, len(out)*len(t))
		for _, c := range out {
			for _, m := range t {
				next = append(next, Clause{Param: name, Any: append(slices.Clone(c.Any), m)})
			}
		}
		out = next
	}
	return out, nil
}

// conjoinedTerms parses a value of a composite searched through its
// components' own parameters (Param.Conjoined): one conjunction per comma
// value, one match per component. ":missing=true" (some component is
// missing) is returned as the matches one of which must hold;
// ":missing=false" is the conjunction of every component being present.
func (ps *parser) conjoinedTerms(p *Param, name, mod, raw string) (terms [][]Match, missing []Match, err error) {
	if !validModifier(p, mod) {
		return nil, nil, errf(name, "modifier :"+mod+" is not valid for "+p.Type+" parameter "+p.Code)
	}
	vals, err := values(name, raw)
	if err != nil {
		return nil, nil, err
	}
	if mod == "missing" {
		var sawTrue, sawFalse bool
		for _, v := range vals {
			if v != "true" && v != "false" {
				return nil, nil, errf(name, ":missing takes true or false, not "+syntax.Quote(v))
			}
			sawTrue, sawFalse = sawTrue || v == "true", sawFalse || v == "false"
		}
		if sawTrue && sawFalse {
			return nil, nil, nil // missing or not: every resource
		}
		var t []Match
		for _, q := range p.Conjoined {
			t = append(t, Match{Op: OpMissing, Param: q.Code, Missing: sawTrue})
		}
		if sawTrue {
			return nil, t, nil
		}
		return [][]Match{t}, nil, nil
	}
	for _, v := range vals {
		parts := syntax.Split(v, '$')
		if len(parts) != len(p.Conjoined) {
			return nil, nil, errf(name, "composite value needs "+strconv.Itoa(len(p.Conjoined))+" components separated by $: "+syntax.Quote(v))
		}
		var t []Match
		for i, q := range p.Conjoined {
			if parts[i] == "" {
				return nil, nil, errf(name, "empty composite component in "+syntax.Quote(v))
			}
			ms, err := ps.valueMatches(q, name, "", parts[i])
			if err != nil {
				return nil, nil, err
			}
			if len(ms) != 1 {
				return nil, nil, errf(name, "composite component "+syntax.Quote(parts[i])+" must be one value")
			}
			t = append(t, ms[0])
		}
		terms = append(terms, t)
	}
	return terms, missing, nil
}

// partMatches combines the matches of a parameter's parts (see
// Param.Parts; a parameter without parts is its own single part). A
// positive match holds when it holds on any part, so those are OR'ed. A
// negated key match holds when no part has the keys: the parts' keys make
// one negated match. ":missing=true" holds when every part is missing:
// when the matches apply to every searched type (all) each part's
// becomes a clause of its own (returned in each, to be AND'ed); with
// type-restricted matches a clause would exclude the other types, so they
// are OR'ed, which is exact for a parameter without parts.
func partMatches(parts [][]Match, all bool) (anyOf []Match, each [][]Match) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	var not *Match
	for _, ms := range parts {
		for _, m := range ms {
			switch {
			case m.Not && m.Op == OpKey:
				if not == nil {
					m.Keys = slices.Clone(m.Keys)
					not = &m
				} else {
					not.Keys = append(not.Keys, m.Keys...)
				}
			case m.Op == OpMissing && m.Missing && all:
				each = append(each, []Match{m})
			default:
				anyOf = append(anyOf, m)
			}
		}
	}
	if not != nil {
		anyOf = append(anyOf, *not)
	}
	return anyOf, each
}

// withTypes restricts ms to types (one copy of each match per type), or
// leaves them unrestricted when types is nil.
func withTypes(ms []Match, types []string) []Match {
	if types == nil {
		return ms
	}
	out := make([]Match, 0, len(ms)*len(types))
	for _, t := range types {
		for _, m := range ms {
			m.Type = t
			out = append(out, m)
		}
	}
	return out
}

func forTypes(types []string) string {
	if len(types) == 0 {
		return " for all resource types"
	}
	return " for " + strings.Join(types, ", ")
}
