package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
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
	handler, closeStore, err := openHandler(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeStore()
	ln, err := httpserver.Listen(cfg.Addr, httpserver.TLSConfig(cert))
	if err != nil {
		return err
	}
	printBanner(out, cfg, certFile, httpserver.Fingerprint(cert), selfSigned)
	logger.Info("serving", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "version", version)
	return httpserver.Serve(ctx, ln, handler, logger)
}

// kilnStore is what the commands need of a store: the FHIR store and the
// reindex of its rows.
type kilnStore interface {
	store.Store
	store.Indexer
}

// openStore opens the clinical partition: on MongoDB when a URI is
// configured, else the embedded store of the data folder, which must exist.
func openStore(ctx context.Context, cfg serveConfig) (kilnStore, error) {
	if cfg.MongoURI != "" {
		st, err := mongo.Open(ctx, mongo.Config{URI: cfg.MongoURI, Database: cfg.MongoDatabase + "_clinical", WriteConcern: cfg.MongoWriteConcern})
		if err != nil {
			return nil, fmt.Errorf("opening the MongoDB store: %w", err)
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "clinical.db"))
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	return st, nil
}

// openHandler opens the data folder's store and builds the handler on it.
// closeStore closes the store, logging a failure: by then the command's
// outcome is decided. `kiln serve` and `kiln admin generate` share it.
func openHandler(ctx context.Context, cfg serveConfig, logger *slog.Logger) (h http.Handler, closeStore func(), err error) {
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	closeStore = func() {
		if err := st.Close(); err != nil {
			logger.Error("closing the store", "err", err)
		}
	}
	if h, err = newHandler(cfg, st, logger); err != nil {
		closeStore()
		return nil, nil, err
	}
	return h, closeStore, nil
}

// newFHIRServer builds the FHIR service of a data folder's store.
func newFHIRServer(cfg serveConfig, st store.Store, logger *slog.Logger) (*fhirserver.Server, error) {
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
		Limits: fhirjson.Limits{
			MaxResourceBytes: cfg.MaxResourceBytes,
			MaxBundleBytes:   cfg.MaxBundleBytes,
			MaxDepth:         fhirjson.DefaultLimits().MaxDepth,
		},
		Version: version,
		Logger:  logger,
	}, st)
}

// newHandler assembles every route behind the one middleware chain.
func newHandler(cfg serveConfig, st store.Store, logger *slog.Logger) (http.Handler, error) {
	fhir, err := newFHIRServer(cfg, st, logger)
	if err != nil {
		return nil, err
	}
	r := mux.NewRouter().SkipClean(true)
	r.Use(httpserver.LabelRoute)
	r.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := st.Ping(ctx); err != nil {
			logger.Warn("readiness check failed", "err", err)
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the store is not reachable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ready"}`)
	}).Methods(http.MethodGet, http.MethodHead)
	fhir.Register(r, "/fhir")
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no endpoint at "+r.URL.Path)
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpserver.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
	})
	return httpserver.Chain(r, logger, cfg.MaxBundleBytes+1), nil
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
  Try:         curl --cacert %s %s/fhir/metadata
  Auth:        none configured yet: every request is allowed
  Stop:        Ctrl-C (in-flight requests are drained)

`, version, cfg.BaseURL, cfg.storeDescription(), kind, certFile, fingerprint, certFile, cfg.BaseURL)
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
	// Instances sharing a MongoDB share its key, so that any of them
	// accepts the page links of another.
	if shared, ok := st.(interface {
		Secret(ctx context.Context, name string, size int) ([]byte, error)
	}); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return shared.Secret(ctx, "cursor-key", 32)
	}
	path := filepath.Join(dir, "cursor.key")
	key, err := os.ReadFile(path)
	if err == nil && len(key) >= 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the cursor key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("creating the cursor key: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the cursor key: %w", err)
	}
	return key, nil
}
