package bundle

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Each entry of a batch or transaction is read as the request it names
// (its method, url, the conditional headers of its request, and the
// Authorization, Prefer and Accept of the Bundle's request), routed by
// fhirserver.MatchRoute as the REST layer's router would route it, and run
// as that route's interaction through a fhirserver.Call: checked,
// authorized and audited as the REST request, once, with the same Access,
// and answered with the same status, headers and body.

// entryExec is what the Bundle decided for one entry before running it.
type entryExec struct {
	// assignedID is the id chosen for a create (or a conditional update
	// that creates), so references to the entry's fullUrl could be
	// rewritten to it.
	assignedID string
	// info is what was read of the entry's resource before the
	// transaction took the writer (rewriting references changes neither
	// its type nor its id).
	info *fhirjson.Info
	// validated: the resource passed structural validation with its
	// Bundle (a transaction's entries), and is not checked again.
	validated bool
}

// entryRun runs a route's interaction for an entry: req carries the
// entry's URL and headers, body is its resource.
//
// The call is passed by value, so that running an entry does not move it
// to the heap; what it records of the interaction is shared by its
// copies.
type entryRun func(e *Engine, c fhirserver.Call, req *http.Request, body []byte, x entryExec) (fhirserver.Response, error)

// dispatch reads one entry as its request and runs it.
func (e *Engine) dispatch(ctx context.Context, outer *http.Request, method, rel string, ent *entryIn, body []byte, contentType string, x entryExec) entryResult {
	target := e.prefix + "/" + rel
	if strings.HasPrefix(rel, "?") { // a system search: [base]?_type=…
		target = e.prefix + rel
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return e.failed(outer, outcome.New(http.StatusBadRequest, "invalid", "invalid request url "+quote(rel)+": "+err.Error()))
	}
	req.RemoteAddr = outer.RemoteAddr
	req.Host = outer.Host
	for _, h := range []string{"Authorization", "Prefer", "Accept"} {
		if v := outer.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", contentType)
	}
	if rq := ent.Request; rq != nil {
		set := func(k, v string) {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		set("If-None-Match", rq.IfNoneMatch)
		set("If-Modified-Since", rq.IfModifiedSince)
		set("If-Match", rq.IfMatch)
		set("If-None-Exist", rq.IfNoneExist)
	}
	m := fhirserver.MatchRoute(method, strings.TrimPrefix(req.URL.Path, e.prefix))
	switch {
	case m.Route != nil:
		return e.runEntry(ctx, req, m, body, x)
	case m.Allow != "":
		return e.entryFailure(req, outcome.New(http.StatusMethodNotAllowed, "not-supported", req.Method+" is not allowed on "+req.URL.Path+"; allowed: "+m.Allow))
	}
	return e.entryFailure(req, outcome.New(http.StatusNotFound, "not-found", "no FHIR endpoint at "+req.URL.Path))
}

// runEntry runs an entry as the REST layer runs a request: the format,
// the path's checks and the authorization (Call.Admit), the interaction,
// its one AuditEvent, and a panic answered with 500.
func (e *Engine) runEntry(ctx context.Context, req *http.Request, m fhirserver.RouteMatch, body []byte, x entryExec) (res entryResult) {
	rt := m.Route
	c := e.svc.Begin(ctx, fhirserver.Request{Audited: rt.Audited, Type: m.Type, ID: m.ID, VID: m.VID, CType: m.CType, Query: req.URL.RawQuery})
	answered := false
	defer func() {
		if !answered {
			p := recover()
			if p == http.ErrAbortHandler {
				panic(p)
			}
			e.cfg.Logger.ErrorContext(ctx, "panic serving a Bundle entry", "method", req.Method, "panic", p)
			res = e.entryFailure(req, errors.New("panic"))
		}
		if c.Audited() {
			status := res.status
			if !answered {
				status = http.StatusInternalServerError
			}
			c.End(status, auth.ClientIP(req))
		}
	}()
	format, err := negotiate.Prepare(req)
	if err == nil {
		err = c.Admit(rt.Interaction)
	}
	var out fhirserver.Response
	if err == nil {
		out, err = e.runs[m.Index](e, c, req, body, x)
	}
	if err != nil {
		res = e.entryFailure(req, err)
	} else {
		res = entryResultOf(out, format)
	}
	answered = true
	return res
}

// entryResultOf is an interaction's Response as the entry's, formatted as
// the REST layer would send its body.
func entryResultOf(res fhirserver.Response, f negotiate.Format) entryResult {
	out := entryResult{status: res.Status, location: res.Location}
	if res.Body != nil {
		out.body = negotiate.Formatted(f, res.Body)
	}
	if v := res.Version; v != nil {
		out.etag = negotiate.ETag(v.Version)
		if !v.Deleted {
			out.ref, out.lastUpdated = v.Type+"/"+v.ID, v.LastUpdated
		}
	}
	return out
}

// entryFailure is the answer the REST layer sends for err, as an entry's.
func (e *Engine) entryFailure(req *http.Request, err error) entryResult {
	status, f, body := negotiate.Failure(req, e.svc.Outcome(req.Context(), req.Method, err))
	return entryResult{status: status, body: negotiate.Formatted(f, body)}
}

// runs are the entry runs of the routes, by name (fhirserver.Route.Name).
var runs = map[string]entryRun{
	"capabilities": func(_ *Engine, c fhirserver.Call, _ *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.Capabilities()
	},
	"bundle": (*Engine).nested,
	"search": func(e *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		params, err := negotiate.SearchParams(req, e.cfg.Limits.MaxResourceBytes)
		if err != nil {
			return fhirserver.Response{}, err
		}
		return c.Search(fhirserver.SearchIn{Params: params, Posted: req.Method == http.MethodPost, Strict: negotiate.PreferStrict(req)})
	},
	"search-compartment": func(_ *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.SearchCompartment(fhirserver.SearchIn{Params: req.URL.Query(), Strict: negotiate.PreferStrict(req)})
	},
	"history": func(_ *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.History(req.URL.Query())
	},
	"read": func(_ *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.Read(readIn(req))
	},
	"vread": func(_ *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.VRead(readIn(req))
	},
	"create": writing((*Engine).writeIn, func(c fhirserver.Call, in fhirserver.WriteIn) (fhirserver.Response, error) { return c.Create(in) }),
	"update": writing((*Engine).writeIn, func(c fhirserver.Call, in fhirserver.WriteIn) (fhirserver.Response, error) { return c.Update(in) }),
	"conditional-update": writing((*Engine).writeIn, func(c fhirserver.Call, in fhirserver.WriteIn) (fhirserver.Response, error) {
		return c.ConditionalUpdate(in)
	}),
	"delete": func(_ *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.Delete(conditions(req))
	},
	"conditional-delete": func(_ *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.ConditionalDelete(fhirserver.WriteIn{Return: negotiate.PreferReturn(req)})
	},
	"patch": writing((*Engine).patchIn, func(c fhirserver.Call, in fhirserver.WriteIn) (fhirserver.Response, error) { return c.Patch(in) }),
	"conditional-patch": writing((*Engine).patchIn, func(c fhirserver.Call, in fhirserver.WriteIn) (fhirserver.Response, error) {
		return c.ConditionalPatch(in)
	}),
	"validate": func(e *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.Validate(e.operationIn(req))
	},
	"everything": func(e *Engine, c fhirserver.Call, req *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.Everything(e.operationIn(req))
	},
	"reindex": func(_ *Engine, c fhirserver.Call, _ *http.Request, _ []byte, _ entryExec) (fhirserver.Response, error) {
		return c.ReindexOp()
	},
}

// writing is the run of a write: read reads its entry, write runs it.
func writing(read func(e *Engine, req *http.Request, typ string, body []byte, x entryExec) (fhirserver.WriteIn, error),
	write func(fhirserver.Call, fhirserver.WriteIn) (fhirserver.Response, error)) entryRun {
	return func(e *Engine, c fhirserver.Call, req *http.Request, body []byte, x entryExec) (fhirserver.Response, error) {
		in, err := read(e, req, c.Type(), body, x)
		if err != nil {
			return fhirserver.Response{}, err
		}
		return write(c, in)
	}
}

func readIn(req *http.Request) fhirserver.ReadIn {
	return fhirserver.ReadIn{Params: req.URL.Query(), IfNoneMatch: req.Header.Values("If-None-Match"), IfModifiedSince: req.Header.Get("If-Modified-Since")}
}

// conditions is what a write takes from the entry's headers.
func conditions(req *http.Request) fhirserver.WriteIn {
	return fhirserver.WriteIn{IfMatch: req.Header.Values("If-Match"), IfNoneMatch: req.Header.Values("If-None-Match"),
		IfNoneExist: req.Header.Get("If-None-Exist"), Return: negotiate.PreferReturn(req)}
}

// writeIn reads a create's or update's entry: its resource is of the
// path's type.
func (e *Engine) writeIn(req *http.Request, typ string, body []byte, x entryExec) (fhirserver.WriteIn, error) {
	body, info, err := e.entryResource(req.Context(), typ, body, x, false)
	if err != nil {
		return fhirserver.WriteIn{}, err
	}
	in := conditions(req)
	in.Body, in.Info, in.AssignedID = body, info, x.assignedID
	return in, nil
}

// patchIn reads a PATCH entry: a JSON Patch from a Binary, or a FHIRPath
// Patch, as the REST layer reads a PATCH body.
func (e *Engine) patchIn(req *http.Request, _ string, body []byte, x entryExec) (fhirserver.WriteIn, error) {
	in := conditions(req)
	var err error
	in.Body, in.JSONPatch, err = negotiate.ReadPatch(req.Header.Get("Content-Type"), bytes.NewReader(body), e.cfg.Limits.MaxResourceBytes, func() ([]byte, error) {
		body, _, err := e.entryResource(req.Context(), "Parameters", body, x, false)
		return body, err
	})
	return in, err
}

// operationIn reads an operation's entry; its resource is read only once
// the operation is authorized.
func (e *Engine) operationIn(req *http.Request) fhirserver.OperationIn {
	in := fhirserver.OperationIn{Params: req.URL.Query(), Strict: negotiate.PreferStrict(req)}
	if req.Method == http.MethodPost {
		in.Body = func() ([]byte, error) { return negotiate.ReadRaw(req, e.svc.Budget(), e.cfg.Limits.MaxResourceBytes) }
	}
	return in
}

// nested runs a Bundle posted to the base by an entry, as the REST layer
// runs one posted to it.
func (e *Engine) nested(c fhirserver.Call, req *http.Request, body []byte, x entryExec) (fhirserver.Response, error) {
	body, info, err := e.entryResource(req.Context(), "Bundle", body, x, true)
	if err != nil {
		return fhirserver.Response{}, err
	}
	out, err := e.Run(req, &c, body, info)
	if err != nil {
		return fhirserver.Response{}, err
	}
	return fhirserver.Response{Status: http.StatusOK, Body: out}, nil
}

// entryResource checks an entry's resource as the REST layer checks a
// request body: its size, the validation budget, its structure (unless it
// passed with its Bundle) and its type (a Bundle posted to the base:
// asBundle).
func (e *Engine) entryResource(ctx context.Context, typ string, body []byte, x entryExec, asBundle bool) ([]byte, fhirjson.Info, error) {
	limit := e.cfg.Limits.MaxResourceBytes
	if typ == "Bundle" {
		limit = e.cfg.Limits.MaxBundleBytes
	}
	if n := int64(len(body)); n > limit {
		return nil, fhirjson.Info{}, fhirserver.TooLarge(n, limit)
	}
	release, err := e.svc.Budget().Acquire(ctx, int64(len(body)))
	if err != nil {
		return nil, fhirjson.Info{}, err
	}
	defer release()
	known := x.info
	if known == nil && x.validated {
		info, err := resourceInfo(body)
		if err != nil {
			return nil, info, err
		}
		known = &info
	}
	var info fhirjson.Info
	if asBundle {
		info, err = e.svc.CheckBundle(body, known)
	} else {
		info, err = e.svc.CheckResource(body, typ, known)
	}
	if err != nil {
		return nil, info, err
	}
	return body, info, nil
}
