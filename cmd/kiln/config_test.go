package main

import (
	"io"
	"log/slog"
	"testing"
)

func TestServeConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(serveConfig) bool
		wantErr bool
	}{
		{"defaults", nil, nil, func(c serveConfig) bool {
			return c.Addr == "127.0.0.1:8443" && c.DataDir == "./data" && c.BaseURL == "https://127.0.0.1:8443" &&
				c.LogLevel == slog.LevelInfo && c.MaxResourceBytes == 5<<20 && c.MaxBundleBytes == 20<<20
		}, false},
		{"env applies", nil, map[string]string{"KILN_ADDR": "127.0.0.1:9443", "KILN_LOG_LEVEL": "debug", "KILN_DATA": "/tmp/k"},
			func(c serveConfig) bool {
				return c.Addr == "127.0.0.1:9443" && c.BaseURL == "https://127.0.0.1:9443" && c.LogLevel == slog.LevelDebug && c.DataDir == "/tmp/k"
			}, false},
		{"flag beats env", []string{"--addr", "127.0.0.1:7443"}, map[string]string{"KILN_ADDR": "127.0.0.1:9443"},
			func(c serveConfig) bool { return c.Addr == "127.0.0.1:7443" }, false},
		{"wildcard address gets a localhost base URL", []string{"--addr", "0.0.0.0:8443"}, nil,
			func(c serveConfig) bool { return c.BaseURL == "https://localhost:8443" }, false},
		{"explicit base URL", []string{"--base-url", "https://fhir.example.org/"}, nil,
			func(c serveConfig) bool { return c.BaseURL == "https://fhir.example.org" }, false},
		{"size limits", []string{"--max-resource-bytes", "1000"}, map[string]string{"KILN_MAX_BUNDLE_BYTES": "5000"},
			func(c serveConfig) bool { return c.MaxResourceBytes == 1000 && c.MaxBundleBytes == 5000 }, false},
		{"plain-HTTP base URL refused", []string{"--base-url", "http://x"}, nil, nil, true},
		{"cert without key", []string{"--tls-cert", "c.pem"}, nil, nil, true},
		{"bad log level", []string{"--log-level", "loud"}, nil, nil, true},
		{"bad env size", nil, map[string]string{"KILN_MAX_RESOURCE_BYTES": "lots"}, nil, true},
		{"bundle smaller than resource", []string{"--max-bundle-bytes", "10", "--max-resource-bytes", "20"}, nil, nil, true},
		{"zero size", []string{"--max-resource-bytes", "0", "--max-bundle-bytes", "0"}, nil, nil, true},
		{"bad address", []string{"--addr", "nonsense"}, nil, nil, true},
		{"stray argument", []string{"extra"}, nil, nil, true},
		{"audit retention under 7 years refused", []string{"--audit-retention-years", "6"}, nil, nil, true},
		{"audit retention of 10 years", nil, map[string]string{"KILN_AUDIT_RETENTION_YEARS": "10"},
			func(c serveConfig) bool { return c.AuditRetentionYears == 10 }, false},
		{"workforce requirements file", []string{"--workforce-requirements", "roles.json"}, nil,
			func(c serveConfig) bool { return c.WorkforceRequirements == "roles.json" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			c, err := parseServeConfig(tc.args, env, io.Discard)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && !tc.check(c) {
				t.Errorf("unexpected config %+v", c)
			}
		})
	}
}
