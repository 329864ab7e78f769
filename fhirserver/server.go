// Package fhirserver implements the FHIR R4 RESTful API over a store.Store:
// the interactions, bundles, paging and the CapabilityStatement.
package fhirserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/customparams"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/patch"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/httpserver"
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
	// MaxBundleEntries bounds the entries of a batch or transaction
	// (default 1000); a larger Bundle is refused with 413.
	MaxBundleEntries int
	// MaxConditionalDeletes is how many resources one conditional delete
	// may remove (default 1: only single deletes).
	MaxConditionalDeletes int
	// CursorKey seals page cursors (see cursor.go). Servers sharing a store
	// behind a load balancer must share it; nil: a random key, so cursors
	// end with the process.
	CursorKey []byte
	// Registry holds the search parameters; nil: the R4 core set.
	Registry *search.Registry
	// Version is the software version shown in the CapabilityStatement.
	Version string
	// Authorizer enforces scopes; nil allows every interaction.
	Authorizer Authorizer
	// Auditor records one AuditEvent per interaction (auditing.go); nil
	// records nothing.
	Auditor Auditor
	// Validation configures validation against StructureDefinitions; the
	// zero value checks structure only (and $validate answers 501).
	Validation Validation
	// OAuth names the authorization server's endpoints, declared in the
	// CapabilityStatement's rest.security (zero: none declared).
	OAuth OAuthURIs
	// Now is the clock (tests inject one); nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the FHIR service. Its methods are safe for concurrent use.
type Server struct {
	cfg       Config
	store     store.Store
	validator *fhirjson.Validator
	budget    *budget
	registry  *search.Registry
	// transactions: the store runs atomic transactions (else transaction
	// Bundles are refused and the CapabilityStatement does not claim them).
	transactions bool
	// capability is the CapabilityStatement, rebuilt when a custom
	// SearchParameter joins the registry.
	capability atomic.Pointer[[]byte]
	params     *customparams.Params
	// router and prefix are where Register mounted the API; Bundle entries
	// are dispatched through them.
	router http.Handler
	prefix string
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
	if cfg.MaxCount <= 0 {
		cfg.MaxCount = max(1000, cfg.DefaultCount)
	}
	cfg.DefaultCount = min(cfg.DefaultCount, cfg.MaxCount)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBundleEntries <= 0 {
		cfg.MaxBundleEntries = 1000
	}
	if len(cfg.CursorKey) == 0 {
		cfg.CursorKey = make([]byte, 32)
		if _, err := rand.Read(cfg.CursorKey); err != nil {
			return nil, fmt.Errorf("fhirserver: cursor key: %w", err)
		}
	}
	if cfg.Registry == nil {
		reg, err := search.NewRegistry()
		if err != nil {
			return nil, fmt.Errorf("fhirserver: %w", err)
		}
		cfg.Registry = reg
	}
	cfg.Registry.SetBase(cfg.BaseURL)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Registry.SetLogger(cfg.Logger)
	v, err := fhirjson.NewValidator(cfg.Limits)
	if err != nil {
		return nil, fmt.Errorf("fhirserver: %w", err)
	}
	// One maximal Bundle, or several smaller bodies, may be under validation
	// at once.
	s := &Server{cfg: cfg, store: st, validator: v, budget: newBudget(cfg.Limits.MaxBundleBytes), registry: cfg.Registry}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.params = customparams.New(s.registry, func() search.ParseOptions { return s.parseOptions(true) }, s.refreshCapabilityOnce, cfg.Logger)
	if err := s.params.Load(ctx, st); err != nil {
		return nil, err
	}
	// What the CapabilityStatement claims depends on it.
	switch err := st.Transact(ctx, func(store.Tx) error { return nil }); {
	case err == nil:
		s.transactions = true
	case !errors.Is(err, store.ErrTransactionsUnsupported):
		return nil, fmt.Errorf("fhirserver: probe the store: %w", err)
	}
	if err := s.refreshCapability(); err != nil {
		return nil, err
	}
	return s, nil
}

// call is what one request carries through its handler.
type call struct {
	format negotiate.Format
	typ    string
	id     string
	vid    string
	ctype  string // the compartment search's resource type
	// event is the interaction's AuditEvent (nil: not audited).
	event *event
}

