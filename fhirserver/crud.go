package fhirserver

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// maxCASAttempts bounds the retries of a write that lost a race with another
// writer; beyond it the client gets 409 and may retry itself.
const maxCASAttempts = 32

func (s *Server) read(w http.ResponseWriter, r *http.Request, c *call) error {
	shaped, err := s.shaping(r, c)
	if err != nil {
		return err
	}
	v, err := s.db(r.Context()).Read(r.Context(), c.typ, c.id)
	if err != nil {
		return s.notFound(err, c)
	}
	if v.Deleted {
		return gone(c, v)
	}
	if notModified(r, v) {
		versionHeaders(w, v)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	versionHeaders(w, v)
	writeBody(w, c.format, http.StatusOK, shaped(v.Type, v.Body))
	return nil
}

// shaping reads the _summary and _elements of a read or history (R4
// allows both there), before the resources are: a malformed one is a 400
// whether or not the resource exists. It returns what they do to the body
// of a resource of a type.
func (s *Server) shaping(r *http.Request, c *call) (func(typ string, body []byte) []byte, error) {
	q, sel := r.URL.Query(), url.Values{}
	for _, k := range []string{"_summary", "_elements"} {
		if vs, ok := q[k]; ok {
			sel[k] = vs
		}
	}
	if len(sel) == 0 {
		return func(_ string, b []byte) []byte { return b }, nil
	}
	var types []string
	if c.typ != "" {
		types = []string{c.typ}
	}
	p, err := s.registry.Parse(types, sel, s.parseOptions(true))
	if err != nil {
		return nil, err
	}
	if p.Query.Summary == search.SummaryCount {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "_summary=count applies to searches, not to a read or history")
	}
	return func(typ string, b []byte) []byte { return shape(typ, b, p.Query.Summary, p.Query.Elements) }, nil
}

func (s *Server) vread(w http.ResponseWriter, r *http.Request, c *call) error {
	n, err := strconv.ParseInt(c.vid, 10, 64)
	if err != nil || n <= 0 {
		return outcome.New(http.StatusNotFound, "not-found", c.typ+"/"+c.id+" has no version "+quote(c.vid))
	}
	shaped, err := s.shaping(r, c)
	if err != nil {
		return err
	}
	v, err := s.db(r.Context()).VRead(r.Context(), c.typ, c.id, n)
	if errors.Is(err, store.ErrNotFound) {
		return outcome.New(http.StatusNotFound, "not-found", c.typ+"/"+c.id+" has no version "+c.vid)
	}
	if err != nil {
		return err
	}
	if v.Deleted {
		return gone(c, v)
	}
	versionHeaders(w, v)
	writeBody(w, c.format, http.StatusOK, shaped(v.Type, v.Body))
	return nil
}

// notModified implements conditional read: If-None-Match wins over
// If-Modified-Since, as in RFC 9110. A malformed If-None-Match is ignored.
func notModified(r *http.Request, v *store.Version) bool {
	if inm, ok := parseETagSet(r.Header, "If-None-Match"); inm.present {
		return ok && inm.matches(v)
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		t, err := http.ParseTime(ims)
		return err == nil && !v.LastUpdated.Truncate(time.Second).After(t)
	}
	return false
}

func (s *Server) notFound(err error, c *call) error {
	if errors.Is(err, store.ErrNotFound) {
		return outcome.New(http.StatusNotFound, "not-found", c.typ+"/"+c.id+" is not known")
	}
	return err
}

func gone(c *call, v *store.Version) error {
	return outcome.New(http.StatusGone, "deleted", c.typ+"/"+c.id+" was deleted (version "+strconv.FormatInt(v.Version, 10)+")")
}

// readBody reads and structurally validates a request body for the type in
// the URL. Bundles may be larger than other resources. The body's bytes are
// reserved from the validation budget while it is read and checked.
func (s *Server) readBody(r *http.Request, typ string) ([]byte, fhirjson.Info, error) {
	return s.readBodyWith(r, typ, s.validator.Check)
}

// readBodyWith is readBody with another structural check.
func (s *Server) readBodyWith(r *http.Request, typ string, check func([]byte) (fhirjson.Info, error)) ([]byte, fhirjson.Info, error) {
	if err := checkContentType(r); err != nil {
		return nil, fhirjson.Info{}, err
	}
	limit := s.cfg.Limits.MaxResourceBytes
	if typ == "Bundle" {
		limit = s.cfg.Limits.MaxBundleBytes
	}
	// Refuse a declared oversize body before reading any of it.
	if r.ContentLength > limit {
		return nil, fhirjson.Info{}, tooLargeBody(r.ContentLength, limit)
	}
	src, release, err := s.budget.body(r, limit)
	if err != nil {
		return nil, fhirjson.Info{}, err
	}
	defer release()
	body, err := fhirjson.ReadBody(src, limit, r.ContentLength)
	if err != nil {
		return nil, fhirjson.Info{}, err
	}
	var known *fhirjson.Info
	if k, ok := entryInfo(r.Context()); ok {
		known = &k // read before the transaction took the writer
	}
	info, err := bodyInfo(body, typ, check, known, isValidated(r.Context()))
	if err != nil {
		return nil, info, err
	}
	return body, info, nil
}

// tooLargeBody refuses a body of n bytes over the limit.
func tooLargeBody(n, limit int64) error {
	return outcome.New(http.StatusRequestEntityTooLarge, "too-costly",
		"the request body of "+strconv.FormatInt(n, 10)+" bytes is larger than the limit of "+strconv.FormatInt(limit, 10)+" bytes")
}

