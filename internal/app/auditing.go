package app

import (
	"context"
	"net/http"
	"os"
	"strings"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
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

// auditRequests records every routed request as an AuditEvent once it has
// been answered (router middleware: Bundle entries, dispatched through the
// router, are recorded one by one too). The issuer's endpoints record
// their own richer events; health probes are not interactions. fhirBases
// are where the FHIR services are mounted.
func auditRequests(rec *audit.Recorder, fhirBases []string) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := r.URL.Path
			if strings.HasPrefix(p, "/auth/") || p == "/livez" || p == "/readyz" || strings.HasPrefix(p, "/.well-known/") ||
				strings.HasSuffix(p, "/.well-known/smart-configuration") {
				next.ServeHTTP(w, r)
				return
			}
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r)
			sub, entity := classify(r, underAny(p, fhirBases))
			ev := audit.Event{Subtype: sub, Status: sw.status, Entity: entity, RequestID: r.Header.Get("X-Request-Id"),
				Agent: audit.Agent{Address: auth.ClientIP(r)}}
			if pr, ok := auth.FromContext(r.Context()); ok {
				ev.Agent.Who, ev.Agent.Role, ev.Agent.FHIRUser = pr.Subject, pr.Role, pr.FHIRUser
				if pr.ClientID != "" {
					ev.Agent.Role = "client"
				}
			}
			// Record waits when the queue is full: no event is dropped.
			_ = rec.Record(context.WithoutCancel(r.Context()), ev)
		})
	}
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

// underAny reports whether path starts with one of bases (as a string:
// "/fhirx", routed nowhere, is recorded as a FHIR request, as it always was).
func underAny(path string, bases []string) bool {
	for _, b := range bases {
		if strings.HasPrefix(path, b) {
			return true
		}
	}
	return false
}

// classify names the interaction of a request from its method and the
// route variables; fhir says the request is to a FHIR service.
func classify(r *http.Request, fhir bool) (audit.Code, audit.Entity) {
	v := mux.Vars(r)
	typ, id, vid, ctype := v["type"], v["id"], v["vid"], v["ctype"]
	p := r.URL.Path
	ref := typ
	if id != "" {
		ref += "/" + id
	}
	if !fhir {
		tpl := p
		if rt := mux.CurrentRoute(r); rt != nil {
			if t, err := rt.GetPathTemplate(); err == nil {
				tpl = t
			}
		}
		e := audit.Entity{Path: tpl}
		if id != "" && strings.HasPrefix(tpl, "/patients/") {
			e.What = "Patient/" + id // the same id names the FHIR Patient
		}
		switch r.Method {
		case http.MethodPost:
			return audit.SubtypeCreate, e
		case http.MethodPut:
			return audit.SubtypeUpdate, e
		case http.MethodPatch:
			return audit.SubtypePatch, e
		case http.MethodDelete:
			return audit.SubtypeDelete, e
		}
		return audit.SubtypeRead, e
	}
	switch {
	case strings.HasSuffix(p, "/metadata"):
		return audit.SubtypeCapabilities, audit.Entity{}
	case strings.Contains(p, "/$"):
		return audit.SubtypeOperation, entityOf(typ, id, ref, "")
	case vid != "":
		return audit.SubtypeVRead, audit.Entity{What: ref + "/_history/" + vid}
	case strings.HasSuffix(p, "/_history"):
		return audit.SubtypeHistory, entityOf(typ, id, ref, "")
	case ctype != "":
		return audit.SubtypeSearch, audit.Entity{What: ref, ResourceType: ctype, Query: r.URL.RawQuery}
	case strings.HasSuffix(p, "/_search") || r.Method == http.MethodGet && id == "":
		return audit.SubtypeSearch, audit.Entity{ResourceType: typ, Query: r.URL.RawQuery}
	case r.Method == http.MethodPost && typ == "":
		return audit.SubtypeBatch, audit.Entity{} // a batch or transaction: its entries are recorded one by one
	case r.Method == http.MethodGet:
		return audit.SubtypeRead, audit.Entity{What: ref}
	case r.Method == http.MethodPost:
		return audit.SubtypeCreate, audit.Entity{ResourceType: typ}
	case r.Method == http.MethodPut:
		return audit.SubtypeUpdate, entityOf(typ, id, ref, r.URL.RawQuery)
	case r.Method == http.MethodPatch:
		return audit.SubtypePatch, entityOf(typ, id, ref, r.URL.RawQuery)
	case r.Method == http.MethodDelete:
		return audit.SubtypeDelete, entityOf(typ, id, ref, r.URL.RawQuery)
	}
	return audit.SubtypeOperation, entityOf(typ, id, ref, "")
}

func entityOf(typ, id, ref, query string) audit.Entity {
	if id != "" {
		return audit.Entity{What: ref}
	}
	return audit.Entity{ResourceType: typ, Query: query}
}
