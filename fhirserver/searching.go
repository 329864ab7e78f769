package fhirserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/internal/bundlejson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/compartment"
	"github.com/kiln-fhir/kiln/fhirserver/internal/cursor"
	"github.com/kiln-fhir/kiln/fhirserver/internal/ids"
	"github.com/kiln-fhir/kiln/fhirserver/internal/terminology"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

func (s *Server) parseOptions(strict bool) search.ParseOptions {
	return search.ParseOptions{
		Strict:       strict,
		DefaultCount: s.cfg.DefaultCount,
		MaxCount:     s.cfg.MaxCount,
		BaseURL:      s.cfg.BaseURL,
		Now:          s.cfg.Now(),
	}
}

// searchRequest is one search as its request names it.
type searchRequest struct {
	types  []string                  // nil: system search
	params url.Values                // query string and form body
	path   string                    // link path under the base, e.g. "/Patient" or "/Patient/1/Observation"
	extra  []search.Clause           // compartment restriction
	keep   func(*store.Version) bool // nil, or which included resources the page keeps
}

// SearchIn is what a search takes from its request, besides the path.
type SearchIn struct {
	// Params are the search's parameters: the query string's, and a POST
	// _search form's.
	Params url.Values
	// Posted: the criteria came (also) in a POST form, and the AuditEvent
	// records them all.
	Posted bool
	// Strict: Prefer: handling=strict, under which a parameter the server
	// does not know is an error rather than ignored.
	Strict bool
}

// Search is search-type (GET [type]?…, POST [type]/_search) over the
// path's type, or search-system ([base]?…) when it names none.
func (c *Call) Search(in SearchIn) (Response, error) {
	if in.Posted && c.ev != nil {
		c.ev.query = in.Params.Encode()
	}
	sr := searchRequest{params: in.Params, path: ""}
	if c.typ != "" {
		sr.types, sr.path = []string{c.typ}, "/"+c.typ
	}
	return c.s.answerSearch(c.ctx, sr, in.Strict)
}

// SearchCompartment is GET Patient/[id]/[type]?…: a search of the path's
// compartment type within the compartment its type and id name.
func (c *Call) SearchCompartment(in SearchIn) (Response, error) {
	ctype := c.ctype
	if c.typ != "Patient" {
		return Response{}, outcome.New(http.StatusNotFound, "not-supported", "compartment search is defined for the Patient compartment only; got "+c.typ)
	}
	if !profiles.IsResourceType(ctype) {
		return Response{}, unknownType(ctype)
	}
	// The compartment's own resource is read as well as the type searched
	// (docs/authorization.md: search-compartment).
	if err := c.Authorize(Access{Interaction: Read, Type: c.typ, ID: c.id}); err != nil {
		return Response{}, err
	}
	if err := c.Authorize(Access{Interaction: SearchType, Type: ctype}); err != nil {
		return Response{}, err
	}
	ms := compartment.Matches(ctype, c.id)
	if len(ms) == 0 {
		return Response{}, outcome.New(http.StatusBadRequest, "invalid", ctype+" resources are not in the Patient compartment")
	}
	return c.s.answerSearch(c.ctx, searchRequest{
		types:  []string{ctype},
		params: in.Params,
		path:   "/Patient/" + c.id + "/" + ctype,
		extra:  []search.Clause{{Param: "_compartment", Any: ms}},
	}, in.Strict)
}

// searched is a search's page, before it is rendered as a searchset.
type searched struct {
	sr     searchRequest
	parsed *search.Parsed
	page   *store.SearchPage
	// scope is what the page's sealed cursors are bound to.
	scope string
}

// searchResources parses and runs one search (strict: an unknown
// parameter is an error, not ignored).
func (s *Server) searchResources(ctx context.Context, sr searchRequest, strict bool) (searched, error) {
	parsed, err := s.parseSearch(ctx, sr.types, sr.params, strict)
	if err != nil {
		return searched{}, err
	}
	return s.runParsed(ctx, sr, parsed)
}

// runParsed runs a parsed search, continuing the page its sealed cursor
// names.
func (s *Server) runParsed(ctx context.Context, sr searchRequest, parsed *search.Parsed) (searched, error) {
	q := parsed.Query
	q.Where = append(q.Where, sr.extra...)
	scope := sr.path + "?" + parsed.Applied.Encode()
	var err error
	if sealed := sr.params.Get(cursorParam); sealed != "" {
		if q.Cursor, err = cursor.Open(s.cfg.CursorKey, scope, sealed); err != nil {
			return searched{}, err
		}
	}
	page, err := s.db(ctx).Search(ctx, q)
	if err != nil {
		return searched{}, err
	}
	page.Included = s.readable(ctx, page.Included)
	if sr.keep != nil {
		page.Included = slices.DeleteFunc(page.Included, func(v *store.Version) bool { return !sr.keep(v) })
	}
	return searched{sr: sr, parsed: parsed, page: page, scope: scope}, nil
}

// answerSearch parses and runs one search, and answers its searchset.
func (s *Server) answerSearch(ctx context.Context, sr searchRequest, strict bool) (Response, error) {
	res, err := s.searchResources(ctx, sr, strict)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: http.StatusOK, Body: s.searchBundle(res)}, nil
}