// audit refines what the interaction's AuditEvent names, once the
// handler knows it (a Bundle's type, a POST search's form).
func (c *call) audit(edit func(*event)) {
	if c.event != nil {
		edit(c.event)
	}
}

// named records the resource the answer is about in the interaction's
// AuditEvent: the resource a create or conditional write made.
func (c *call) named(v *store.Version) {
	if c.event != nil {
		c.event.ref = v.Type + "/" + v.ID
	}
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// route is one implemented interaction at one path and method. Routes
// without an interaction authorize inside their handler (what they touch
// is known only from the body or a second path segment); audited is what
// their AuditEvent names.
type route struct {
	interaction Interaction
	method      string
	path        string
	fn          handlerFunc
	audited     Access
}

// Path patterns of resource types and the type of a compartment search.
const (
	typePath  = "/{type:[A-Z][A-Za-z]*}"
	ctypePath = "/{ctype:[A-Z][A-Za-z]*}"
)

// routes lists everything the server implements. The CapabilityStatement is
// generated from this table.
func (s *Server) routes() []route {
	in := func(in Interaction, method, path string, fn handlerFunc) route {
		return route{interaction: in, method: method, path: path, fn: fn, audited: Access{Interaction: in}}
	}
	// Authorized by the handler, and audited as an interaction it names.
	by := func(audited Interaction, op, method, path string, fn handlerFunc) route {
		return route{method: method, path: path, fn: fn, audited: Access{Interaction: audited, Operation: op}}
	}
	return []route{
		in(Capabilities, http.MethodGet, "/metadata", s.metadata),
		by(Batch, "", http.MethodPost, "", s.bundle), // batch or transaction: authorized per entry
		in(SearchSystem, http.MethodGet, "", s.searchSystem),
		in(SearchSystem, http.MethodPost, "/_search", s.searchSystem),
		in(HistorySystem, http.MethodGet, "/_history", s.history),
		by(Operation, "$reindex", http.MethodPost, "/$reindex", s.reindexOp),
		in(SearchType, http.MethodGet, typePath, s.searchType),
		in(Create, http.MethodPost, typePath, s.create),
		in(Update, http.MethodPut, typePath, s.conditionalUpdate),
		in(Delete, http.MethodDelete, typePath, s.conditionalDelete),
		in(Patch, http.MethodPatch, typePath, s.conditionalPatch),
		in(SearchType, http.MethodPost, typePath+"/_search", s.searchType),
		in(HistoryType, http.MethodGet, typePath+"/_history", s.history),
		by(Operation, "$reindex", http.MethodPost, typePath+"/$reindex", s.reindexOp),
		by(Operation, "$validate", http.MethodPost, typePath+"/$validate", s.validateOp),
		by(Operation, "$validate", http.MethodPost, typePath+"/{id}/$validate", s.validateOp),
		by(Operation, "$validate", http.MethodGet, typePath+"/{id}/$validate", s.validateOp),
		in(Read, http.MethodGet, typePath+"/{id}", s.read),
		in(Update, http.MethodPut, typePath+"/{id}", s.update),
		in(Delete, http.MethodDelete, typePath+"/{id}", s.delete),
		in(Patch, http.MethodPatch, typePath+"/{id}", s.patch),
		in(HistoryInstance, http.MethodGet, typePath+"/{id}/_history", s.history),
		by(Operation, "$everything", http.MethodGet, typePath+"/{id}/$everything", s.everything),
		by(Operation, "$everything", http.MethodPost, typePath+"/{id}/$everything", s.everything),
		by(SearchType, "", http.MethodGet, typePath+"/{id}"+ctypePath, s.searchCompartment),
		in(VRead, http.MethodGet, typePath+"/{id}/_history/{vid}", s.vread),
	}
}

// Register mounts the FHIR API on r under prefix (e.g. "/fhir"). The router
// should not clean paths (mux.Router.SkipClean): a FHIR server answers
// "/fhir/Patient//1" with 404, not a redirect.
func (s *Server) Register(r *mux.Router, prefix string) {
	sub := r.PathPrefix(prefix).MatcherFunc(func(r *http.Request, _ *mux.RouteMatch) bool {
		return r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/")
	}).Subrouter()
	s.router, s.prefix = sub, prefix
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
		add(rt.path, rt.method, s.handle(rt))
	}
	// A known path with another method: 405 with the methods it does accept
	// (HEAD wherever GET: the middleware serves HEAD as GET).
	for _, path := range paths {
		if slices.Contains(allowed[path], http.MethodGet) {
			allowed[path] = append(allowed[path], http.MethodHead)
		}
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
// negotiation, path validation, authorization, error mapping, and its one
// AuditEvent, recorded once the answer is written (auditing.go).
func (s *Server) handle(rt route) http.Handler {
	in, fn := rt.interaction, rt.fn
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vars := mux.Vars(r)
		c := &call{typ: vars["type"], id: vars["id"], vid: vars["vid"], ctype: vars["ctype"]}
		if s.recorded() {
			aw := &auditWriter{ResponseWriter: w}
			w = aw
			c.event = &event{access: rt.audited, vid: c.vid, query: r.URL.RawQuery}
			c.event.access.Type, c.event.access.ID = c.typ, c.id
			if c.ctype != "" {
				c.event.compartment = c.typ + "/" + c.id
				c.event.access.Type, c.event.access.ID = c.ctype, ""
			}
			answered := false
			defer func() {
				status := aw.status
				switch {
				case !answered:
					status = http.StatusInternalServerError // a panic, answered by Recover
				case status == 0:
					status = http.StatusOK
				}
				s.record(r.Context(), c.event, status, auth.ClientIP(r))
			}()
			s.serve(w, r, in, fn, c)
			answered = true
			return
		}
		s.serve(w, r, in, fn, c)
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, in Interaction, fn handlerFunc, c *call) {
	if err := s.prepare(r, in, c); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := fn(w, r, c); err != nil {
		s.fail(w, r, err)
	}
}

func (s *Server) prepare(r *http.Request, in Interaction, c *call) error {
	// url.Values drops a malformed pair silently: a search would then
	// run without the filter the client sent. Only an escape or a ';' can
	// be malformed.
	if q := r.URL.RawQuery; strings.ContainsAny(q, "%;") {
		if _, err := url.ParseQuery(q); err != nil {
			return outcome.New(http.StatusBadRequest, "invalid", "malformed query string: "+err.Error())
		}
	}
	var err error
	if c.format, err = negotiate.Negotiate(r); err != nil {
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
	status, f, body := s.failure(r, err)
	negotiate.WriteBody(w, f, status, body)
}

// failure is the status, format and OperationOutcome of the answer to r
// that failed with err.
func (s *Server) failure(r *http.Request, err error) (int, negotiate.Format, []byte) {
	oe, expected := outcome.As(err)
	if !expected {
		oe = toOutcome(err)
		if oe.Status == http.StatusInternalServerError {
			s.cfg.Logger.ErrorContext(r.Context(), "fhir request failed",
				"request_id", httpserver.RequestID(r.Context()), "method", r.Method, "err", err)
		}
	}
	f, nerr := negotiate.Negotiate(r)
	if nerr != nil {
		f = negotiate.Format{ContentType: negotiate.FHIRJSON}
	}
	// An answer about a request is never larger than it (issue 22: 3.2 MB
	// of identifiers drew 48.7 MB of issues), with room for a few issues
	// about a small one.
	limit := outcome.MaxBytes
	if r.ContentLength > 0 {
		limit = min(limit, max(int(r.ContentLength), minOutcomeBytes))
	}
	return oe.Status, f, oe.ResourceWithin(limit)
}

// minOutcomeBytes is what an OperationOutcome may list however small the
// request was.
const minOutcomeBytes = 4 << 10

// toOutcome maps the errors of the layers below to OperationOutcomes.
func toOutcome(err error) *outcome.Error {
	var se *search.Error
	var pe *patch.Error
	switch {
	case errors.As(err, &se):
		return outcome.New(http.StatusBadRequest, "invalid", se.Error())
	case errors.As(err, &pe):
		code := "invalid"
		if pe.Status == http.StatusUnprocessableEntity {
			code = "processing"
		}
		return outcome.New(pe.Status, code, pe.Error())
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
