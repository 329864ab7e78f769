package main

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/kiln-fhir/kiln/internal/app"
)

// openTestApp assembles the app in-process, as the admin commands do, on
// kiln serve flags (--data DIR at least), with the environment left out;
// it is closed when the test ends.
func openTestApp(tb testing.TB, args ...string) (*app.App, serveConfig) {
	tb.Helper()
	cfg, err := parseServeConfig(args, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := openApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Close)
	return a, cfg
}

// auditBodies reads every record of a stopped server's audit log, in
// chain order.
func auditBodies(t *testing.T, data string) [][]byte {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.ToSlash(filepath.Join(data, "audit.db"))+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT body FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		out = append(out, body)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