// authorizeSearch checks the searched types and every type a chain, _has
// or _include reaches: a caller must not learn through a search about
// resources it may not read.
func (s *Server) authorizeSearch(ctx context.Context, q *search.Query) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(q *search.Query, in Interaction) error
	check := func(in Interaction, typ string) error {
		if seen[string(in)+typ] {
			return nil
		}
		seen[string(in)+typ] = true
		return s.authorize(ctx, Access{Interaction: in, Type: typ})
	}
	walk = func(q *search.Query, in Interaction) error {
		if len(q.Types) == 0 {
			if err := check(SearchSystem, ""); err != nil {
				return err
			}
		}
		for _, t := range q.Types {
			if err := check(in, t); err != nil {
				return err
			}
		}
		for _, cl := range q.Where {
			for _, m := range cl.Any {
				switch {
				case m.Chain != nil:
					if err := walk(m.Chain.Query, SearchType); err != nil {
						return err
					}
				case m.Has != nil:
					if err := walk(m.Has.Query, SearchType); err != nil {
						return err
					}
				}
			}
		}
		for _, inc := range append(q.Include, q.RevInclude...) {
			for _, t := range []string{inc.Source, inc.Target} {
				if t != "" {
					if err := check(SearchType, t); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return walk(q, SearchType)
}

// searchBundle is the searchset of a search's page: its links carry the
// search as applied, with sealed cursors.
func (s *Server) searchBundle(res searched) []byte {
	sr, parsed, page, scope := res.sr, res.parsed, res.page, res.scope
	q := parsed.Query
	link := func(next string) string {
		u := s.cfg.BaseURL + sr.path
		v := cloneValues(parsed.Applied)
		if next != "" {
			v.Set(cursorParam, cursor.Seal(s.cfg.CursorKey, scope, next))
		}
		if len(v) > 0 {
			u += "?" + v.Encode()
		}
		return u
	}
	p := bundlejson.Searchset{ID: ids.New(s.cfg.Now()), At: s.now(), Total: page.Total, Self: link(q.Cursor),
		Matches: page.Matches, Included: page.Included, Summary: q.Summary, Elements: q.Elements, Base: s.cfg.BaseURL}
	if page.Next != "" {
		p.Next = link(page.Next)
	}
	if page.Prev != "" {
		p.Previous = link(page.Prev)
	}
	if len(parsed.Ignored) > 0 {
		p.Warnings = make([]outcome.Issue, 0, len(parsed.Ignored))
		for _, ig := range parsed.Ignored {
			p.Warnings = append(p.Warnings, outcome.Issue{Severity: "warning", Code: "not-supported",
				Diagnostics: "the parameter " + quote(ig.Param) + " was ignored: " + ig.Reason})
		}
	}
	return bundlejson.SearchsetOf(&p)
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v)+1)
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// readable keeps the included resources whose type the caller may read:
// _include=* and _revinclude can reach types the query does not name, and
// an include must not show what a read would refuse.
func (s *Server) readable(ctx context.Context, vs []*store.Version) []*store.Version {
	if s.cfg.Authorizer == nil {
		return vs
	}
	allowed := map[string]bool{}
	out := vs[:0]
	for _, v := range vs {
		ok, seen := allowed[v.Type]
		if !seen {
			ok = s.authorize(ctx, Access{Interaction: SearchType, Type: v.Type}) == nil
			allowed[v.Type] = ok
		}
		if ok {
			out = append(out, v)
		}
	}
	return out
}

// parseSearch parses a search over types and checks it: the caller's
// right to run it, and that no bare id is ambiguous.
func (s *Server) parseSearch(ctx context.Context, types []string, params url.Values, strict bool) (*search.Parsed, error) {
	opts := s.parseOptions(strict)
	opts.Terminology = terminology.Held{Ctx: ctx, DB: s.db(ctx), Registry: s.registry,
		DefaultCount: s.cfg.DefaultCount, MaxCount: s.cfg.MaxCount, BaseURL: s.cfg.BaseURL, Now: s.cfg.Now}
	parsed, err := s.registry.Parse(types, params, opts)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeSearch(ctx, parsed.Query); err != nil {
		return nil, err
	}
	if err := s.checkBareIDs(ctx, parsed.Query); err != nil {
		return nil, err
	}
	return parsed, nil
}

// checkBareIDs refuses a reference searched by a bare id ("subject=123")
// when resources of two of the parameter's target types have that id: the
// search cannot tell which one is meant, and would mix their matches.
func (s *Server) checkBareIDs(ctx context.Context, q *search.Query) error {
	for _, cl := range q.Where {
		for _, m := range cl.Any {
			var sub *search.Query
			switch {
			case m.Chain != nil:
				sub = m.Chain.Query
			case m.Has != nil:
				sub = m.Has.Query
			}
			if sub != nil {
				if err := s.checkBareIDs(ctx, sub); err != nil {
					return err
				}
			}
			if m.BareID == "" {
				continue
			}
			var found []string
			for _, k := range m.Keys {
				_, ref, _ := strings.Cut(k, "\x1f")
				typ, id, _ := strings.Cut(ref, "/")
				v, err := s.db(ctx).Read(ctx, typ, id)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if !v.Deleted {
					found = append(found, ref)
				}
			}
			if len(found) > 1 {
				return outcome.New(http.StatusBadRequest, "invalid", "the parameter "+quote(cl.Param)+": the id "+quote(m.BareID)+
					" names "+strings.Join(found, " and ")+"; give the type, e.g. "+cl.Param+"="+found[0])
			}
		}
	}
	return nil
}
