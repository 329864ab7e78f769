package app

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// newRecorder records into l, keying the values of recorded queries with
// the data folder's audit query key.
func newRecorder(ctx context.Context, l audit.Log, a *App) (*audit.Recorder, error) {
	key, err := LoadAuditQueryKey(a.cfg.Storage.DataDir, a.Store)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return audit.NewRecorder(ctx, l, audit.Options{Source: audit.Source{Observer: "kiln", Site: host}, Logger: a.logger, QueryKey: key})
}

// authEvent turns an issuer event into an AuditEvent.
func authEvent(e auth.Event) audit.Event {
	sub := map[string]audit.Code{
		"login": audit.SubtypeLogin, "token": audit.SubtypeToken, "refresh": audit.SubtypeToken,
		"logout": audit.SubtypeLogout, "revoke": audit.SubtypeRevoke, "introspect": audit.SubtypeIntrospect, "bearer": audit.SubtypeToken,
		"client-issue": audit.SubtypeClientIssue, "client-rotate": audit.SubtypeClientRotate, "client-expire": audit.SubtypeClientExpire,
		"password-reset": audit.SubtypePasswordReset, "client-introspect": audit.SubtypeClientIntrospect,
	}[e.Action]
	if sub.IsZero() {
		sub = audit.SubtypeToken
	}
	ev := audit.Event{Subtype: sub, Agent: audit.Agent{Who: e.Subject, Address: e.IP}}
	if !e.Success {
		ev.Outcome = audit.OutcomeMinor
	}
	return ev
}

// trail is a FHIR service's Auditor: the service records each interaction
// itself, once its outcome is known, into the app's Recorder (read when
// the interaction ends: nil records nothing, for benchmarks), marked with
// the service's partition. It also counts, in the request's context, the
// interactions recorded for the request, so that auditRefusals knows
// whether one was.
type trail struct {
	a         *App
	partition string
}

func (t trail) Record(ctx context.Context, e audit.Event) error {
	e.Partition = t.partition
	if n, ok := ctx.Value(interactionsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	rec := t.a.Recorder
	if rec == nil {
		return nil
	}
	// Record waits when the queue is full: no event is dropped.
	return rec.Record(ctx, e)
}

// interactionsKey carries the count of the interactions recorded for a
// request.
type interactionsKey struct{}

// auditRefusals is router middleware that records the requests refused
// with 401 or 403 for which no FHIR interaction was recorded: those the
// platform endpoints' policy refused before they called a FHIR service
// (a refusal by a service is recorded there, as the interaction it
// refused). Every other request is recorded by the interactions it
// performs, or not at all: a platform request is audited as the FHIR
// interactions it performs (GET /patients/{id}: the read of the Patient
// and the searches of its Conditions and Observations), not as itself.
// The issuer's endpoints record their own events; health probes and the
// discovery documents are not interactions.
func auditRefusals(a *App) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := r.URL.Path
			if strings.HasPrefix(p, "/auth/") || p == "/livez" || p == "/readyz" || strings.HasPrefix(p, "/.well-known/") ||
				strings.HasSuffix(p, "/.well-known/smart-configuration") {
				next.ServeHTTP(w, r)
				return
			}
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			var recorded atomic.Int32
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), interactionsKey{}, &recorded)))
			rec := a.Recorder
			if rec == nil || recorded.Load() > 0 || sw.status != http.StatusUnauthorized && sw.status != http.StatusForbidden {
				return
			}
			ev := audit.Event{Subtype: subtypeOfMethod(r.Method), Status: sw.status, Entity: platformEntity(r),
				RequestID: httpserver.RequestID(r.Context()), Agent: audit.Agent{Address: auth.ClientIP(r)}, Partition: a.partitionOf(p)}
			if pr, ok := auth.FromContext(r.Context()); ok {
				ev.Agent.Who, ev.Agent.Role, ev.Agent.FHIRUser = pr.Subject, pr.Role, pr.FHIRUser
				if pr.ClientID != "" {
					ev.Agent.Role = "client"
				}
			}
			_ = rec.Record(context.WithoutCancel(r.Context()), ev)
		})
	}
}

// partitionOf is the partition a refused request's path is about: the
// FHIR service mounted at its longest matching base, /workforce for the
// workforce endpoints, else the clinical partition (/patients, and the
// paths no route knows).
func (a *App) partitionOf(path string) string {
	best, partition := 0, PartitionClinical
	for _, s := range a.Services {
		if (path == s.Base || strings.HasPrefix(path, s.Base+"/")) && len(s.Base) > best {
			best, partition = len(s.Base), s.Partition
		}
	}
	if best == 0 && (path == "/workforce" || strings.HasPrefix(path, "/workforce/")) {
		partition = PartitionWorkforce
	}
	return partition
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// subtypeOfMethod is the interaction a refused platform request asked for.
func subtypeOfMethod(method string) audit.Code {
	switch method {
	case http.MethodPost:
		return audit.SubtypeCreate
	case http.MethodPut:
		return audit.SubtypeUpdate
	case http.MethodPatch:
		return audit.SubtypePatch
	case http.MethodDelete:
		return audit.SubtypeDelete
	}
	return audit.SubtypeRead
}

// platformEntity names a refused platform request by its route's
// template (never the path: it holds client-chosen ids), and the FHIR
// Patient a /patients/{id} request is about.
func platformEntity(r *http.Request) audit.Entity {
	e := audit.Entity{Path: "(unrouted)"}
	if rt := mux.CurrentRoute(r); rt != nil {
		if t, err := rt.GetPathTemplate(); err == nil {
			e.Path = t
		}
	}
	if id := mux.Vars(r)["id"]; id != "" && strings.HasPrefix(e.Path, "/patients/") {
		e.What = "Patient/" + id // the same id names the FHIR Patient
	}
	return e
}
