package fhirserver

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/profiles"
)

// everything is Patient/[id]/$everything: the patient and every resource
// in its compartment, paged like a search, optionally only of _type and
// only changed since _since.
func (s *Server) everything(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.typ != "Patient" {
		return outcome.New(http.StatusNotFound, "not-supported", "$everything is defined on Patient only")
	}
	ctx := r.Context()
	if err := s.authorize(ctx, Access{Interaction: Operation, Operation: "$everything", Type: c.typ, ID: c.id}); err != nil {
		return err
	}
	patient, err := s.db(ctx).Read(ctx, c.typ, c.id)
	if err != nil {
		return s.notFound(err, c)
	}
	if patient.Deleted {
		return gone(c, patient)
	}
	params := r.URL.Query()
	applied := url.Values{}
	types := slices.Clone(compartmentTypes())
	// _type is 0..*: each value a comma-separated list, together their union.
	if vs := params["_type"]; len(vs) > 0 {
		var want []string
		for _, v := range vs {
			for _, t := range strings.Split(v, ",") {
				t = strings.TrimSpace(t)
				if !slices.Contains(types, t) {
					return outcome.New(http.StatusBadRequest, "invalid", "_type: "+quote(t)+" is not a resource type of the Patient compartment")
				}
				if !slices.Contains(want, t) {
					want = append(want, t)
				}
			}
		}
		types = want
		applied["_type"] = vs
	}
	q := &search.Query{Types: types, Count: s.cfg.DefaultCount}
	if v := params.Get("_count"); v != "" {
		if q.Count, err = s.pageCount(v, 0); err != nil {
			return err
		}
		applied.Set("_count", v)
	}
	var members []search.Match
	for _, t := range types {
		members = append(members, compartmentMatches(t, c.id)...)
	}
	q.Where = append(q.Where, search.Clause{Param: "_compartment", Any: members})
	if v := params.Get("_since"); v != "" {
		t, err := parseSince(v)
		if err != nil {
			return err
		}
		// Changed at or after the instant: the stored range starts there.
		since := t.UnixMicro()
		q.Where = append(q.Where, search.Clause{Param: "_since", Any: []search.Match{
			{Op: search.OpDate, Param: "_lastUpdated", Cmp: search.CmpSa, Low: since, High: since}}})
		applied.Set("_since", v)
	}
	if err := s.authorizeSearch(ctx, q); err != nil {
		return err
	}
	sr := searchRequest{params: params, path: "/Patient/" + c.id + "/$everything"}
	return s.answerSearch(w, r, c, sr, &search.Parsed{Query: q, Applied: applied})
}

// compartmentTypes lists the resource types that can be in a Patient
// compartment, Patient included.
var compartmentTypes = sync.OnceValue(func() []string {
	var out []string
	for _, t := range profiles.ResourceTypes() {
		if len(compartmentMatches(t, "x")) > 0 {
			out = append(out, t)
		}
	}
	return out
})
