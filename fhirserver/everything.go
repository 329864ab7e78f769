package fhirserver

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/internal/compartment"
	"github.com/kiln-fhir/kiln/fhirserver/internal/parameters"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// OperationIn is what an operation takes from its request, besides the
// path.
type OperationIn struct {
	// Params are the query string's parameters.
	Params url.Values
	// Body reads the request's body, a Parameters resource (for
	// $validate, the resource or a Parameters); nil for a GET. It is read
	// only once the operation is authorized.
	Body func() ([]byte, error)
	// Strict: Prefer: handling=strict.
	Strict bool
}

// Everything is Patient/[id]/$everything (GET, or POST with a Parameters
// body): the patient, every resource in its compartment, and the resources
// those reference (search mode include), paged like a search, optionally
// only of _type and only changed since _since.
func (c *Call) Everything(in OperationIn) (Response, error) {
	s, ctx := c.s, c.ctx
	if c.typ != "Patient" {
		return Response{}, outcome.New(http.StatusNotFound, "not-supported", "$everything is defined on Patient only")
	}
	if err := c.Authorize(Access{Interaction: Operation, Operation: "$everything", Type: c.typ, ID: c.id}); err != nil {
		return Response{}, err
	}
	params := in.Params
	if in.Body != nil {
		body, err := parameters.Of(in.Body)
		if err != nil {
			return Response{}, err
		}
		for k, vs := range body {
			params[k] = append(params[k], vs...)
		}
	}
	patient, err := s.db(ctx).Read(ctx, c.typ, c.id)
	if err != nil {
		return Response{}, s.notFound(err, c.typ, c.id)
	}
	if patient.Deleted {
		return Response{}, gone(patient)
	}
	parsed := &search.Parsed{Applied: url.Values{}}
	for k := range params {
		switch k {
		case "_type", "_count", "_since", "_format", "_pretty", cursorParam:
		case "start", "end":
			parsed.Ignored = append(parsed.Ignored, search.Ignored{Param: k,
				Reason: "this server does not filter $everything by care dates; every date is included"})
		default:
			parsed.Ignored = append(parsed.Ignored, search.Ignored{Param: k, Reason: "not a parameter of $everything"})
		}
	}
	if len(parsed.Ignored) > 0 && in.Strict {
		slices.SortFunc(parsed.Ignored, func(a, b search.Ignored) int { return strings.Compare(a.Param, b.Param) })
		ig := parsed.Ignored[0]
		return Response{}, outcome.New(http.StatusBadRequest, "not-supported", "$everything: the parameter "+quote(ig.Param)+" cannot be applied: "+ig.Reason)
	}
	types := slices.Clone(compartment.Types())
	// _type is 0..*: each value a comma-separated list, together their
	// union. Types outside the compartment (Practitioner, Medication…)
	// come only as resources the compartment's ones reference.
	var want []string
	if vs := params["_type"]; len(vs) > 0 {
		for _, v := range vs {
			for _, t := range strings.Split(v, ",") {
				t = strings.TrimSpace(t)
				if !profiles.IsResourceType(t) {
					return Response{}, outcome.New(http.StatusBadRequest, "invalid", "_type: "+quote(t)+" is not a resource type")
				}
				if !slices.Contains(want, t) {
					want = append(want, t)
				}
			}
		}
		types = slices.DeleteFunc(slices.Clone(want), func(t string) bool { return !slices.Contains(compartment.Types(), t) })
		if len(types) == 0 {
			return Response{}, outcome.New(http.StatusBadRequest, "invalid", "_type must name at least one resource type of the Patient compartment; "+
				"the others come with it only as the resources it references")
		}
		parsed.Applied["_type"] = vs
	}
	// What the compartment references comes with it (its practitioners,
	// organizations, medications…), but never another patient.
	q := &search.Query{Types: types, Count: s.cfg.DefaultCount, Include: []search.Include{{Param: "*"}}}
	parsed.Query = q
	if v := params.Get("_count"); v != "" {
		if q.Count, err = s.pageCount(v, 0); err != nil {
			return Response{}, err
		}
		parsed.Applied.Set("_count", v)
	}
	var members []search.Match
	for _, t := range types {
		members = append(members, compartment.Matches(t, c.id)...)
	}
	q.Where = append(q.Where, search.Clause{Param: "_compartment", Any: members})
	var since time.Time
	if v := params.Get("_since"); v != "" {
		if since, err = parseSince(v); err != nil {
			return Response{}, err
		}
		// Changed at or after the instant: the stored range starts there.
		at := since.UnixMicro()
		q.Where = append(q.Where, search.Clause{Param: "_since", Any: []search.Match{
			{Op: search.OpDate, Param: "_lastUpdated", Cmp: search.CmpSa, Low: at, High: at}}})
		parsed.Applied.Set("_since", v)
	}
	if err := s.authorizeSearch(ctx, q); err != nil {
		return Response{}, err
	}
	// The referenced resources obey _type and _since as the compartment
	// does; another patient is never one of them.
	keep := func(v *store.Version) bool {
		return (v.Type != "Patient" || v.ID == c.id) &&
			(want == nil || slices.Contains(want, v.Type)) &&
			!v.LastUpdated.Before(since)
	}
	sr := searchRequest{params: params, path: "/Patient/" + c.id + "/$everything", keep: keep}
	res, err := s.runParsed(ctx, sr, parsed)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: http.StatusOK, Body: s.searchBundle(res)}, nil
}
