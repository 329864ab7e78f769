package legacyapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// FHIR is what the platform handlers need of the FHIR service
// (*fhirserver.Server): its in-process API, authorized and validated like
// the /fhir interactions it mirrors.
type FHIR interface {
	CreateWithID(ctx context.Context, typ, id string, body []byte) (*store.Version, error)
	Read(ctx context.Context, typ, id string) (*store.Version, error)
	SearchAll(ctx context.Context, typ string, params url.Values, limit int) ([]*store.Version, error)
}

// Sequence hands out the numbers of the platform ids (PT-<n>): unique
// across restarts, concurrent requests and servers sharing a store, each
// value at most once (store.Sequencer in the SQLite and MongoDB stores).
type Sequence interface {
	NextValue(ctx context.Context, name string) (int64, error)
}

// Records is what the Idempotency-Key handling needs of the server-state
// store (store.Records).
type Records interface {
	GetRecord(ctx context.Context, kind, id string) (*store.Record, error)
	PutRecord(ctx context.Context, r store.Record) error
	DeleteRecord(ctx context.Context, kind, id string) error
}

// PatientEraser anonymizes a patient's data (the right to erasure; see
// adapters.AnonymizePatient and adapters.ScrubReferencing). ErasePatient
// must be idempotent: erasing an erased patient changes nothing and
// returns the time of the first erasure. An unknown patient is an error
// matching store.ErrNotFound, or an *outcome.Error with status 404. It is
// called after the policy allowed the DELETE (patients:write and the
// admin or privacy_officer role); it records the erasure as the FHIR
// service's interaction it is (FHIREraser: through Server.Audited, the
// delete of Patient/id), so that the platform request is audited once.
type PatientEraser interface {
	ErasePatient(ctx context.Context, id string) (time.Time, error)
}

// Config configures the platform API.
type Config struct {
	// FHIR is the FHIR service (required).
	FHIR FHIR
	// Sequence numbers new patients (required).
	Sequence Sequence
	// Records keeps Idempotency-Key answers (required).
	Records Records
	// Eraser erases patients; nil: DELETE /patients/{id} answers 501.
	Eraser PatientEraser
	// ProfileURL is the national pack's profile URL (meta.profile of a new
	// Patient is ProfileURL + "/Patient").
	ProfileURL string
	// Auth serves POST /auth/login; nil leaves the route out. Its own
	// routes (/auth/token…) are described in the OpenAPI document too.
	Auth *auth.Service
	// BaseURL is the server's public base URL, the OpenAPI document's
	// server ("": "/", the server that served the document).
	BaseURL string
	// Workforce serves /workforce…; nil leaves those routes out.
	Workforce *Workforce
	// Now is the clock; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// API is the platform's JSON endpoints over the FHIR service.
type API struct {
	cfg     Config
	pack    adapters.Pack
	schemas *schemas
	openapi openAPIDoc
}

// New builds the API; the JSON Schemas are compiled here, once.
func New(cfg Config) (*API, error) {
	if cfg.FHIR == nil || cfg.Sequence == nil || cfg.Records == nil || cfg.ProfileURL == "" {
		return nil, errors.New("legacyapi: FHIR, Sequence, Records and ProfileURL are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if wf := cfg.Workforce; wf != nil {
		if wf.FHIR == nil || wf.Records == nil || wf.Tag == nil {
			return nil, errors.New("legacyapi: the workforce endpoints need FHIR, Records and Tag")
		}
		if wf.Requirements == nil {
			wf.Requirements = adapters.DefaultRequirements()
		}
	}
	sch, err := loadSchemas(cfg.Now)
	if err != nil {
		return nil, err
	}
	return &API{cfg: cfg, pack: adapters.Pack{ProfileURL: cfg.ProfileURL}, schemas: sch}, nil
}

// Route is one platform endpoint.
type Route struct {
	Method, Path string // Path in mux's syntax, e.g. /patients/{id}
	Handler      http.Handler
}

// Routes lists the platform endpoints: what cmd registers and what the
// OpenAPI document describes (a test keeps the two in step).
func (a *API) Routes() []Route {
	var rs []Route
	if a.cfg.Auth != nil {
		rs = append(rs, Route{http.MethodPost, "/auth/login", Login(a.cfg.Auth)})
	}
	rs = append(rs,
		Route{http.MethodPost, "/patients", http.HandlerFunc(a.createPatient)},
		Route{http.MethodGet, "/patients/{id}", http.HandlerFunc(a.getPatient)},
		Route{http.MethodDelete, "/patients/{id}", http.HandlerFunc(a.erasePatient)},
	)
	if a.cfg.Workforce != nil {
		rs = append(rs,
			Route{http.MethodPost, "/workforce", http.HandlerFunc(a.registerWorker)},
			Route{http.MethodPost, "/workforce/{id}/screening", http.HandlerFunc(a.recordScreening)},
			Route{http.MethodGet, "/workforce/{id}/compliance", http.HandlerFunc(a.compliance)},
		)
	}
	return append(rs, Route{http.MethodGet, "/openapi.json", http.HandlerFunc(a.openAPI)})
}

// allow authorizes a platform request through the policy table (the one
// decision point): 401 without a principal, 403 when the grant (and role)
// do not allow op on the endpoint.
func (a *API) allow(w http.ResponseWriter, r *http.Request, partition auth.Partition, endpoint string, op auth.Op) (*auth.Principal, bool) {
	p, ok := auth.FromContext(r.Context())
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kiln"`)
		httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "authentication required")
		return nil, false
	}
	req := auth.Request{Partition: partition, Endpoint: endpoint, Op: op, Role: p.Role}
	if err := p.Grant.Allows(req); err != nil {
		msg := "forbidden"
		var d *auth.Denied
		if errors.As(err, &d) {
			msg = d.Error()
		}
		httpserver.WriteError(w, http.StatusForbidden, "forbidden", msg)
		return nil, false
	}
	return p, true
}

