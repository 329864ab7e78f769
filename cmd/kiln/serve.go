package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/httpserver"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

func serve(ctx context.Context, cfg serveConfig, out io.Writer) error {
	logger := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: cfg.LogLevel}))
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	cert, certFile, selfSigned, err := loadCertificate(cfg)
	if err != nil {
		return err
	}
	a, err := openApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	// Index rows built by an older string fold would make searches miss
	// resources without a word: refuse, and say how to reindex. A
	// national hub's reindex takes long, which a start must not (its
	// orchestrator would restart it midway); see README, "Upgrading".
	if err := fhirserver.CheckIndexVersion(ctx, a.store); err != nil {
		return err
	}
	email, password, created, err := firstAdmin(ctx, a.auth.Users, os.LookupEnv)
	if err != nil {
		return err
	}
	// The banner comes before the port opens: whoever connects finds it
	// printed, and the first admin's password, created above, is shown
	// even if the address turns out to be taken.
	printBanner(out, cfg, certFile, httpserver.Fingerprint(cert), selfSigned)
	if created {
		printFirstAdmin(out, cfg, certFile, email, password)
	}
	ln, err := httpserver.Listen(cfg.Addr, httpserver.TLSConfig(cert))
	if err != nil {
		return err
	}
	logger.Info("serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "version", version)
	mctx, stopMaintain := context.WithCancel(ctx)
	var maintaining sync.WaitGroup
	maintaining.Go(func() { maintain(mctx, a, cfg, logger) })
	defer maintaining.Wait() // before a.Close: it uses the store
	defer stopMaintain()
	return httpserver.Serve(ctx, ln, a.handler, logger)
}

// kilnStore is what the commands need of a store: the FHIR store, the
// reindex of its rows, the server's own records (users, keys…) and its
// sequences (PT-<n>).
type kilnStore interface {
	store.Store
	store.Indexer
	store.Records
	store.Sequencer
}

// openStore opens the clinical partition: on MongoDB when a URI is
// configured, else the embedded store of the data folder, which must exist.
// A new store (no resource yet) is marked as indexed by this version's
// string fold, so that it never needs a reindex for it.
func openStore(ctx context.Context, cfg serveConfig) (kilnStore, error) {
	var st kilnStore
	if cfg.MongoURI != "" {
		m, err := mongo.Open(ctx, mongo.Config{URI: cfg.MongoURI, Database: cfg.MongoDatabase + "_clinical", WriteConcern: cfg.MongoWriteConcern})
		if err != nil {
			return nil, fmt.Errorf("opening the MongoDB store: %w", err)
		}
		st = m
	} else {
		s, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "clinical.db"))
		if err != nil {
			return nil, fmt.Errorf("opening the store: %w", err)
		}
		st = s
	}
	if err := fhirserver.MarkNewIndex(ctx, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// oauthURIs are the issuer's endpoints the CapabilityStatement declares.
func oauthURIs(cfg serveConfig) fhirserver.OAuthURIs {
	e := auth.EndpointsOf(cfg.BaseURL)
	return fhirserver.OAuthURIs{Token: e.Token, Revoke: e.Revoke, Introspect: e.Introspect, CORS: !cfg.CORSOrigins.None()}
}

// newFHIRServer builds the FHIR service of a data folder's store.
func newFHIRServer(cfg serveConfig, st store.Store, validation fhirserver.Validation, logger *slog.Logger) (*fhirserver.Server, error) {
	cursorKey, err := loadCursorKey(cfg.DataDir, st)
	if err != nil {
		return nil, err
	}
	return fhirserver.New(fhirserver.Config{
		BaseURL:               cfg.BaseURL + "/fhir",
		MaxCount:              cfg.MaxPageSize,
		MaxBundleEntries:      cfg.MaxBundleEntries,
		MaxConditionalDeletes: cfg.MaxConditionalDeletes,
		CursorKey:             cursorKey,
		Authorizer:            fhirserver.ScopeAuthorizer{Partition: auth.PartitionClinical},
		Validation:            validation,
		Limits: fhirjson.Limits{
			MaxResourceBytes: cfg.MaxResourceBytes,
			MaxBundleBytes:   cfg.MaxBundleBytes,
			MaxDepth:         fhirjson.DefaultLimits().MaxDepth,
		},
		OAuth:   oauthURIs(cfg),
		Version: version,
		Logger:  logger,
	}, st)
}

func loadCertificate(cfg serveConfig) (cert tls.Certificate, certFile string, selfSigned bool, err error) {
	certFile, keyFile := cfg.TLSCert, cfg.TLSKey
	if certFile == "" {
		selfSigned = true
		certFile, keyFile, _, err = httpserver.DevCertificate(filepath.Join(cfg.DataDir, "tls"))
		if err != nil {
			return cert, "", false, fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	if err := crypt.CheckPrivate(keyFile, "TLS private key"); err != nil {
		return cert, "", false, err
	}
	cert, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, "", false, fmt.Errorf("TLS certificate: %w", err)
	}
	return cert, certFile, selfSigned, nil
}

func printBanner(out io.Writer, cfg serveConfig, certFile, fingerprint string, selfSigned bool) {
	kind := "certificate"
	if selfSigned {
		kind = "self-signed certificate for localhost"
	}
	fmt.Fprintf(out, `
Kiln %s — FHIR R4 server
  FHIR base:   %s/fhir
  Store:       %s
  TLS:         %s
               %s
               SHA-256 %s
  Try:         curl --cacert %s %s
  Auth:        bearer tokens from POST %s/auth/login (or /auth/token for machine clients)
  Stop:        Ctrl-C (in-flight requests are drained)

`, version, cfg.BaseURL, cfg.storeDescription(), kind, certFile, fingerprint, shellQuote(pastable(certFile)), shellQuote(cfg.BaseURL+"/fhir/metadata"), cfg.BaseURL)
}

// maintain runs the hourly work (signing key rotation by age, client
// secret expiry, audit retention) until ctx ends.
func maintain(ctx context.Context, a *app, cfg serveConfig, logger *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.auth.Maintain(ctx); err != nil && ctx.Err() == nil {
				logger.Error("auth maintenance", "err", err)
			}
			cutoff := time.Now().AddDate(-cfg.AuditRetentionYears, 0, 0)
			if n, err := audit.Purge(ctx, a.rec, a.audit, cutoff); err != nil && ctx.Err() == nil {
				logger.Error("audit retention", "err", err)
			} else if n > 0 {
				logger.Info("audit retention: purged old records", "records", n)
			}
		}
	}
}

