package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/internal/httpserver"
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
	if err := a.CheckIndexVersion(ctx); err != nil {
		return err
	}
	email, password, created, err := firstAdmin(ctx, a.Auth.Users, os.LookupEnv)
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
	maintaining.Go(func() { a.Maintain(mctx) })
	defer maintaining.Wait() // before a.Close: it uses the store
	defer stopMaintain()
	return httpserver.Serve(ctx, ln, a.Handler, logger)
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

`, version, cfg.BaseURL, cfg.storage().Describe(), kind, certFile, fingerprint, shellQuote(pastable(certFile)), shellQuote(cfg.BaseURL+"/fhir/metadata"), cfg.BaseURL)
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
