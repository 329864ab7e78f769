package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
)

// usageCommands returns the command names the usage text lists: the
// lower-case words after "kiln" on each synopsis line.
func usageCommands(usage string) []string {
	var out []string
	for line := range strings.SplitSeq(usage, "\n") {
		rest, ok := strings.CutPrefix(line, "  kiln ")
		if !ok {
			continue
		}
		var words []string
		for _, w := range strings.Fields(rest) {
			if strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
				break // the arguments start
			}
			words = append(words, w)
		}
		out = append(out, strings.Join(words, " "))
	}
	return out
}

// `kiln --help` lists every command the dispatch runs, and the dispatch
// runs every command the usage lists: both come from the command table.
func TestCommandTable(t *testing.T) {
	ctx := context.Background()
	var help bytes.Buffer
	if err := run(ctx, []string{"--help"}, nil, &help, io.Discard); err != nil {
		t.Fatal(err)
	}
	listed := usageCommands(help.String())
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	// The commands of the issue, and the ones this table added.
	for _, want := range []string{"serve", "fhirpath", "validate", "version", "openapi", "admin generate", "admin load", "admin reindex",
		"admin user add", "admin user list", "admin user disable", "admin user enable", "admin user password",
		"admin client add", "admin client rotate", "admin client list", "admin client keys", "admin keys rotate", "admin audit verify", "admin token"} {
		if !slices.Contains(names, want) {
			t.Errorf("no command %q", want)
		}
	}
	if !slices.Equal(listed, names) {
		t.Errorf("kiln --help lists %q,\nthe table has %q", listed, names)
	}
	for _, name := range listed {
		// Dispatched: the command's own flag parsing answers -h, not the
		// "unknown command" of a group.
		var stderr bytes.Buffer
		args := append(strings.Fields(name), "-h")
		err := run(ctx, args, nil, io.Discard, &stderr)
		if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errUsage) {
			t.Errorf("kiln %s -h: %v", name, err)
		}
		if strings.Contains(stderr.String(), "unknown command") {
			t.Errorf("kiln %s is listed but not dispatched:\n%s", name, stderr.String())
		}
		if c, rest := lookup(commands(), strings.Fields(name)); c == nil || c.name != name || len(rest) != 0 {
			t.Errorf("lookup(%q) = %v", name, c)
		}
	}

	// A group lists its own commands: on request to stdout, else to
	// stderr with an error naming the unknown word.
	var out, stderr bytes.Buffer
	if err := run(ctx, []string{"admin", "user", "help"}, nil, &out, &stderr); err != nil {
		t.Fatal(err)
	}
	if got := usageCommands(out.String()); !slices.Equal(got, []string{"admin user add", "admin user list", "admin user disable", "admin user enable", "admin user password"}) {
		t.Errorf("kiln admin user help lists %q", got)
	}
	out.Reset()
	err := run(ctx, []string{"admin", "client", "bogus"}, nil, &out, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), `kiln admin client: unknown command "bogus"`) ||
		!strings.Contains(stderr.String(), "kiln admin client rotate") || strings.Contains(stderr.String(), "kiln serve") {
		t.Errorf("kiln admin client bogus: %v\n%s", err, stderr.String())
	}
	for _, args := range [][]string{nil, {"admin"}, {"nothing"}} {
		if err := run(ctx, args, nil, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("kiln %q: %v, want a usage error", args, err)
		}
	}
	var v bytes.Buffer
	if err := run(ctx, []string{"--version"}, nil, &v, io.Discard); err != nil || !strings.HasPrefix(v.String(), "kiln ") {
		t.Errorf("kiln --version: %v %q", err, v.String())
	}
}

// notPlatform are the routes outside /fhir that the OpenAPI document
// leaves out: health probes, for orchestrators rather than API clients.
var notPlatform = []string{"/livez", "/readyz"}

