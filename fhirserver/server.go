// Package fhirserver is the FHIR service over a store.Store: the
// interactions of the FHIR R4 API without HTTP (Call, call.go), their
// authorization, validation, indexing and audit, the CapabilityStatement,
// and the in-process API the platform's endpoints call (service.go). The
// REST layer (fhirserver/rest) and Bundles (fhirserver/bundle) run the
// same interactions.
package fhirserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/budget"
	"github.com/kiln-fhir/kiln/fhirserver/internal/customparams"
	"github.com/kiln-fhir/kiln/fhirserver/internal/ids"
	"github.com/kiln-fhir/kiln/fhirserver/internal/patch"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/httpserver"
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
	Validation validation.Config
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
	budget    *budget.Budget
	registry  *search.Registry
	// transactions: the store runs atomic transactions (else transaction
	// Bundles are refused and the CapabilityStatement does not claim them).
	transactions bool
	// capability is the CapabilityStatement, rebuilt when a custom
	// SearchParameter joins the registry.
	capability atomic.Pointer[[]byte]
	params     *customparams.Params
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
	s := &Server{cfg: cfg, store: st, validator: v, budget: budget.New(cfg.Limits.MaxBundleBytes), registry: cfg.Registry}
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

// authorize is the one place where the interactions of the FHIR API are
// checked against the caller's grant.
func (s *Server) authorize(ctx context.Context, a Access) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	return s.cfg.Authorizer.Authorize(ctx, a)
}

// Outcome is the OperationOutcome a request (of method) that failed with
// err is answered with: the one place where errors become the FHIR API's
// statuses. An unexpected error (500) is logged.
func (s *Server) Outcome(ctx context.Context, method string, err error) *outcome.Error {
	oe, expected := outcome.As(err)
	if !expected {
		oe = toOutcome(err)
		if oe.Status == http.StatusInternalServerError {
			s.cfg.Logger.ErrorContext(ctx, "fhir request failed",
				"request_id", httpserver.RequestID(ctx), "method", method, "err", err)
		}
	}
	return oe
}

// Config is the service's configuration with its defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// NewID returns a new server-assigned resource id (ids.go).
func (s *Server) NewID() string { return ids.New(s.cfg.Now()) }

// Now is the service's clock, to the millisecond, as it stamps versions.
func (s *Server) Now() time.Time { return s.now() }

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

func quote(s string) string { return outcome.Quote(s) }

func (s *Server) resourceURL(typ, id string) string {
	return s.cfg.BaseURL + "/" + typ + "/" + id
}

func (s *Server) versionURL(v *store.Version) string {
	return s.resourceURL(v.Type, v.ID) + "/_history/" + strconv.FormatInt(v.Version, 10)
}