// bodyInfo checks a body read for the type in the URL. known is what was
// read of it already (before a transaction took the writer), validated
// that it passed structural validation with its Bundle.
func bodyInfo(body []byte, typ string, check func([]byte) (fhirjson.Info, error), known *fhirjson.Info, validated bool) (fhirjson.Info, error) {
	var info fhirjson.Info
	var err error
	switch {
	case known != nil:
		info = *known
	case validated:
		info, err = resourceInfo(body)
	default:
		info, err = check(body)
	}
	if err != nil {
		return info, err
	}
	if info.ResourceType != typ {
		return info, outcome.New(http.StatusBadRequest, "invalid",
			"the body is a "+info.ResourceType+" but the URL names "+typ, info.ResourceType+".resourceType")
	}
	return info, nil
}

func (s *Server) now() time.Time {
	return s.cfg.Now().UTC().Truncate(time.Millisecond)
}

// nextWrite builds the version after prev (nil: none) of a resource, with
// its index rows, once it passed the second validation layer.
func (s *Server) nextWrite(ctx context.Context, typ, id string, prev *store.Version, body []byte, method store.Method) (store.Write, error) {
	pre := s.preindexedFor(ctx, typ, id, body)
	var w store.Write
	var err error
	if restamped, ok := pre.restamp(s.nowFor(ctx), prev); ok {
		w = store.Write{Type: typ, ID: id, Version: 1, LastUpdated: s.nowFor(ctx), Method: method, Body: restamped}
	} else if w, err = s.stamp(ctx, typ, id, prev, body, method); err != nil {
		return w, err
	}
	if typ == "SearchParameter" {
		if err := s.params.Written(ctx, s.db(ctx), prev, w); err != nil {
			return w, err
		}
	}
	if w.Deleted {
		return w, nil
	}
	if rows, ok := pre.rowsAt(w.LastUpdated); ok && typ != "SearchParameter" {
		w.Index = rows
		return w, nil
	}
	w.Index, err = s.checkedRows(ctx, typ, w.Body)
	return w, err
}

// stamp builds the version after prev (nil: none) of a resource, without
// index rows: its number, its lastUpdated (which never goes backwards
// within one resource, even if the clock does) and its meta.
func (s *Server) stamp(ctx context.Context, typ, id string, prev *store.Version, body []byte, method store.Method) (store.Write, error) {
	w := store.Write{Type: typ, ID: id, Version: 1, LastUpdated: s.nowFor(ctx), Method: method}
	if prev != nil {
		w.Version = prev.Version + 1
		if w.LastUpdated.Before(prev.LastUpdated) {
			w.LastUpdated = prev.LastUpdated
		}
	}
	if body == nil {
		w.Deleted = true
		return w, nil
	}
	var err error
	w.Body, err = fhirjson.SetMeta(body, id, strconv.FormatInt(w.Version, 10), w.LastUpdated)
	return w, err
}

func stored(w store.Write) *store.Version {
	return &store.Version{Type: w.Type, ID: w.ID, Version: w.Version, LastUpdated: w.LastUpdated,
		Method: w.Method, Deleted: w.Deleted, Body: w.Body}
}

// mutate reads the current version of c's resource and writes the version
// next builds from it, atomically, if the current version meets the
// client's preconditions (412 otherwise). next returns nil to write nothing;
// mutate then returns the current version (nil if none).
//
// Where the store has transactions the read and the write share one, so
// writers queue instead of racing. Otherwise each attempt is a
// compare-and-swap; a lost race is retried after a short random pause.
// Inside a transaction Bundle the Bundle's transaction is used as is.
func (s *Server) mutate(ctx context.Context, c *call, pre preconditions, next func(prev *store.Version) (*store.Write, error)) (*store.Version, error) {
	if tx, ok := txFrom(ctx); ok {
		return s.applyOne(ctx, tx, c, pre, next)
	}
	for i := 0; ; i++ {
		var v *store.Version
		err := s.store.Transact(ctx, func(tx store.Tx) error {
			var err error
			v, err = s.applyOne(ctx, tx, c, pre, next)
			return err
		})
		if errors.Is(err, store.ErrTransactionsUnsupported) {
			v, err = s.applyOne(ctx, s.store, c, pre, next)
		}
		if !errors.Is(err, store.ErrConflict) {
			return v, err
		}
		if pre.strict() {
			return nil, outcome.New(http.StatusPreconditionFailed, "conflict",
				c.typ+"/"+c.id+" was changed by another request while this one was applied")
		}
		if i == maxCASAttempts {
			return nil, err
		}
		select {
		case <-time.After(time.Duration(1+rand.IntN(1<<min(i, 6))) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// applyOne is one attempt of mutate through rw.
func (s *Server) applyOne(ctx context.Context, rw store.Tx, c *call, pre preconditions, next func(prev *store.Version) (*store.Write, error)) (*store.Version, error) {
	prev, err := rw.Read(ctx, c.typ, c.id)
	if errors.Is(err, store.ErrNotFound) {
		prev, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := pre.check(c, prev); err != nil {
		return nil, err
	}
	wr, err := next(prev)
	if err != nil || wr == nil {
		return prev, err
	}
	if err := rw.Put(ctx, *wr); err != nil {
		return nil, err
	}
	return stored(*wr), nil
}
