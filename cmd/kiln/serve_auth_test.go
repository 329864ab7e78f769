package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// login posts the platform login and returns the access token.
func login(t *testing.T, client *http.Client, base, email, password string) string {
	t.Helper()
	status, m, _ := postJSON(t, client, base+"/auth/login", "", map[string]string{"email": email, "password": password})
	if status != http.StatusOK {
		t.Fatalf("login %s: %d %v", email, status, m)
	}
	tok, _ := m["access_token"].(string)
	return tok
}

func postJSON(t *testing.T, client *http.Client, url, token string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	raw, _ := json.Marshal(body)
	return send(t, client, http.MethodPost, url, token, "application/json", raw)
}

func send(t *testing.T, client *http.Client, method, url, token, contentType string, body []byte) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, resp.Header
}

// TestServeAuthAcceptance is the acceptance walk from a fresh
// start: the printed admin credentials log in and return exactly the
// platform's five fields (plus a refresh token); that token creates a
// Patient; a token with only patients:read cannot (403); no token is a
// 401; and the JWKS verifies the token with a standard JWT library.
func TestServeAuthAcceptance(t *testing.T) {
	addr, client, out, stop := startServe(t)
	base := "https://" + addr

	m := regexp.MustCompile(`email:\s+(\S+)\s+password:\s+(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the first start did not print admin credentials:\n%s", out.String())
	}
	status, resp, hdr := postJSON(t, client, base+"/auth/login", "", map[string]string{"email": m[1], "password": m[2]})
	if status != http.StatusOK {
		t.Fatalf("login with the printed credentials: %d %v", status, resp)
	}
	var keys []string
	for k := range resp {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got := strings.Join(keys, " "); got != "access_token expires_in refresh_token scope token_type user_role" {
		t.Errorf("login response fields: %s", got)
	}
	if resp["expires_in"] != float64(3600) || resp["token_type"] != "Bearer" || resp["user_role"] != "admin" ||
		!strings.Contains(resp["scope"].(string), "patients:write") || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("login response: %v (Cache-Control %q)", resp, hdr.Get("Cache-Control"))
	}
	admin := resp["access_token"].(string)

	if status, _, _ := send(t, client, "GET", base+"/fhir/metadata", admin, "", nil); status != http.StatusOK {
		t.Errorf("metadata with the token: %d", status)
	}
	// A Patient of the national profile, which writes of Patient must meet.
	patient := []byte(`{"resourceType":"Patient","identifier":[{"system":"https://fhir.health.example/sid/national-id","value":"NID-4471"}],` +
		`"name":[{"family":"Okafor","given":["Chidi"]}],"birthDate":"1990-01-01","telecom":[{"system":"phone","value":"0803 555 0101"}]}`)
	if status, body, _ := send(t, client, "POST", base+"/fhir/Patient", admin, "application/fhir+json", patient); status != http.StatusCreated {
		t.Errorf("admin creates a Patient: %d %v", status, body)
	}
	if status, _, hdr := send(t, client, "POST", base+"/fhir/Patient", "", "application/fhir+json", patient); status != http.StatusUnauthorized ||
		hdr.Get("WWW-Authenticate") != `Bearer realm="kiln"` {
		t.Errorf("no token: %d, WWW-Authenticate %q", status, hdr.Get("WWW-Authenticate"))
	}

	// A reader: added with the admin command, against the running server's
	// data folder.
	data := dataDirOf(t, out.String())
	var cliOut bytes.Buffer
	if err := run(context.Background(), []string{"admin", "user", "add", "--data", data, "--email", "reader@example.org",
		"--role", "provider", "--scopes", "patients:read", "--password-stdin"}, strings.NewReader("a long viewer passphrase\n"), &cliOut, &cliOut); err != nil {
		t.Fatalf("user add: %v\n%s", err, cliOut.String())
	}
	reader := login(t, client, base, "reader@example.org", "a long viewer passphrase")
	if status, body, _ := send(t, client, "POST", base+"/fhir/Patient", reader, "application/fhir+json", patient); status != http.StatusForbidden ||
		body["resourceType"] != "OperationOutcome" {
		t.Errorf("patients:read creates a Patient: %d %v", status, body)
	}
	if status, _, _ := send(t, client, "GET", base+"/fhir/Patient", reader, "", nil); status != http.StatusOK {
		t.Errorf("patients:read searches Patients: %d", status)
	}

	// The JWKS verifies the admin token with go-jose, as any client would.
	req, _ := http.NewRequest("GET", base+"/.well-known/jwks.json", nil)
	r, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(r.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	tok, err := jwt.ParseSigned(admin, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	ks := set.Key(tok.Headers[0].KeyID)
	if len(ks) != 1 {
		t.Fatalf("the JWKS has no key %q", tok.Headers[0].KeyID)
	}
	var claims jwt.Claims
	if err := tok.Claims(ks[0].Key, &claims); err != nil {
		t.Fatalf("the JWKS does not verify the token: %v", err)
	}
	if claims.Issuer != base || !claims.Audience.Contains(base+"/fhir") {
		t.Errorf("claims iss %q aud %v", claims.Issuer, claims.Audience)
	}

	// Every interaction above was audited, in an intact chain that holds
	// no token, password or email address.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var verify bytes.Buffer
	if err := run(context.Background(), []string{"admin", "audit", "verify", "--data", data}, nil, &verify, &verify); err != nil ||
		!strings.Contains(verify.String(), "intact") {
		t.Errorf("audit verify: %v\n%s", err, verify.String())
	}
	n := regexp.MustCompile(`chain of (\d+) records`).FindStringSubmatch(verify.String())
	// Two logins, metadata, two creates (one refused), one search.
	if n == nil || n[1] < "6" && len(n[1]) == 1 {
		t.Errorf("audit trail: %q, want at least 6 records", verify.String())
	}
	raw, err := os.ReadFile(filepath.Join(data, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{admin, reader, m[2], m[1], "reader@example.org", "a long viewer passphrase"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the audit store holds a secret or an email address: %.20q…", secret)
		}
	}

	// A record modified behind the server's back breaks the chain, and
	// verify names it.
	tamperAudit(t, data, "ae-000000000002")
	verify.Reset()
	err = run(context.Background(), []string{"admin", "audit", "verify", "--data", data}, nil, &verify, &verify)
	if err == nil || !strings.Contains(verify.String(), "BROKEN") || !strings.Contains(verify.String(), "ae-000000000002") {
		t.Errorf("audit verify after tampering: %v\n%s", err, verify.String())
	}
}

// tamperAudit rewrites one audit record in place (another outcome), as
// someone with write access to the database file could.
func tamperAudit(t *testing.T, data, id string) {
	t.Helper()
	seq, err := strconv.ParseInt(strings.TrimPrefix(id, "ae-"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.ToSlash(filepath.Join(data, "audit.db"))+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var body []byte
	if err := db.QueryRow(`SELECT body FROM audit_log WHERE seq = ?`, seq).Scan(&body); err != nil {
		t.Fatal(err)
	}
	body = bytes.Replace(body, []byte(`"outcome":"0"`), []byte(`"outcome":"4"`), 1)
	if _, err := db.Exec(`UPDATE audit_log SET body = ? WHERE seq = ?`, body, seq); err != nil {
		t.Fatal(err)
	}
}

// dataDirOf reads the data folder from the banner's certificate path.
func dataDirOf(t *testing.T, banner string) string {
	t.Helper()
	m := regexp.MustCompile(`(\S+)/tls/cert\.pem`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no data folder in the banner:\n%s", banner)
	}
	return m[1]
}