// printFirstAdmin shows, once, the account created on the first start,
// and commands that work as pasted into a POSIX shell: log in, keep the
// token in TOKEN (with sed, which every such shell has; jq may be
// missing), and use it. password is "" when it came from
// KILN_ADMIN_PASSWORD: the commands then read the variable rather than
// print it.
func printFirstAdmin(out io.Writer, cfg serveConfig, certFile, email, password string) {
	shown := password
	emailJSON := jsonString(email)
	// The body: printed whole, or, for a password given in the environment
	// (never printed), built by the shell from the variable, escaped for
	// JSON ('"' and '\').
	body := "-d " + shellQuote(`{"email":`+emailJSON+`,"password":`+jsonString(password)+`}`)
	pre := ""
	if password == "" {
		shown = "(from KILN_ADMIN_PASSWORD: set it in the shell you paste into, e.g. read -rs KILN_ADMIN_PASSWORD)"
		pre = "printf '{\"email\":%s,\"password\":\"%s\"}' " + shellQuote(emailJSON) +
			` "$(printf '%s' "$KILN_ADMIN_PASSWORD" | sed 's/[\\"]/\\&/g')" | `
		body = "--data-binary @-"
	}
	cert, base := shellQuote(pastable(certFile)), cfg.BaseURL
	fmt.Fprintf(out, `First start: created the administrator account (shown only this once)
  email:       %s
  password:    %s
  Log in:      LOGIN=$(%scurl -sS --cacert %s -X POST %s -H 'Content-Type: application/json' %s); echo "$LOGIN"
  Keep token:  TOKEN=$(printf '%%s' "$LOGIN" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
  Use it:      curl -sS --cacert %s -H "Authorization: Bearer $TOKEN" %s

`, email, shown, pre, cert, shellQuote(base+"/auth/login"), body, cert, shellQuote(base+"/fhir/Patient"))
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// shellQuote quotes s for a POSIX shell as one word: as it is when it
// holds only characters no shell treats specially, else single-quoted.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pastable is a file path for commands pasted in another terminal, which
// may have another working folder: absolute when it can be.
func pastable(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// storeDescription names the store without the connection string, which
// may hold a password.
func (c serveConfig) storeDescription() string {
	if c.MongoURI != "" {
		return "MongoDB, databases " + c.MongoDatabase + "_* (write concern " + c.MongoWriteConcern + ")"
	}
	return "embedded SQLite, " + filepath.Join(c.DataDir, "clinical.db")
}

// loadCursorKey reads the key that seals search page cursors from the data
// folder, creating it once: cursors then survive a restart.
func loadCursorKey(dir string, st store.Store) ([]byte, error) {
	return loadSecret(dir, st, "cursor-key", "cursor.key", "the cursor key")
}

// auditQueryKeyFile is the audit query key's file in the data folder.
const auditQueryKeyFile = "audit-query.key"

// loadAuditQueryKey reads the key of the tags that stand for the values
// of recorded queries (audit.KeyedQuery), creating it at the first start.
// It must outlive the audit records it keyed: without it their tags can
// no longer be confirmed (docs/erasure.md).
func loadAuditQueryKey(dir string, st store.Store) ([]byte, error) {
	return loadSecret(dir, st, "audit-query-key", auditQueryKeyFile, "the audit query key")
}

// loadSecret reads a 32-byte secret of the server, creating it once:
// from the MongoDB store when there is one (instances sharing it share
// the secret, so that any of them accepts the page links of another and
// keys audit tags alike), else from file in the data folder, mode 0600.
func loadSecret(dir string, st store.Store, name, file, what string) ([]byte, error) {
	if shared, ok := st.(interface {
		Secret(ctx context.Context, name string, size int) ([]byte, error)
	}); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return shared.Secret(ctx, name, 32)
	}
	path := filepath.Join(dir, file)
	key, err := os.ReadFile(path)
	if err == nil && len(key) >= 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("creating %s: %w", what, err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", what, err)
	}
	return key, nil
}
