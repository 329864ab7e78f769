// Package fhirserver implements the FHIR R4 RESTful API over a store.Store:
// the interactions, bundles, paging and the CapabilityStatement.
package fhirserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/httpserver"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// Config configures the FHIR service.
type Config struct {
	// BaseURL is the public URL of the FHIR endpoint, e.g.
	// https://fhir.example.org/fhir; used in Location, fullUrl and links.
	BaseURL string
	// Limits bound request bodies.
	Limits fhirjson.Limits
	// DefaultCount and MaxCount bound page sizes (_count).
	DefaultCount, MaxCount int
	// Version is the software version shown in the CapabilityStatement.
	Version string
	// Authorizer enforces scopes; nil allows every interaction.
	Authorizer Authorizer
	// Now is the clock (tests inject one); nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the FHIR service. Its methods are safe for concurrent use.
type Server struct {
	cfg        Config
	store      store.Store
	validator  *fhirjson.Validator
	budget     *budget
	capability []byte
}

// New builds the service over st.
func New(cfg Config, st store.Store) (*Server, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("fhirserver: BaseURL is required")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.DefaultCount <= 0 {
		cfg.DefaultCount = 20
	}
	if cfg.MaxCount < cfg.DefaultCount {
		cfg.MaxCount = max(1000, cfg.DefaultCount)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	v, err := fhirjson.NewValidator(cfg.Limits)
	if err != nil {
		return nil, fmt.Errorf("fhirserver: %w", err)
	}
	// One maximal Bundle, or several smaller bodies, may be under validation
	// at once.
	s := &Server{cfg: cfg, store: st, validator: v, budget: newBudget(cfg.Limits.MaxBundleBytes)}
	s.capability, err = s.capabilityStatement()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// call is what one request carries through its handler.
type call struct {
	format format
	typ    string
	id     string
	vid    string
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// route is one implemented interaction at one path and method.
type route struct {
	interaction Interaction
	method      string
	path        string
	fn          handlerFunc
}

// routes lists everything the server implements. The CapabilityStatement is
// generated from this table.
func (s *Server) routes() []route {
	return []route{
		{Capabilities, http.MethodGet, "/metadata", s.metadata},
		{HistorySystem, http.MethodGet, "/_history", s.history},
		{Create, http.MethodPost, "/{type:[A-Z][A-Za-z]*}", s.create},
		{HistoryType, http.MethodGet, "/{type:[A-Z][A-Za-z]*}/_history", s.history},
		{Read, http.MethodGet, "/{type:[A-Z][A-Za-z]*}/{id}", s.read},
		{Update, http.MethodPut, "/{type:[A-Z][A-Za-z]*}/{id}", s.update},
		{Delete, http.MethodDelete, "/{type:[A-Z][A-Za-z]*}/{id}", s.delete},
		{HistoryInstance, http.MethodGet, "/{type:[A-Z][A-Za-z]*}/{id}/_history", s.history},
		{VRead, http.MethodGet, "/{type:[A-Z][A-Za-z]*}/{id}/_history/{vid}", s.vread},
	}
}

// notImplemented lists interactions FHIR defines that Kiln does not offer
// yet: they answer 501 with an OperationOutcome rather than 404 or 405, so a
// client learns the server understood the request.
var notImplemented = []struct{ method, path, what string }{
	{http.MethodGet, "", "system search"},
	{http.MethodPost, "", "batch and transaction Bundles"},
	{http.MethodPost, "/_search", "system search"},
	{http.MethodGet, "/{type:[A-Z][A-Za-z]*}", "search"},
	{http.MethodPost, "/{type:[A-Z][A-Za-z]*}/_search", "search"},
	{http.MethodPut, "/{type:[A-Z][A-Za-z]*}", "conditional update"},
	{http.MethodDelete, "/{type:[A-Z][A-Za-z]*}", "conditional delete"},
	{http.MethodPatch, "/{type:[A-Z][A-Za-z]*}", "conditional patch"},
	{http.MethodPatch, "/{type:[A-Z][A-Za-z]*}/{id}", "patch"},
}

// Register mounts the FHIR API on r under prefix (e.g. "/fhir"). The router
// should not clean paths (mux.Router.SkipClean): a FHIR server answers
// "/fhir/Patient//1" with 404, not a redirect.
func (s *Server) Register(r *mux.Router, prefix string) {
	sub := r.PathPrefix(prefix).MatcherFunc(func(r *http.Request, _ *mux.RouteMatch) bool {
		return r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/")
	}).Subrouter()
	// Panics in the FHIR API answer as an OperationOutcome.
	sub.Use(httpserver.Recover(s.cfg.Logger, func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errors.New("panic"))
	}))
	allowed := map[string][]string{}
	var paths []string
	add := func(path, method string, h http.Handler) {
		sub.Handle(path, h).Methods(method)
		if _, seen := allowed[path]; !seen {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
	}
	for _, rt := range s.routes() {
		add(rt.path, rt.method, s.handle(rt.interaction, rt.fn))
	}
	for _, ni := range notImplemented {
		what := ni.what
		add(ni.path, ni.method, s.handle("", func(http.ResponseWriter, *http.Request, *call) error {
			return outcome.New(http.StatusNotImplemented, "not-supported", what+" is not implemented by this server")
		}))
	}
	// A known path with another method: 405 with the methods it does accept.
	for _, path := range paths {
		allow := strings.Join(allowed[path], ", ")
		sub.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			s.fail(w, r, outcome.New(http.StatusMethodNotAllowed, "not-supported", r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+allow))
		}))
	}
	sub.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, outcome.New(http.StatusNotFound, "not-found", "no FHIR endpoint at "+r.URL.Path))
	})
}