// The OpenAPI document describes exactly the routes the server's router
// has outside the FHIR services (the platform's and the issuer's), and `kiln openapi`
// prints the document the server serves.
func TestOpenAPIMatchesMux(t *testing.T) {
	ctx := context.Background()
	a, _ := openTestApp(t, "--data", t.TempDir(), "--base-url", "https://kiln.test:9443")

	routed := map[string]bool{}
	param := regexp.MustCompile(`\{(\w+):[^}]*\}`) // {id:regexp} → {id}
	err := a.Router.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil {
			return nil // a route without a path (none today) matches by other means
		}
		path = param.ReplaceAllString(path, "{$1}")
		if slices.ContainsFunc(a.FHIRBases(), func(base string) bool { return path == base || strings.HasPrefix(path, base+"/") }) ||
			slices.Contains(notPlatform, path) {
			return nil // a FHIR service's route: its CapabilityStatement describes it
		}
		methods, err := route.GetMethods()
		if err != nil {
			t.Errorf("%s is routed for every method", path)
			return nil
		}
		for _, m := range methods {
			if m != http.MethodHead && m != http.MethodOptions { // HEAD is GET's; OPTIONS answers CORS preflights
				routed[m+" "+path] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://kiln.test:9443/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Body)
	}
	var doc struct {
		Servers []struct{ URL string }
		Paths   map[string]map[string]any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for m := range item {
			documented[strings.ToUpper(m)+" "+path] = true
		}
	}
	for k := range routed {
		if !documented[k] {
			t.Errorf("%s is routed but not in the OpenAPI document", k)
		}
	}
	for k := range documented {
		if !routed[k] {
			t.Errorf("%s is in the OpenAPI document but not routed", k)
		}
	}
	if len(routed) < 11 {
		t.Errorf("only %d routes found: %v", len(routed), routed)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "https://kiln.test:9443" {
		t.Errorf("servers %+v, want the base URL", doc.Servers)
	}

	var printed bytes.Buffer
	if err := run(ctx, []string{"openapi", "--base-url", "https://kiln.test:9443"}, nil, &printed, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(printed.Bytes(), rec.Body.Bytes()) {
		t.Error("kiln openapi prints another document than the server serves")
	}
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := run(ctx, []string{"openapi", "--base-url", "https://kiln.test:9443", "--out", file}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, printed.Bytes()) {
		t.Errorf("kiln openapi --out: %v", err)
	}
}

// After `kiln admin user password` (the server running), the old
// password gets 401 and the new one logs in; the refresh tokens issued
// before the reset are revoked; the reset is in the audit trail.
func TestAdminUserPassword(t *testing.T) {
	addr, client, out, stop := startServe(t)
	base := "https://" + addr
	data := dataDirOf(t, out.String())
	ctx := context.Background()
	var cli bytes.Buffer
	if err := run(ctx, []string{"admin", "user", "add", "--data", data, "--email", "nurse@example.org", "--role", "provider",
		"--scopes", "patients:read", "--password-stdin"}, strings.NewReader("the first long password\n"), &cli, &cli); err != nil {
		t.Fatalf("user add: %v\n%s", err, cli.String())
	}
	status, before, _ := postJSON(t, client, base+"/auth/login", "", map[string]string{"email": "nurse@example.org", "password": "the first long password"})
	if status != http.StatusOK {
		t.Fatalf("login before the reset: %d %v", status, before)
	}

	for _, bad := range []struct {
		args  []string
		stdin string
	}{
		{[]string{"--email", "nurse@example.org"}, "a new long password\n"},                      // no --password-stdin
		{[]string{"--email", "nurse@example.org", "--password-stdin"}, "short\n"},                // too short
		{[]string{"--email", "nobody@example.org", "--password-stdin"}, "a new long password\n"}, // no such user
	} {
		err := run(ctx, append([]string{"admin", "user", "password", "--data", data}, bad.args...), strings.NewReader(bad.stdin), io.Discard, io.Discard)
		if err == nil {
			t.Errorf("password %v: no error", bad.args)
		}
	}
	if tok := login(t, client, base, "nurse@example.org", "the first long password"); tok == "" {
		t.Fatal("a refused reset changed the password")
	}

	cli.Reset()
	if err := run(ctx, []string{"admin", "user", "password", "--data", data, "--email", "Nurse@Example.org", "--password-stdin"},
		strings.NewReader("the second long password\n"), &cli, &cli); err != nil {
		t.Fatalf("user password: %v\n%s", err, cli.String())
	}
	// Two sessions: the acceptance login and the one after the refused resets.
	if !strings.Contains(cli.String(), "ended 2 session(s)") {
		t.Errorf("user password printed:\n%s", cli.String())
	}
	// The server is another instance than the command: it refuses the
	// token from before the reset once its verify cache rechecks (≤ 5 s).
	deadline := time.Now().Add(6 * time.Second)
	for {
		status, _, _ := send(t, client, "GET", base+"/fhir/Patient", before["access_token"].(string), "", nil)
		if status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the access token from before the reset still works after 6 s: %d", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := postJSON(t, client, base+"/auth/login", "", map[string]string{"email": "nurse@example.org", "password": "the first long password"}); status != http.StatusUnauthorized {
		t.Errorf("the old password after the reset: %d %v", status, body)
	}
	after := login(t, client, base, "nurse@example.org", "the second long password")
	if status, _, _ := send(t, client, "GET", base+"/fhir/Patient", after, "", nil); status != http.StatusOK {
		t.Errorf("the new password's token: %d", status)
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {before["refresh_token"].(string)}}
	if status, body, _ := send(t, client, "POST", base+"/auth/token", "", "application/x-www-form-urlencoded", []byte(form.Encode())); status != http.StatusBadRequest ||
		body["error"] != "invalid_grant" {
		t.Errorf("a refresh token from before the reset: %d %v", status, body)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var resets [][]byte
	for _, body := range auditBodies(t, data) {
		if bytes.Contains(body, []byte(`"code":"password-reset"`)) {
			resets = append(resets, body)
		}
	}
	if len(resets) != 1 || !bytes.Contains(resets[0], []byte(`"110137"`)) || bytes.Contains(resets[0], []byte("nurse@")) {
		t.Errorf("password-reset audit records: %s; the reset printed:\n%s", resets, cli.String())
	}
}

// The first-start banner's commands work as pasted into sh: they log in,
// set TOKEN, and read /fhir/Patient with it; with KILN_ADMIN_PASSWORD
// they read the variable instead of printing the password.
func TestFirstStartBannerCommands(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed, and the banner's commands are curl commands: install curl (a prerequisite of make test, see README)")
	}
	for _, tc := range []struct {
		name            string
		email, password string // from the environment, when set
	}{
		{name: "generated password"},
		// Quotes, a $, a backslash and spaces: what shell quoting and the
		// JSON built in the shell must survive.
		{name: "from the environment", email: "o'brien@example.org", password: `it's a "$HOME" \ long pass`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.password != "" {
				t.Setenv("KILN_ADMIN_EMAIL", tc.email)
				t.Setenv("KILN_ADMIN_PASSWORD", tc.password)
			}
			addr, client, out, _ := startServe(t)
			banner := out.String()
			var lines []string
			for _, label := range []string{"Log in:", "Keep token:", "Use it:"} {
				m := regexp.MustCompile(`(?m)^  ` + label + ` +(.+)$`).FindStringSubmatch(banner)
				if m == nil {
					t.Fatalf("the banner has no %q line:\n%s", label, banner)
				}
				lines = append(lines, m[1])
			}
			if strings.Contains(banner, "…") {
				t.Errorf("the banner has a placeholder:\n%s", banner)
			}
			if tc.password != "" && (strings.Contains(banner, tc.password) || !strings.Contains(lines[0], `"$KILN_ADMIN_PASSWORD"`)) {
				t.Errorf("the banner prints the password or does not read KILN_ADMIN_PASSWORD:\n%s", banner)
			}
			script := strings.Join(lines, "\n") + "\nprintf '\\nTOKEN=%s\\n' \"$TOKEN\"\n"
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, "sh", "-c", script)
			cmd.Dir = t.TempDir() // another working folder than the server's
			res, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sh: %v\n%s", err, res)
			}
			m := regexp.MustCompile(`(?m)^TOKEN=(\S+)$`).FindSubmatch(res)
			if m == nil {
				t.Fatalf("TOKEN is not set:\n%s", res)
			}
			if !bytes.Contains(res, []byte(`"resourceType":"Bundle"`)) {
				t.Errorf("the Use it command did not get a Bundle:\n%s", res)
			}
			if status, _, _ := send(t, client, "GET", "https://"+addr+"/fhir/Patient", string(m[1]), "", nil); status != http.StatusOK {
				t.Errorf("GET /fhir/Patient with TOKEN: %d", status)
			}
		})
	}
}
