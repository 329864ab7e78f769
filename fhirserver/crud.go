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
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/shape"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// maxCASAttempts bounds the retries of a write that lost a race with another
// writer; beyond it the client gets 409 and may retry itself.
const maxCASAttempts = 32

// The read interactions (read, vread, and history and search in
// history.go and searching.go) take an input read from their request and
// return their result without HTTP; the REST handlers and a Bundle's
// entries (entries.go) each render that result.

// readIn is what read and vread take from their request.
type readIn struct {
	typ, id, vid string
	// shape is the request's _summary and _elements (among its other
	// parameters).
	shape url.Values
	// cond is a read's If-None-Match and If-Modified-Since.
	cond readConditions
}

// readInOf reads a read's or vread's request.
func readInOf(r *http.Request, c *call) readIn {
	return readIn{typ: c.typ, id: c.id, vid: c.vid, shape: r.URL.Query(), cond: readConditionsOf(r.Header)}
}

// got is a read's answer, before it is sent anywhere.
type got struct {
	v *store.Version
	// body is v's body as _summary and _elements shape it; nil when the
	// client's copy is current (notModified).
	body        []byte
	notModified bool
}

// readResource is read: the current version of in.typ/in.id, or
// notModified when the client's conditions say its copy is current.
func (s *Server) readResource(ctx context.Context, in readIn) (got, error) {
	shaped, err := s.shaping(in.shape, in.typ)
	if err != nil {
		return got{}, err
	}
	v, err := s.db(ctx).Read(ctx, in.typ, in.id)
	if err != nil {
		return got{}, s.notFound(err, &call{typ: in.typ, id: in.id})
	}
	if v.Deleted {
		return got{}, gone(&call{typ: in.typ, id: in.id}, v)
	}
	if in.cond.notModified(v) {
		return got{v: v, notModified: true}, nil
	}
	return got{v: v, body: shaped(v.Type, v.Body)}, nil
}

// vreadResource is vread: version in.vid of in.typ/in.id.
func (s *Server) vreadResource(ctx context.Context, in readIn) (got, error) {
	n, err := strconv.ParseInt(in.vid, 10, 64)
	if err != nil || n <= 0 {
		return got{}, outcome.New(http.StatusNotFound, "not-found", in.typ+"/"+in.id+" has no version "+quote(in.vid))
	}
	shaped, err := s.shaping(in.shape, in.typ)
	if err != nil {
		return got{}, err
	}
	v, err := s.db(ctx).VRead(ctx, in.typ, in.id, n)
	if errors.Is(err, store.ErrNotFound) {
		return got{}, outcome.New(http.StatusNotFound, "not-found", in.typ+"/"+in.id+" has no version "+in.vid)
	}
	if err != nil {
		return got{}, err
	}
	if v.Deleted {
		return got{}, gone(&call{typ: in.typ, id: in.id}, v)
	}
	return got{v: v, body: shaped(v.Type, v.Body)}, nil
}

// shaping reads the _summary and _elements of a read or history (R4
// allows both there), before the resources are: a malformed one is a 400
// whether or not the resource exists. It returns what they do to the body
// of a resource of a type (typ: the type the request names, if any).
func (s *Server) shaping(q url.Values, typ string) (func(typ string, body []byte) []byte, error) {
	sel := url.Values{}
	for _, k := range []string{"_summary", "_elements"} {
		if vs, ok := q[k]; ok {
			sel[k] = vs
		}
	}
	if len(sel) == 0 {
		return func(_ string, b []byte) []byte { return b }, nil
	}
	var types []string
	if typ != "" {
		types = []string{typ}
	}
	p, err := s.registry.Parse(types, sel, s.parseOptions(true))
	if err != nil {
		return nil, err
	}
	if p.Query.Summary == search.SummaryCount {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "_summary=count applies to searches, not to a read or history")
	}
	return func(typ string, b []byte) []byte { return shape.Apply(typ, b, p.Query.Summary, p.Query.Elements) }, nil
}

// readConditions are a conditional read's If-None-Match and
// If-Modified-Since.
type readConditions struct {
	ifNoneMatch negotiate.ETagSet
	// inmMalformed: If-None-Match is malformed, and ignored (and
	// If-Modified-Since with it).
	inmMalformed    bool
	ifModifiedSince string
}

func readConditionsOf(h http.Header) readConditions {
	inm, ok := negotiate.ParseETagSet(h, "If-None-Match")
	return readConditions{ifNoneMatch: inm, inmMalformed: !ok, ifModifiedSince: h.Get("If-Modified-Since")}
}

// notModified implements conditional read: If-None-Match wins over
// If-Modified-Since, as in RFC 9110. A malformed If-None-Match is ignored.
func (rc readConditions) notModified(v *store.Version) bool {
	if rc.ifNoneMatch.Present {
		return !rc.inmMalformed && rc.ifNoneMatch.Matches(v)
	}
	if ims := rc.ifModifiedSince; ims != "" {
		t, err := http.ParseTime(ims)
		return err == nil && !v.LastUpdated.Truncate(time.Second).After(t)
	}
	return false
}

// The REST handlers of read and vread.

func (s *Server) read(w http.ResponseWriter, r *http.Request, c *call) error {
	g, err := s.readResource(r.Context(), readInOf(r, c))
	if err != nil {
		return err
	}
	s.answerRead(w, c, g)
	return nil
}

func (s *Server) vread(w http.ResponseWriter, r *http.Request, c *call) error {
	g, err := s.vreadResource(r.Context(), readInOf(r, c))
	if err != nil {
		return err
	}
	s.answerRead(w, c, g)
	return nil
}

// answerRead writes a read's result as the REST answer.
func (s *Server) answerRead(w http.ResponseWriter, c *call, g got) {
	c.named(g.v)
	versionHeaders(w, g.v)
	if g.notModified {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	negotiate.WriteBody(w, c.format, http.StatusOK, g.body)
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
	if err := negotiate.CheckContentType(r); err != nil {
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