// handle wraps an interaction with what every FHIR request needs: content
// negotiation, path validation, authorization, and error mapping.
func (s *Server) handle(in Interaction, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vars := mux.Vars(r)
		c := &call{typ: vars["type"], id: vars["id"], vid: vars["vid"]}
		if err := s.prepare(r, in, c); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := fn(w, r, c); err != nil {
			s.fail(w, r, err)
		}
	})
}

func (s *Server) prepare(r *http.Request, in Interaction, c *call) error {
	var err error
	if c.format, err = negotiate(r); err != nil {
		return err
	}
	if c.typ != "" && !profiles.IsResourceType(c.typ) {
		return outcome.New(http.StatusNotFound, "not-supported", "unknown resource type "+quote(c.typ))
	}
	if c.id != "" && !fhirjson.ValidID(c.id) {
		return outcome.New(http.StatusBadRequest, "invalid", "invalid resource id "+quote(c.id)+": ids are 1-64 characters of A-Z a-z 0-9 - .")
	}
	if in == "" {
		return nil
	}
	return s.authorize(r.Context(), Access{Interaction: in, Type: c.typ, ID: c.id})
}

// authorize is the one place where the interactions of the FHIR API are
// checked against the caller's grant.
func (s *Server) authorize(ctx context.Context, a Access) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	return s.cfg.Authorizer.Authorize(ctx, a)
}

// fail writes err as an OperationOutcome. It is the one place where errors
// become HTTP statuses for the FHIR API.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	oe, expected := outcome.As(err)
	if !expected {
		oe = toOutcome(err)
		if oe.Status == http.StatusInternalServerError {
			s.cfg.Logger.ErrorContext(r.Context(), "fhir request failed",
				"request_id", httpserver.RequestID(r.Context()), "method", r.Method, "err", err)
		}
	}
	f, nerr := negotiate(r)
	if nerr != nil {
		f = format{contentType: mimeFHIRJSON}
	}
	writeBody(w, f, oe.Status, oe.Resource())
}

// toOutcome maps the errors of the layers below to OperationOutcomes.
func toOutcome(err error) *outcome.Error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return outcome.New(http.StatusNotFound, "not-found", "resource not found")
	case errors.Is(err, store.ErrConflict):
		return outcome.New(http.StatusConflict, "conflict", "the resource was changed concurrently; retry the request")
	case errors.Is(err, store.ErrBadCursor):
		return outcome.New(http.StatusBadRequest, "invalid", "invalid or expired page cursor")
	case errors.Is(err, store.ErrTransactionsUnsupported):
		return outcome.New(http.StatusNotImplemented, "not-supported", "this deployment cannot run transactions")
	case errors.Is(err, context.DeadlineExceeded):
		return outcome.New(http.StatusServiceUnavailable, "timeout", "the request timed out")
	case errors.Is(err, context.Canceled):
		return outcome.New(499, "incomplete", "the request was cancelled")
	}
	return outcome.New(http.StatusInternalServerError, "exception", "internal server error")
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}
