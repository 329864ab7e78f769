// Package rest is the FHIR service's REST layer: HTTP only. It mounts the
// service's routes (fhirserver.Routes) on a router, reads each request into
// the input of its interaction, runs it through a fhirserver.Call, and
// writes the Response, or the OperationOutcome of the error, as the HTTP
// answer. A batch or transaction Bundle posted to the base is handed to
// fhirserver/bundle. Nothing here reads or writes the store.
package rest

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/bundle"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// api is the REST layer of one FHIR service, mounted at one prefix.
type api struct {
	svc     *fhirserver.Server
	cfg     fhirserver.Config
	bundles *bundle.Engine
}

// call is what one request carries through its handler.
type call struct {
	format negotiate.Format
	typ    string
	svc    fhirserver.Call
}

type handlerFunc func(a *api, w http.ResponseWriter, r *http.Request, c *call) error

// Register mounts svc's FHIR API on r under prefix (e.g. "/fhir"). The
// router should not clean paths (mux.Router.SkipClean): a FHIR server
// answers "/fhir/Patient//1" with 404, not a redirect.
func Register(r *mux.Router, prefix string, svc *fhirserver.Server) {
	a := &api{svc: svc, cfg: svc.Config(), bundles: bundle.New(svc, prefix)}
	sub := r.PathPrefix(prefix).MatcherFunc(func(r *http.Request, _ *mux.RouteMatch) bool {
		return r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/")
	}).Subrouter()
	// Panics in the FHIR API answer as an OperationOutcome.
	sub.Use(httpserver.Recover(a.cfg.Logger, func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, errors.New("panic"))
	}))
	var paths []string
	for _, rt := range fhirserver.Routes() {
		fn, ok := handlers[rt.Name]
		if !ok {
			panic("rest: no handler of the route " + rt.Name)
		}
		sub.Handle(template(rt.Path), a.handle(rt, fn)).Methods(rt.Method)
		if !slices.Contains(paths, rt.Path) {
			paths = append(paths, rt.Path)
		}
	}
	// A known path with another method: 405 with the methods it does accept
	// (HEAD wherever GET: the middleware serves HEAD as GET).
	for _, path := range paths {
		allow := fhirserver.AllowedMethods(path)
		sub.Handle(template(path), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			a.fail(w, r, outcome.New(http.StatusMethodNotAllowed, "not-supported", r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+allow))
		}))
	}
	sub.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, outcome.New(http.StatusNotFound, "not-found", "no FHIR endpoint at "+r.URL.Path))
	})
}

// template is a route's path as a mux template: resource types are
// matched by their shape.
func template(path string) string {
	path = strings.ReplaceAll(path, "{type}", "{type:[A-Z][A-Za-z]*}")
	return strings.ReplaceAll(path, "{ctype}", "{ctype:[A-Z][A-Za-z]*}")
}

// handle wraps an interaction with what every FHIR request needs: content
// negotiation, the path's checks and authorization (Call.Admit), error
// mapping, and its one AuditEvent, recorded once the answer is written.
func (a *api) handle(rt fhirserver.Route, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vars := mux.Vars(r)
		c := &call{typ: vars["type"]}
		c.svc = a.svc.Begin(r.Context(), fhirserver.Request{Audited: rt.Audited, Type: c.typ, ID: vars["id"], VID: vars["vid"],
			CType: vars["ctype"], Query: r.URL.RawQuery})
		if c.svc.Audited() {
			aw := &auditWriter{ResponseWriter: w}
			w = aw
			answered := false
			defer func() {
				status := aw.status
				switch {
				case !answered:
					status = http.StatusInternalServerError // a panic, answered by Recover
				case status == 0:
					status = http.StatusOK
				}
				c.svc.End(status, auth.ClientIP(r))
			}()
			a.serve(w, r, rt.Interaction, fn, c)
			answered = true
			return
		}
		a.serve(w, r, rt.Interaction, fn, c)
	})
}

func (a *api) serve(w http.ResponseWriter, r *http.Request, in fhirserver.Interaction, fn handlerFunc, c *call) {
	err := a.prepare(r, in, c)
	if err == nil {
		err = fn(a, w, r, c)
	}
	if err != nil {
		a.fail(w, r, err)
	}
}

func (a *api) prepare(r *http.Request, in fhirserver.Interaction, c *call) error {
	var err error
	if c.format, err = negotiate.Prepare(r); err != nil {
		return err
	}
	return c.svc.Admit(in)
}

// fail writes err as an OperationOutcome (fhirserver.Server.Outcome).
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, f, body := negotiate.Failure(r, a.svc.Outcome(r.Context(), r.Method, err))
	negotiate.WriteBody(w, f, status, body)
}

// send writes an interaction's Response as the HTTP answer, or fails.
func send(w http.ResponseWriter, c *call, res fhirserver.Response, err error) error {
	if err != nil {
		return err
	}
	h := w.Header()
	if v := res.Version; v != nil {
		h.Set("ETag", negotiate.ETag(v.Version))
		if !v.Deleted {
			h.Set("Last-Modified", v.LastUpdated.UTC().Format(http.TimeFormat))
		}
	}
	if res.Location != "" {
		h.Set("Location", res.Location)
	}
	if res.Body == nil {
		w.WriteHeader(res.Status)
		return nil
	}
	negotiate.WriteBody(w, c.format, res.Status, res.Body)
	return nil
}

// auditWriter keeps the status of a REST interaction's answer, for its
// AuditEvent.
type auditWriter struct {
	http.ResponseWriter
	status int
}

func (w *auditWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
