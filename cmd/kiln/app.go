package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/httpserver"
	"github.com/kiln-fhir/kiln/legacyapi"
)

// app is the server of one configuration: its store, its token issuer and
// the HTTP handler over both. `kiln serve` serves it; the admin commands
// use it in-process.
type app struct {
	store kilnStore
	audit auditLog // the audit partition
	rec   *audit.Recorder
	auth  *auth.Service
	fhir  *fhirserver.Server
	// platform is the platform's JSON API (legacyapi) over fhir.
	platform *legacyapi.API
	handler  http.Handler
	router   *mux.Router // inside handler: its routes, for tests that list them
	logger   *slog.Logger
}

// openApp opens the store and assembles the server on it.
func openApp(ctx context.Context, cfg serveConfig, logger *slog.Logger) (_ *app, err error) {
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	keyring, err := crypt.LoadKeyring(cfg.DataDir, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("the master key: %w", err)
	}
	svc, err := auth.NewService(ctx, auth.Config{Records: st, Sealer: keyring, Issuer: cfg.BaseURL, Audience: cfg.BaseURL + "/fhir"})
	if err != nil {
		return nil, err
	}
	if cfg.TrustedIssuers != "" {
		list, err := auth.LoadExternalIssuers(cfg.TrustedIssuers)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := svc.AddExternal(dctx, e)
			cancel()
			if err != nil {
				return nil, err
			}
		}
	}
	set, validator, err := loadProfiles(cfg.Validation)
	if err != nil {
		return nil, fmt.Errorf("loading profiles: %w", err)
	}
	for _, w := range set.Warnings {
		logger.Warn("profiles: " + w)
	}
	validation, err := cfg.Validation.serverValidation(set, validator)
	if err != nil {
		return nil, err
	}
	fhir, err := newFHIRServer(cfg, st, validation, logger)
	if err != nil {
		return nil, err
	}
	if err := installConformance(ctx, fhir, set, logger); err != nil {
		return nil, err
	}
	a := &app{store: st, auth: svc, fhir: fhir, logger: logger}
	if a.audit, err = openAuditStore(ctx, cfg); err != nil {
		return nil, err
	}
	if a.rec, err = newRecorder(ctx, a.audit, a, cfg); err != nil {
		a.audit.Close()
		return nil, err
	}
	svc.Audit = func(ctx context.Context, e auth.Event) { _ = a.rec.Record(context.WithoutCancel(ctx), authEvent(e)) }
	if a.platform, err = newPlatformAPI(cfg, a, logger); err != nil {
		a.rec.Close(ctx)
		a.audit.Close()
		return nil, err
	}
	a.handler = a.routes(cfg)
	return a, nil
}

// newPlatformAPI builds the platform endpoints over the FHIR service and
// the store: PT-<n> come from the store's sequence; DELETE /patients/{id}
// erases through the FHIR service's erasure with the policy of adapters.
func newPlatformAPI(cfg serveConfig, a *app, logger *slog.Logger) (*legacyapi.API, error) {
	return legacyapi.New(legacyapi.Config{
		FHIR:       a.fhir,
		Sequence:   a.store,
		Records:    a.store,
		Eraser:     legacyapi.FHIREraser{FHIR: a.fhir},
		ProfileURL: cfg.Validation.ProfileURL,
		Auth:       a.auth,
		BaseURL:    cfg.BaseURL,
		Logger:     logger,
	})
}

// Close closes the store, logging a failure: by then the command's outcome
// is decided.
func (a *app) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.rec.Close(ctx); err != nil {
		a.logger.Error("flushing the audit trail", "err", err)
	}
	if err := a.audit.Close(); err != nil {
		a.logger.Error("closing the audit log", "err", err)
	}
	if err := a.store.Close(); err != nil {
		a.logger.Error("closing the store", "err", err)
	}
}

