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
	"github.com/kiln-fhir/kiln/fhirserver/internal/budget"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/shape"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// maxCASAttempts bounds the retries of a write that lost a race with another
// writer; beyond it the client gets 409 and may retry itself.
const maxCASAttempts = 32

// ReadIn is what read and vread take from their request, besides the
// path.
type ReadIn struct {
	// Params are the request's parameters, of which _summary and
	// _elements shape the answer.
	Params url.Values
	// IfNoneMatch (the header's lines) and IfModifiedSince make a read
	// conditional; a malformed If-None-Match is ignored.
	IfNoneMatch     []string
	IfModifiedSince string
}

// Read is the read interaction: the current version of the path's
// resource, or 304 when the client's conditions say its copy is current.
func (c *Call) Read(in ReadIn) (Response, error) {
	shaped, err := c.s.shaping(in.Params, c.typ)
	if err != nil {
		return Response{}, err
	}
	v, err := c.s.db(c.ctx).Read(c.ctx, c.typ, c.id)
	if err != nil {
		return Response{}, c.s.notFound(err, c.typ, c.id)
	}
	if v.Deleted {
		return Response{}, gone(v)
	}
	c.named(v)
	if readConditionsOf(in).notModified(v) {
		return Response{Status: http.StatusNotModified, Version: v}, nil
	}
	return Response{Status: http.StatusOK, Version: v, Body: shaped(v.Type, v.Body)}, nil
}

// VRead is the vread interaction: the path's version of its resource.
func (c *Call) VRead(in ReadIn) (Response, error) {
	typ, id, vid := c.typ, c.id, c.vid
	n, err := strconv.ParseInt(vid, 10, 64)
	if err != nil || n <= 0 {
		return Response{}, outcome.New(http.StatusNotFound, "not-found", typ+"/"+id+" has no version "+quote(vid))
	}
	shaped, err := c.s.shaping(in.Params, typ)
	if err != nil {
		return Response{}, err
	}
	v, err := c.s.db(c.ctx).VRead(c.ctx, typ, id, n)
	if errors.Is(err, store.ErrNotFound) {
		return Response{}, outcome.New(http.StatusNotFound, "not-found", typ+"/"+id+" has no version "+vid)
	}
	if err != nil {
		return Response{}, err
	}
	if v.Deleted {
		return Response{}, gone(v)
	}
	c.named(v)
	return Response{Status: http.StatusOK, Version: v, Body: shaped(v.Type, v.Body)}, nil
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

func readConditionsOf(in ReadIn) readConditions {
	inm, ok := negotiate.ParseETagSet(in.IfNoneMatch)
	return readConditions{ifNoneMatch: inm, inmMalformed: !ok, ifModifiedSince: in.IfModifiedSince}
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

func (s *Server) notFound(err error, typ, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return outcome.New(http.StatusNotFound, "not-found", typ+"/"+id+" is not known")
	}
	return err
}

func gone(v *store.Version) error {
	return outcome.New(http.StatusGone, "deleted", v.Type+"/"+v.ID+" was deleted (version "+strconv.FormatInt(v.Version, 10)+")")
}

// Budget is the bytes of request bodies that may be read and validated at
// once, shared by the service's own checks, the REST layer and Bundles.
func (s *Server) Budget() *budget.Budget { return s.budget }

// CheckResource checks a request body for the resource type its URL names
// (typ): structurally, unless known is what was read of it already (it
// passed structural validation with its Bundle).
func (s *Server) CheckResource(body []byte, typ string, known *fhirjson.Info) (fhirjson.Info, error) {
	return bodyInfo(body, typ, s.validator.Check, known)
}

// CheckBundle is CheckResource for a batch or transaction Bundle posted to
// the base: its entries are validated with it when it is a transaction,
// as each entry is processed when it is a batch.
func (s *Server) CheckBundle(body []byte, known *fhirjson.Info) (fhirjson.Info, error) {
	return bodyInfo(body, "Bundle", s.validator.CheckBundle, known)
}

// TooLarge refuses a body of n bytes over the limit.
func TooLarge(n, limit int64) error {
	return outcome.New(http.StatusRequestEntityTooLarge, "too-costly",
		"the request body of "+strconv.FormatInt(n, 10)+" bytes is larger than the limit of "+strconv.FormatInt(limit, 10)+" bytes")
}

// bodyInfo checks a body read for the type in the URL.
func bodyInfo(body []byte, typ string, check func([]byte) (fhirjson.Info, error), known *fhirjson.Info) (fhirjson.Info, error) {
	var info fhirjson.Info
	var err error
	if known != nil {
		info = *known
	} else if info, err = check(body); err != nil {
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
	if restamped, ok := pre.Restamp(s.nowFor(ctx), prev); ok {
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
	if rows, ok := pre.RowsAt(w.LastUpdated); ok && typ != "SearchParameter" {
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

// mutate reads the current version of typ/id and writes the version
// next builds from it, atomically, if the current version meets the
// client's preconditions (412 otherwise). next returns nil to write nothing;
// mutate then returns the current version (nil if none).
//
// Where the store has transactions the read and the write share one, so
// writers queue instead of racing. Otherwise each attempt is a
// compare-and-swap; a lost race is retried after a short random pause.
// Inside a transaction Bundle the Bundle's transaction is used as is.
func (s *Server) mutate(ctx context.Context, typ, id string, pre preconditions, next func(prev *store.Version) (*store.Write, error)) (*store.Version, error) {
	if tx, ok := txFrom(ctx); ok {
		return s.applyOne(ctx, tx, typ, id, pre, next)
	}
	for i := 0; ; i++ {
		var v *store.Version
		err := s.store.Transact(ctx, func(tx store.Tx) error {
			var err error
			v, err = s.applyOne(ctx, tx, typ, id, pre, next)
			return err
		})
		if errors.Is(err, store.ErrTransactionsUnsupported) {
			v, err = s.applyOne(ctx, s.store, typ, id, pre, next)
		}
		if !errors.Is(err, store.ErrConflict) {
			return v, err
		}
		if pre.strict() {
			return nil, outcome.New(http.StatusPreconditionFailed, "conflict",
				typ+"/"+id+" was changed by another request while this one was applied")
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
func (s *Server) applyOne(ctx context.Context, rw store.Tx, typ, id string, pre preconditions, next func(prev *store.Version) (*store.Write, error)) (*store.Version, error) {
	prev, err := rw.Read(ctx, typ, id)
	if errors.Is(err, store.ErrNotFound) {
		prev, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := pre.check(typ, id, prev); err != nil {
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
