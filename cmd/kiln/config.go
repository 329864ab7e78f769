package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// serveConfig is everything `kiln serve` is configured with. Each flag has a
// KILN_* environment variable; a flag given on the command line wins.
type serveConfig struct {
	Addr             string
	DataDir          string
	TLSCert, TLSKey  string
	BaseURL          string
	LogLevel         slog.Level
	MaxResourceBytes int64
	MaxBundleBytes   int64
	// Search and Bundle bounds.
	MaxPageSize, MaxBundleEntries, MaxConditionalDeletes int
	// AuditRetentionYears: audit records older than this are purged.
	AuditRetentionYears int
	// TrustedIssuers is a JSON file of external OpenID providers whose
	// tokens are accepted (auth.ExternalIssuer).
	TrustedIssuers string
	// MongoDB (empty URI: the embedded store in DataDir).
	MongoURI, MongoDatabase, MongoWriteConcern string
	// Profiles and validation (see validation.go).
	Validation validationConfig
	// CORSOrigins may call from a browser (none by default).
	CORSOrigins httpserver.Origins
	// WorkforceRequirements is a JSON file that replaces the built-in
	// role → certifications table ("" keeps it).
	WorkforceRequirements string
}

// minRetentionYears is the least audit retention accepted: workforce
// records are kept 7 years, and so is their audit trail.
const minRetentionYears = 7

// lookupEnv is os.LookupEnv; tests pass their own.
type lookupEnv func(string) (string, bool)

func parseServeConfig(args []string, env lookupEnv, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("kiln serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var logLevel string
	var envErr error
	str := func(p *string, name, envName, def, help string) {
		if v, ok := env(envName); ok {
			def = v
		}
		fs.StringVar(p, name, def, help+" (env "+envName+")")
	}
	size := func(p *int64, name, envName string, def int64, help string) {
		if v, ok := env(envName); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				envErr = fmt.Errorf("%s: want a positive number of bytes, got %q", envName, v)
			}
			def = n
		}
		fs.Int64Var(p, name, def, help+" (env "+envName+")")
	}
	count := func(p *int, name, envName string, def int, help string) {
		if v, ok := env(envName); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				envErr = fmt.Errorf("%s: want a positive integer, got %q", envName, v)
			}
			def = n
		}
		fs.IntVar(p, name, def, help+" (env "+envName+")")
	}
	str(&c.Addr, "addr", "KILN_ADDR", "127.0.0.1:8443", "TLS listen address")
	str(&c.DataDir, "data", "KILN_DATA", "./data", "data folder: database files and the generated certificate")
	str(&c.TLSCert, "tls-cert", "KILN_TLS_CERT", "", "PEM certificate file (default: a self-signed localhost certificate in the data folder)")
	str(&c.TLSKey, "tls-key", "KILN_TLS_KEY", "", "PEM private key file for --tls-cert")
	str(&c.BaseURL, "base-url", "KILN_BASE_URL", "", "public base URL used in Location headers and links (default: https://<addr>)")
	str(&logLevel, "log-level", "KILN_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	def := fhirjson.DefaultLimits()
	size(&c.MaxResourceBytes, "max-resource-bytes", "KILN_MAX_RESOURCE_BYTES", def.MaxResourceBytes, "largest accepted resource body")
	size(&c.MaxBundleBytes, "max-bundle-bytes", "KILN_MAX_BUNDLE_BYTES", def.MaxBundleBytes, "largest accepted Bundle body")
	count(&c.MaxPageSize, "max-page-size", "KILN_MAX_PAGE_SIZE", 1000, "largest _count a search or history page may ask for")
	count(&c.MaxBundleEntries, "max-bundle-entries", "KILN_MAX_BUNDLE_ENTRIES", 1000, "most entries of a batch or transaction Bundle (413 above)")
	count(&c.AuditRetentionYears, "audit-retention-years", "KILN_AUDIT_RETENTION_YEARS", 7, "years audit records are kept; older ones are purged (the hash chain stays verifiable)")
	count(&c.MaxConditionalDeletes, "conditional-delete-max", "KILN_CONDITIONAL_DELETE_MAX", 1, "most resources one conditional delete may remove (1: single deletes only)")
	str(&c.TrustedIssuers, "trusted-issuers", "KILN_TRUSTED_ISSUERS", "", "JSON file of trusted OpenID providers: [{issuer, audience, claim_scopes, role}]")
	str(&c.MongoURI, "mongodb-uri", "KILN_MONGODB_URI", "", "MongoDB connection string; selects the MongoDB store instead of the embedded one")
	str(&c.MongoDatabase, "mongodb-database", "KILN_MONGODB_DATABASE", "kiln", "prefix of the MongoDB databases: one per partition (<prefix>_clinical, …)")
	str(&c.MongoWriteConcern, "mongodb-write-concern", "KILN_MONGODB_WRITE_CONCERN", "majority", "MongoDB write concern: majority or a number of members")
	str(&c.WorkforceRequirements, "workforce-requirements", "KILN_WORKFORCE_REQUIREMENTS", "", "JSON file of the certifications each workforce role needs; replaces the built-in oil-and-gas table (see README)")
	var cors string
	str(&cors, "cors-origins", "KILN_CORS_ORIGINS", "", "origins whose browser apps may call Kiln, comma-separated (https://app.example.org); * allows any origin without credentials")
	c.Validation.flags(fs, env, str)
	if envErr != nil {
		return c, envErr
	}
	err := fs.Parse(args)
	if err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("kiln serve: unexpected argument %q", fs.Arg(0))
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	if c.MongoURI != "" && !strings.HasPrefix(c.MongoURI, "mongodb://") && !strings.HasPrefix(c.MongoURI, "mongodb+srv://") {
		return c, fmt.Errorf("--mongodb-uri must start with mongodb:// or mongodb+srv://")
	}
	if c.MongoURI != "" && (c.MongoDatabase == "" || strings.ContainsAny(c.MongoDatabase, "/\\. \"$")) {
		return c, fmt.Errorf("--mongodb-database %q: want a name without / \\ . space \" or $", c.MongoDatabase)
	}
	if c.CORSOrigins, err = httpserver.ParseOrigins(cors); err != nil {
		return c, fmt.Errorf("--cors-origins: %w", err)
	}
	if err := c.Validation.check(); err != nil {
		return c, err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if c.MaxPageSize <= 0 || c.MaxBundleEntries <= 0 || c.MaxConditionalDeletes <= 0 {
		return c, fmt.Errorf("--max-page-size, --max-bundle-entries and --conditional-delete-max must be positive")
	}
	if c.AuditRetentionYears < minRetentionYears {
		return c, fmt.Errorf("--audit-retention-years %d: audit records (the workforce partition's among them) are kept at least %d years", c.AuditRetentionYears, minRetentionYears)
	}
	if c.MaxResourceBytes <= 0 || c.MaxBundleBytes <= 0 {
		return c, fmt.Errorf("--max-resource-bytes and --max-bundle-bytes must be positive")
	}
	if c.MaxBundleBytes < c.MaxResourceBytes {
		return c, fmt.Errorf("--max-bundle-bytes (%d) is smaller than --max-resource-bytes (%d)", c.MaxBundleBytes, c.MaxResourceBytes)
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return c, fmt.Errorf("--addr: %w", err)
	}
	if c.BaseURL == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "localhost"
		}
		c.BaseURL = "https://" + net.JoinHostPort(host, port)
	}
	if !strings.HasPrefix(c.BaseURL, "https://") {
		return c, fmt.Errorf("--base-url must be an https:// URL; got %q", c.BaseURL)
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c, nil
}
