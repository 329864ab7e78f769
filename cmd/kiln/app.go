package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/internal/app"
	"github.com/kiln-fhir/kiln/legacyapi"
)

// openApp assembles the server of a `kiln serve` configuration: it loads
// the profiles the configuration names, then the app on them.
func openApp(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*app.App, error) {
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
	ac := cfg.appConfig(logger)
	ac.Validation, ac.Conformance = validation, set
	if ac.WorkforceRequirements, err = workforceRequirements(cfg.WorkforceRequirements); err != nil {
		return nil, err
	}
	return app.Open(ctx, ac)
}

// workforceRequirements reads --workforce-requirements ("": the built-in
// table).
func workforceRequirements(path string) (*adapters.Requirements, error) {
	if path == "" {
		return legacyapi.WorkforceRequirements(nil)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--workforce-requirements: %w", err)
	}
	r, err := legacyapi.WorkforceRequirements(b)
	if err != nil {
		return nil, fmt.Errorf("--workforce-requirements %s: %w", path, err)
	}
	return r, nil
}

// appConfig is the app's configuration of cfg, without validation: the
// clinical partition's FHIR service at /fhir and the workforce
// partition's at /workforce/fhir.
func (c serveConfig) appConfig(logger *slog.Logger) app.Config {
	return app.Config{
		Storage: c.storage(),
		BaseURL: c.BaseURL,
		FHIR:    []app.Mount{app.Clinical(), app.Workforce()},
		Limits: fhirjson.Limits{
			MaxResourceBytes: c.MaxResourceBytes,
			MaxBundleBytes:   c.MaxBundleBytes,
			MaxDepth:         fhirjson.DefaultLimits().MaxDepth,
		},
		MaxPageSize:           c.MaxPageSize,
		MaxBundleEntries:      c.MaxBundleEntries,
		MaxConditionalDeletes: c.MaxConditionalDeletes,
		ProfileURL:            c.Validation.ProfileURL,
		TrustedIssuers:        c.TrustedIssuers,
		AuditRetentionYears:   c.AuditRetentionYears,
		CORSOrigins:           c.CORSOrigins,
		LookupEnv:             os.LookupEnv,
		Version:               version,
		Logger:                logger,
	}
}

// storage is where cfg's partitions live.
func (c serveConfig) storage() app.Storage {
	return app.Storage{DataDir: c.DataDir, MongoURI: c.MongoURI, MongoDatabase: c.MongoDatabase, MongoWriteConcern: c.MongoWriteConcern}
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
