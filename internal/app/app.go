// Package app assembles the Kiln server of one configuration: the stores
// of its partitions, the token issuer, one FHIR service per mounted
// partition, the platform API, the audit trail and the HTTP handler over
// them all. `kiln serve`, the admin commands and the integration tests
// build the server here, and nowhere else.
package app

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/fhirserver/indexversion"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
	"github.com/kiln-fhir/kiln/internal/httpserver"
	"github.com/kiln-fhir/kiln/legacyapi"
	"github.com/kiln-fhir/kiln/profiles"
)

// Config is the server's configuration, as `kiln serve` resolved it from
// its flags and environment.
type Config struct {
	Storage Storage
	// BaseURL is the server's public root (https://host:port): the token
	// issuer, and the FHIR services' URLs below it.
	BaseURL string
	// FHIR are the FHIR services, one per partition (nil: Clinical() and
	// Workforce()).
	// The first one's store also holds the server's own records (users,
	// keys, sequences) and serves the platform API.
	FHIR []Mount
	// Bodies, search pages and Bundles.
	Limits                                               fhirjson.Limits
	MaxPageSize, MaxBundleEntries, MaxConditionalDeletes int
	// Validation is the FHIR services' validation; Conformance the
	// resources it loaded, installed in the first store (nil: none).
	Validation  validation.Config
	Conformance *profiles.Set
	// ProfileURL is the canonical base of the national profiles.
	ProfileURL string
	// WorkforceRequirements is the role → certifications table of the
	// workforce compliance score (nil: legacyapi.WorkforceRequirements'
	// built-in default).
	WorkforceRequirements *adapters.Requirements
	// TrustedIssuers is a JSON file of external OpenID providers whose
	// tokens are accepted (auth.ExternalIssuer).
	TrustedIssuers string
	// AuditRetentionYears: audit records older than this are purged by
	// Maintain.
	AuditRetentionYears int
	// CORSOrigins may call from a browser.
	CORSOrigins httpserver.Origins
	// LookupEnv reads the master key's environment variable (nil: none).
	LookupEnv func(string) (string, bool)
	// KeyViewTTL and KeyWriteTTL (0: 15 s and 2 min 10 s) bound a change
	// of an encrypted partition's keys: a server's copy of the keys seals,
	// tags and looks up tags for at most KeyViewTTL after it read them, and
	// a write takes at most KeyWriteTTL from sealing to commit (the
	// request timeout). They are written into the partition's keys record
	// when it is created, where every server and rotation reads them.
	// Tests shorten them.
	KeyViewTTL, KeyWriteTTL time.Duration
	// Now is the issuer's clock (nil: time.Now); tests move it.
	Now     func() time.Time
	Version string
	Logger  *slog.Logger
}

// Mount is a FHIR service: a partition's store served at a base path,
// with its own CapabilityStatement (at BaseURL+Base) and policy.
type Mount struct {
	// Partition names the store (Storage.OpenStore).
	Partition string
	// Base is the path the service is mounted at, e.g. "/fhir".
	Base string
	// Authorizer is the service's policy.
	Authorizer fhirserver.Authorizer
	// Sealed encrypts the partition at rest (fhirserver/store/sealed):
	// bodies and record values sealed under the partition's own keys,
	// the index blinded, searches it cannot answer refused.
	Sealed bool
}

// Clinical is the clinical partition's FHIR service at /fhir.
func Clinical() Mount {
	return Mount{Partition: PartitionClinical, Base: "/fhir", Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionClinical}}
}

// Workforce is the workforce partition's FHIR service at /workforce/fhir,
// under the workforce scopes only; the /workforce endpoints adapt it.
func Workforce() Mount {
	return Mount{Partition: PartitionWorkforce, Base: "/workforce/fhir", Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionWorkforce}, Sealed: true}
}

// Service is a mounted FHIR service.
type Service struct {
	Mount
	Store Store
	FHIR  *fhirserver.Server
	// A sealed partition's store under the seal, its keys as the sealed
	// store holds them, and its claim key (all nil for a plain one).
	inner Store
	keys  *sealed.Keys
	claim []byte
}

// App is the server of one configuration. `kiln serve` serves Handler;
// the admin commands and tests use the rest in-process.
type App struct {
	// Store is the first service's store (the server's records).
	Store Store
	// FHIR is the first service; Services all of them, in Config order.
	FHIR     *fhirserver.Server
	Services []*Service
	AuditLog AuditLog // the audit partition
	// Recorder records the audit trail: the FHIR services' interactions
	// (through trail), the issuer's events and the refusals of
	// auditRefusals. nil records none of them (set before serving and
	// before Routes, for benchmarks).
	Recorder *audit.Recorder
	Auth     *auth.Service
	// Platform is the platform's JSON API (legacyapi) over FHIR.
	Platform *legacyapi.API
	Handler  http.Handler
	// Router is inside Handler: its routes, for tests that list them.
	Router *mux.Router

	cfg    Config
	logger *slog.Logger
	master *crypt.Keyring
	// stopReload ends the goroutines that reload the sealed partitions'
	// keys; reloads tells when they are done.
	stopReload context.CancelFunc
	reloads    sync.WaitGroup
}

