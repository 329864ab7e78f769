package fhirserver

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/internal/bundlejson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/fhirtime"
	"github.com/kiln-fhir/kiln/fhirserver/internal/ids"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// cursorParam carries the opaque keyset cursor of history pages.
const cursorParam = "_cursor"

// pageBytes bounds the resource bytes of one page: a page of large
// resources ends early (with a next link) rather than filling memory.
const pageBytes = 16 << 20

// historyIn is what a history interaction takes from its request.
type historyIn struct {
	typ, id string // both empty: system history; id empty: type history
	params  url.Values
}

// History is history-instance, history-type or history-system, as the
// path names a resource, a type or neither: newest version first, paged
// by keyset cursors. params are the request's parameters.
func (c *Call) History(params url.Values) (Response, error) {
	h, err := c.s.historyResources(c.ctx, historyIn{typ: c.typ, id: c.id, params: params})
	if err != nil {
		return Response{}, err
	}
	return Response{Status: http.StatusOK, Body: c.s.historyBundle(h)}, nil
}

// historied is a history's page, before it is rendered as a Bundle.
type historied struct {
	in     historyIn
	page   *store.HistoryPage
	shaped func(string, []byte) []byte
}

// historyResources serves the instance, type and system history
// interactions: newest version first, paged by keyset cursors.
func (s *Server) historyResources(ctx context.Context, in historyIn) (historied, error) {
	q, err := s.historyQuery(in.params, in.typ, in.id)
	if err != nil {
		return historied{}, err
	}
	shaped, err := s.shaping(in.params, in.typ)
	if err != nil {
		return historied{}, err
	}
	page, err := s.db(ctx).History(ctx, q)
	if err != nil {
		return historied{}, err
	}
	if in.id != "" && len(page.Versions) == 0 {
		// History of a resource that never existed is a 404, not an empty page.
		if _, err := s.db(ctx).Read(ctx, in.typ, in.id); err != nil {
			return historied{}, s.notFound(err, in.typ, in.id)
		}
	}
	return historied{in: in, page: page, shaped: shaped}, nil
}

func (s *Server) historyQuery(params url.Values, typ, id string) (store.HistoryQuery, error) {
	q := store.HistoryQuery{Type: typ, ID: id, Count: s.cfg.DefaultCount, MaxBytes: pageBytes, Cursor: params.Get(cursorParam)}
	var err error
	if v := params.Get("_count"); v != "" {
		if q.Count, err = s.pageCount(v, 1); err != nil {
			return q, err
		}
	}
	if v := params.Get("_since"); v != "" {
		if q.Since, err = parseSince(v); err != nil {
			return q, err
		}
	}
	if v := params.Get("_at"); v != "" {
		t, err := fhirtime.Parse(v)
		if err != nil {
			return q, outcome.New(http.StatusBadRequest, "invalid", "_at must be a date or dateTime: "+err.Error())
		}
		q.AtLow, q.AtHigh = t.Low, t.High
	}
	return q, nil
}

// historyBundle is the history Bundle of a history's page.
func (s *Server) historyBundle(h historied) []byte {
	p := bundlejson.History{ID: ids.New(s.cfg.Now()), At: s.now(), Self: s.pageURL(&h.in, h.in.params.Get(cursorParam)),
		Versions: h.page.Versions, Shaped: h.shaped, Base: s.cfg.BaseURL}
	if h.page.Next != "" {
		p.Next = s.pageURL(&h.in, h.page.Next)
	}
	return bundlejson.HistoryOf(&p)
}

// pageURL is the request's URL on the public base, with the cursor replaced.
// Only the parameters history understands are carried over.
func (s *Server) pageURL(h *historyIn, cursor string) string {
	in := h.params
	out := url.Values{}
	for _, k := range []string{"_count", "_since", "_at", "_summary", "_elements", "_format", "_pretty"} {
		if v := in.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	if cursor != "" {
		out.Set(cursorParam, cursor)
	}
	u := s.cfg.BaseURL
	if h.typ != "" {
		u += "/" + h.typ
		if h.id != "" {
			u += "/" + h.id
		}
	}
	u += "/_history"
	if len(out) > 0 {
		u += "?" + out.Encode()
	}
	return u
}

// pageCount reads a _count of at least least, clamped to the maximum.
func (s *Server) pageCount(v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, outcome.New(http.StatusBadRequest, "invalid", "_count must be an integer of at least "+strconv.Itoa(least)+"; got "+quote(v))
	}
	return min(n, s.cfg.MaxCount), nil
}

// parseSince reads _since: the start of the instant (or date) given.
func parseSince(v string) (time.Time, error) {
	t, err := fhirtime.Parse(v)
	if err != nil {
		return time.Time{}, outcome.New(http.StatusBadRequest, "invalid", "_since must be an instant such as 2024-01-31T12:00:00Z: "+err.Error())
	}
	return t.Low, nil
}