// routes assembles every route behind the one middleware chain; the
// bearer-token check runs inside it, so refused requests are logged too.
func (a *app) routes(cfg serveConfig) http.Handler {
	r := mux.NewRouter().SkipClean(true)
	a.router = r
	r.Use(httpserver.LabelRoute)
	if a.rec != nil {
		r.Use(auditRequests(a.rec))
	}
	r.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.store.Ping(ctx); err != nil {
			a.logger.Warn("readiness check failed", "err", err)
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the store is not reachable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ready"}`)
	}).Methods(http.MethodGet, http.MethodHead)
	// Before the FHIR routes: /fhir/.well-known/… would match /fhir/{type}/{id}.
	// The platform endpoints: /auth/login, /patients…, /openapi.json.
	for _, rt := range a.platform.Routes() {
		r.Handle(rt.Path, rt.Handler).Methods(rt.Method)
	}
	a.auth.Routes(func(method, path string, h http.Handler) { r.Handle(path, h).Methods(method) })
	a.fhir.Register(r, "/fhir")
	opts := httpserver.Options{
		Logger: a.logger, MaxBody: cfg.MaxBundleBytes + 1, CORSOrigins: cfg.CORSOrigins,
		FHIRBases: []string{"/fhir"}, OAuthPaths: auth.OAuthPaths(),
	}
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		opts.Error(w, req, http.StatusNotFound, "not_found", "no endpoint at "+req.URL.Path)
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		allow := allowedMethods(r, req)
		w.Header().Set("Allow", allow)
		opts.Error(w, req, http.StatusMethodNotAllowed, "method_not_allowed", req.Method+" is not allowed on "+req.URL.Path+"; allowed: "+allow)
	})
	return httpserver.Chain(a.auth.Require(r), opts)
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

// adminToken is a token with every scope and the admin role, for the
// in-process admin commands (they hold the data folder, hence the keys).
func (a *app) adminToken(ctx context.Context) (string, error) {
	tok, _, err := a.auth.Tokens.Issue(ctx, "system/kiln-admin-cli", auth.RoleAdmin, "", "", auth.AllScopes(auth.ContextSystem).String())
	return tok, err
}

// cachedToken reuses a minted token for half its lifetime: a long run
// outlives a token's hour, and signing one per request would cost an RSA
// signature each.
func cachedToken(mint func(context.Context) (string, error)) func(context.Context) (string, error) {
	var mu sync.Mutex
	var tok string
	var at time.Time
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if tok == "" || time.Since(at) > auth.TokenLifetime/2 {
			t, err := mint(ctx)
			if err != nil {
				return "", err
			}
			tok, at = t, time.Now()
		}
		return tok, nil
	}
}

// randomAdminPassword returns 24 random characters that pass the password
// rules. A draw can fail them by chance (a short e-mail local part such as
// "bob" turns up in about one in 1,500 draws), so it draws again, a bounded
// number of times.
func randomAdminPassword(email string) (string, error) {
	var err error
	for range 20 {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		p := base64.RawURLEncoding.EncodeToString(b)
		if err = auth.ValidatePassword(email, p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("creating the first admin: no random password passed the password rules: %w", err)
}

// firstAdmin creates the first user when there is none: an admin with
// every scope, from KILN_ADMIN_EMAIL and KILN_ADMIN_PASSWORD or with a
// random password. It returns the credentials to print (password "" when
// it came from the environment), or ok=false when users exist.
func firstAdmin(ctx context.Context, users *auth.Users, env lookupEnv) (email, password string, ok bool, err error) {
	existing, err := users.List(ctx)
	if err != nil || len(existing) > 0 {
		return "", "", false, err
	}
	email, password = "admin@kiln.local", ""
	if v, set := env("KILN_ADMIN_EMAIL"); set && v != "" {
		email = v
	}
	fromEnv := false
	if v, set := env("KILN_ADMIN_PASSWORD"); set && v != "" {
		password, fromEnv = v, true
	} else if password, err = randomAdminPassword(email); err != nil {
		return "", "", false, err
	}
	_, err = users.Add(ctx, email, auth.RoleAdmin, auth.AllScopes(auth.ContextUser).String(), "", password)
	if errors.Is(err, auth.ErrExists) {
		return "", "", false, nil // another instance won the race
	}
	var weak *auth.PasswordError
	if fromEnv && errors.As(err, &weak) {
		return "", "", false, fmt.Errorf("creating the first admin: KILN_ADMIN_PASSWORD is refused: %w", err)
	}
	if err != nil {
		return "", "", false, fmt.Errorf("creating the first admin: %w", err)
	}
	if fromEnv {
		password = ""
	}
	return email, password, true, nil
}
