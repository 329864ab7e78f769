package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// auditLog is the audit partition as the server uses it.
type auditLog interface {
	audit.Log
	Close() error
}

// openAuditStore opens the audit partition, an append-only log: the table
// audit_log of its own database file, or the collection audit_log of its
// own MongoDB database.
func openAuditStore(ctx context.Context, cfg serveConfig) (auditLog, error) {
	if cfg.MongoURI != "" {
		l, err := mongo.OpenLog(ctx, mongo.Config{URI: cfg.MongoURI, Database: cfg.MongoDatabase + "_audit", WriteConcern: cfg.MongoWriteConcern})
		if err != nil {
			return nil, fmt.Errorf("opening the MongoDB audit log: %w", err)
		}
		return l, nil
	}
	l, err := sqlite.OpenLog(ctx, filepath.Join(cfg.DataDir, "audit.db"))
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return l, nil
}

// newRecorder records into l, keying the values of recorded queries with
// the data folder's audit query key.
func newRecorder(ctx context.Context, l audit.Log, a *app, cfg serveConfig) (*audit.Recorder, error) {
	key, err := loadAuditQueryKey(cfg.DataDir, a.store)
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
// their own richer events; health probes are not interactions.
func auditRequests(rec *audit.Recorder) mux.MiddlewareFunc {
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
			sub, entity := classify(r)
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

// classify names the interaction of a request from its method and the
// route variables.
func classify(r *http.Request) (audit.Code, audit.Entity) {
	v := mux.Vars(r)
	typ, id, vid, ctype := v["type"], v["id"], v["vid"], v["ctype"]
	p := r.URL.Path
	ref := typ
	if id != "" {
		ref += "/" + id
	}
	if !strings.HasPrefix(p, "/fhir") {
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

// runAuditVerify is `kiln admin audit verify`.
func runAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin audit verify", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(stderr, synopsis("admin audit verify"))
	}
	cfg, err := parseServeConfig([]string{"--data", *data}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	l, err := openAuditStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	rep, err := audit.Verify(ctx, l, func(n int64) {
		if n%100000 == 0 {
			fmt.Fprintf(stdout, "audit verify: %d records checked\n", n)
		}
	})
	if err != nil {
		return err
	}
	if !rep.OK {
		fmt.Fprintf(stdout, "audit verify: BROKEN after %d records: first broken record %s: %s\n", rep.Checked, rep.FirstBroken, rep.Reason)
		return fmt.Errorf("the audit chain is broken at %s", rep.FirstBroken)
	}
	fmt.Fprintf(stdout, "audit verify: the chain of %d records is intact\n", rep.Checked)
	return nil
}

// runAuditHMAC is `kiln admin audit hmac`: the tag (audit.ValueTag) an
// audit record holds for each value, under the data folder's audit query
// key (or the MongoDB store's, as kiln serve would use). A value on the
// command line shows in the shell's history and the process list; on
// standard input, one per line, it does not. A data folder without the
// key is an error: a new key would confirm nothing.
func runAuditHMAC(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin audit hmac", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := parseServeConfig([]string{"--data", *data}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	var key []byte
	if cfg.MongoURI != "" {
		st, err := openStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		if key, err = loadAuditQueryKey(cfg.DataDir, st); err != nil {
			return err
		}
	} else {
		path := filepath.Join(cfg.DataDir, auditQueryKeyFile)
		if key, err = os.ReadFile(path); err != nil || len(key) < 32 {
			return fmt.Errorf("no audit query key in %s (%v): the audit records of this folder were keyed by none, or it is not a data folder", cfg.DataDir, err)
		}
	}
	values := fs.Args()
	if len(values) == 0 {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			values = append(values, strings.TrimRight(sc.Text(), "\r"))
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(values) == 0 {
		return usageError(stderr, synopsis("admin audit hmac"))
	}
	for _, v := range values {
		fmt.Fprintln(stdout, audit.ValueTag(key, v))
	}
	return nil
}
