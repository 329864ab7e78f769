package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/rest"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// Routes assembles every route behind the one middleware chain; the
// bearer-token check runs inside it, so refused requests are logged too.
func (a *App) Routes() http.Handler {
	r := mux.NewRouter().SkipClean(true)
	a.Router = r
	r.Use(httpserver.LabelRoute)
	if a.Recorder != nil {
		r.Use(auditRefusals(a))
	}
	r.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		for _, s := range a.Services {
			if err := s.Store.Ping(ctx); err != nil {
				a.logger.Warn("readiness check failed", "err", err, "partition", s.Partition)
				httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the store is not reachable")
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ready"}`)
	}).Methods(http.MethodGet, http.MethodHead)
	// Before the FHIR routes: /fhir/.well-known/… would match /fhir/{type}/{id}.
	// The platform endpoints: /auth/login, /patients…, /openapi.json.
	for _, rt := range a.Platform.Routes() {
		r.Handle(rt.Path, rt.Handler).Methods(rt.Method)
	}
	a.Auth.Routes(func(method, path string, h http.Handler) { r.Handle(path, h).Methods(method) })
	for _, s := range a.Services {
		rest.Register(r, s.Base, s.FHIR)
	}
	opts := httpserver.Options{
		Logger: a.logger, MaxBody: a.cfg.Limits.MaxBundleBytes + 1, CORSOrigins: a.cfg.CORSOrigins,
		FHIRBases: a.FHIRBases(), OAuthPaths: auth.OAuthPaths(),
	}
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		opts.Error(w, req, http.StatusNotFound, "not_found", "no endpoint at "+req.URL.Path)
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		allow := allowedMethods(r, req)
		w.Header().Set("Allow", allow)
		opts.Error(w, req, http.StatusMethodNotAllowed, "method_not_allowed", req.Method+" is not allowed on "+req.URL.Path+"; allowed: "+allow)
	})
	return httpserver.Chain(a.Auth.Require(r), opts)
}

// allowedMethods lists the methods router has a route for at req's path,
// for the Allow header of a 405 (RFC 9110 §15.5.6); HEAD goes with GET.
func allowedMethods(router *mux.Router, req *http.Request) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := req.Clone(req.Context())
		probe.Method = m
		if m == http.MethodHead {
			probe.Method = http.MethodGet
		}
		var match mux.RouteMatch
		if router.Match(probe, &match) && match.MatchErr == nil {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}