// Open opens the stores and assembles the server on them.
func Open(ctx context.Context, cfg Config) (_ *App, err error) {
	if len(cfg.FHIR) == 0 {
		cfg.FHIR = []Mount{Clinical(), Workforce()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	a := &App{cfg: cfg, logger: cfg.Logger}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	keyring, err := crypt.LoadKeyring(cfg.Storage.DataDir, cfg.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("the master key: %w", err)
	}
	a.master = keyring
	timings := keyTimings{view: cmp.Or(cfg.KeyViewTTL, defaultKeyViewTTL), write: cmp.Or(cfg.KeyWriteTTL, defaultKeyWriteTTL)}
	for _, m := range cfg.FHIR {
		s, err := openService(ctx, cfg.Storage, m, keyring, timings)
		if err != nil {
			return nil, err
		}
		a.Services = append(a.Services, s)
	}
	a.startKeyReloads()
	a.Store = a.Services[0].Store
	if a.Auth, err = auth.NewService(ctx, auth.Config{Records: a.Store, Sealer: keyring, Issuer: cfg.BaseURL,
		Audience: cfg.BaseURL + cfg.FHIR[0].Base, FHIRBases: a.FHIRBases(), Now: cfg.Now}); err != nil {
		return nil, err
	}
	if err := a.trustIssuers(ctx); err != nil {
		return nil, err
	}
	cursorKey, err := LoadCursorKey(cfg.Storage.DataDir, a.Store)
	if err != nil {
		return nil, err
	}
	for _, s := range a.Services {
		if s.FHIR, err = NewFHIRServer(cfg, s.Mount, s.Store, cursorKey, trail{a: a, partition: s.Partition}); err != nil {
			return nil, err
		}
	}
	a.FHIR = a.Services[0].FHIR
	if cfg.Conformance != nil {
		if err := installConformance(ctx, a.FHIR, cfg.Conformance, a.logger); err != nil {
			return nil, err
		}
	}
	if a.AuditLog, err = OpenAuditLog(ctx, cfg.Storage); err != nil {
		return nil, err
	}
	if a.Recorder, err = newRecorder(ctx, a.AuditLog, a); err != nil {
		return nil, err
	}
	a.Auth.Audit = func(ctx context.Context, e auth.Event) {
		_ = a.Recorder.Record(context.WithoutCancel(ctx), authEvent(e))
	}
	if a.Platform, err = a.newPlatformAPI(); err != nil {
		return nil, err
	}
	a.Handler = a.Routes()
	return a, nil
}

// openService opens a mount's store, sealed when the mount says so.
// Its records, the search index version's among them, are read and
// written through the seal, the partition's keys apart.
func openService(ctx context.Context, storage Storage, m Mount, master *crypt.Keyring, timings keyTimings) (*Service, error) {
	if !m.Sealed {
		st, err := OpenStore(ctx, storage, m.Partition)
		if err != nil {
			return nil, err
		}
		return &Service{Mount: m, Store: st}, nil
	}
	st, err := openStore(ctx, storage, m.Partition)
	if err != nil {
		return nil, err
	}
	s := &Service{Mount: m, Store: st, inner: st}
	keys, _, err := loadPartitionKeys(ctx, st, master, m.Partition, timings)
	if err == nil {
		s.claim = keys.Claim
		s.keys, err = sealed.LoadKeys(ctx, partitionKeySource(st, master, m.Partition))
	}
	if err == nil {
		s.Store, err = sealStore(st, m.Partition, s.keys)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	if s.Store, err = markNewIndex(ctx, s.Store); err != nil {
		return nil, err
	}
	return s, nil
}

// trustIssuers adds the configured external OpenID providers.
func (a *App) trustIssuers(ctx context.Context) error {
	if a.cfg.TrustedIssuers == "" {
		return nil
	}
	list, err := auth.LoadExternalIssuers(a.cfg.TrustedIssuers)
	if err != nil {
		return err
	}
	for _, e := range list {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := a.Auth.AddExternal(dctx, e)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// FHIRBases are the paths the FHIR services are mounted at.
func (a *App) FHIRBases() []string {
	var out []string
	for _, m := range a.cfg.FHIR {
		out = append(out, m.Base)
	}
	return out
}

// OAuthURIs are the issuer's endpoints a CapabilityStatement declares.
func OAuthURIs(cfg Config) fhirserver.OAuthURIs {
	e := auth.EndpointsOf(cfg.BaseURL)
	return fhirserver.OAuthURIs{Token: e.Token, Revoke: e.Revoke, Introspect: e.Introspect, CORS: !cfg.CORSOrigins.None()}
}

// NewFHIRServer builds the FHIR service of m over st: its
// CapabilityStatement names BaseURL+m.Base; cursorKey seals its page
// cursors; auditor records its interactions (nil: none, for the offline
// admin commands, which are no interactions).
func NewFHIRServer(cfg Config, m Mount, st Store, cursorKey []byte, auditor fhirserver.Auditor) (*fhirserver.Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return fhirserver.New(fhirserver.Config{
		BaseURL:               cfg.BaseURL + m.Base,
		MaxCount:              cfg.MaxPageSize,
		MaxBundleEntries:      cfg.MaxBundleEntries,
		MaxConditionalDeletes: cfg.MaxConditionalDeletes,
		CursorKey:             cursorKey,
		Authorizer:            m.Authorizer,
		Auditor:               auditor,
		Validation:            cfg.Validation,
		Limits:                cfg.Limits,
		OAuth:                 OAuthURIs(cfg),
		Version:               cfg.Version,
		Logger:                logger,
	}, st)
}

// newPlatformAPI builds the platform endpoints over the first FHIR
// service and its store: PT-<n> come from the store's sequence; DELETE
// /patients/{id} erases through the FHIR service's erasure with the
// policy of adapters.
func (a *App) newPlatformAPI() (*legacyapi.API, error) {
	wf, err := a.workforceAPI()
	if err != nil {
		return nil, err
	}
	return legacyapi.New(legacyapi.Config{
		Workforce:  wf,
		FHIR:       a.FHIR,
		Sequence:   a.Store,
		Records:    a.Store,
		Eraser:     legacyapi.FHIREraser{FHIR: a.FHIR},
		ProfileURL: a.cfg.ProfileURL,
		Auth:       a.Auth,
		BaseURL:    a.cfg.BaseURL,
		Logger:     a.logger,
	})
}

// workforceAPI configures the /workforce endpoints over the workforce
// partition's service, when one is mounted (nil otherwise: the routes are
// left out). Its claim records are named by HMAC tags under the
// partition's claim key.
func (a *App) workforceAPI() (*legacyapi.Workforce, error) {
	i := slices.IndexFunc(a.Services, func(s *Service) bool { return s.Partition == PartitionWorkforce })
	if i < 0 {
		return nil, nil
	}
	s := a.Services[i]
	if s.claim == nil {
		return nil, errors.New("the workforce partition must be sealed: its claim records are named by tags under its keys")
	}
	key := s.claim
	req := a.cfg.WorkforceRequirements
	var err error
	if req == nil {
		if req, err = legacyapi.WorkforceRequirements(nil); err != nil {
			return nil, err
		}
	}
	tag := func(v string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(v))
		return hex.EncodeToString(m.Sum(nil))
	}
	return &legacyapi.Workforce{FHIR: s.FHIR, Records: s.Store, Tag: tag, Requirements: req}, nil
}

// CheckIndexVersion refuses stores whose index rows were built by an
// older string fold (indexversion.Check).
func (a *App) CheckIndexVersion(ctx context.Context) error {
	for _, s := range a.Services {
		if err := indexversion.Check(ctx, s.Store); err != nil {
			return err
		}
	}
	return nil
}

// AdminToken is a token with every scope and the admin role, for the
// in-process admin commands (they hold the data folder, hence the keys).
func (a *App) AdminToken(ctx context.Context) (string, error) {
	tok, _, err := a.Auth.Tokens.Issue(ctx, "system/kiln-admin-cli", auth.RoleAdmin, "", "", auth.AllScopes(auth.ContextSystem).String())
	return tok, err
}

// Close flushes the audit trail and closes the stores, logging a
// failure: by then the command's outcome is decided.
func (a *App) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if a.stopReload != nil {
		a.stopReload()
		a.reloads.Wait()
	}
	if a.Recorder != nil {
		if err := a.Recorder.Close(ctx); err != nil {
			a.logger.Error("flushing the audit trail", "err", err)
		}
	}
	a.closeStores()
}

func (a *App) closeStores() {
	if a.AuditLog != nil {
		if err := a.AuditLog.Close(); err != nil {
			a.logger.Error("closing the audit log", "err", err)
		}
	}
	for _, s := range slices.Backward(a.Services) {
		if err := s.Store.Close(); err != nil {
			a.logger.Error("closing the store", "err", err, "partition", s.Partition)
		}
	}
}

// Config is the configuration the app was opened with, defaults filled in.
func (a *App) Config() Config { return a.cfg }