// fail answers an error of the FHIR service or the store in the platform's
// error shape: an OperationOutcome's status and issues (as details, by
// FHIRPath location), other errors as 500 (logged) or 503.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	if oe, ok := outcome.As(err); ok {
		code := map[int]string{
			http.StatusBadRequest: "invalid_request", http.StatusUnauthorized: "unauthorized", http.StatusForbidden: "forbidden",
			http.StatusNotFound: "not_found", http.StatusGone: "not_found", http.StatusConflict: "conflict",
			http.StatusRequestEntityTooLarge: "too_large", http.StatusUnprocessableEntity: "unprocessable",
		}[oe.Status]
		status := oe.Status
		if status == http.StatusGone {
			status = http.StatusNotFound
		}
		if code == "" {
			code = "error"
		}
		if status >= 500 {
			a.cfg.Logger.ErrorContext(r.Context(), "platform request failed", "request_id", httpserver.RequestID(r.Context()), "err", err)
			httpserver.WriteError(w, status, "internal", "the request could not be completed")
			return
		}
		var details []httpserver.FieldProblem
		msg := ""
		for _, is := range oe.Issues {
			if is.Severity != "error" && is.Severity != "fatal" {
				continue
			}
			if msg == "" {
				msg = is.Diagnostics
			}
			field := ""
			if len(is.Expression) > 0 {
				field = is.Expression[0]
			}
			details = append(details, httpserver.FieldProblem{Field: field, Problem: is.Diagnostics})
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		if status != http.StatusUnprocessableEntity {
			details = nil
		}
		httpserver.WriteErrorDetails(w, status, code, msg, details)
		return
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		httpserver.WriteError(w, http.StatusServiceUnavailable, "timeout", "the request timed out")
	case errors.Is(err, context.Canceled):
		httpserver.WriteError(w, 499, "cancelled", "the request was cancelled")
	default:
		a.cfg.Logger.ErrorContext(r.Context(), "platform request failed", "request_id", httpserver.RequestID(r.Context()), "err", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "internal", "the request could not be completed")
	}
}
