package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/internal/gztest"
)

// adminLogin logs in with the credentials a first start printed.
func adminLogin(t *testing.T, client *http.Client, base, banner string) string {
	t.Helper()
	m := regexp.MustCompile(`email:\s+(\S+)\s+password:\s+(\S+)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("the first start did not print admin credentials:\n%s", banner)
	}
	return login(t, client, base, m[1], m[2])
}

// do sends one request and returns the raw answer; the body is read as
// sent (the transport does not decode it: Accept-Encoding is set by hand
// when a test wants compression).
func do(t *testing.T, client *http.Client, method, url string, header map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if body == nil {
		req.Body = http.NoBody
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, raw
}

// gzipped is b gzip-encoded, as a request body.
func gzipped(t *testing.T, b []byte) []byte { return gztest.Encode(t, b) }

const testPatient = `{"resourceType":"Patient","identifier":[{"system":"https://fhir.health.example/sid/national-id","value":"NID-1"}],` +
	`"name":[{"family":"Okafor","given":["Chidi"]}],"birthDate":"1990-01-01"}`

// A trailing slash on any path means the same as none: fhir-kit-client
// posts batch and transaction Bundles to base + "/".
func TestServeTrailingSlash(t *testing.T) {
	addr, client, out, _ := startServe(t)
	base := "https://" + addr
	tok := adminLogin(t, client, base, out.String())
	auth := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/fhir+json"}
	entry := `{"resource":` + testPatient + `,"request":{"method":"POST","url":"Patient"}}`
	for _, tc := range []struct {
		name, method, path string
		body               string
		want               int
		wantInBody         string
	}{
		{"transaction at base/", "POST", "/fhir/", `{"resourceType":"Bundle","type":"transaction","entry":[` + entry + `]}`, 200, `"transaction-response"`},
		{"batch at base/", "POST", "/fhir/", `{"resourceType":"Bundle","type":"batch","entry":[` + entry + `]}`, 200, `"batch-response"`},
		{"metadata/", "GET", "/fhir/metadata/", "", 200, `"CapabilityStatement"`},
		{"type/", "GET", "/fhir/Patient/", "", 200, `"searchset"`},
		{"create at type/", "POST", "/fhir/Patient/", testPatient, 201, `"Patient"`},
		{"one slash only", "GET", "/fhir/Patient//", "", 404, `"OperationOutcome"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			resp, raw := do(t, client, tc.method, base+tc.path, auth, body)
			if resp.StatusCode != tc.want || !strings.Contains(string(raw), tc.wantInBody) {
				t.Errorf("%s %s: %d %.300s", tc.method, tc.path, resp.StatusCode, raw)
			}
		})
	}
	// The public metadata stays public with the slash.
	if resp, raw := do(t, client, "GET", base+"/fhir/metadata/", nil, nil); resp.StatusCode != 200 {
		t.Errorf("GET /fhir/metadata/ without a token: %d %.200s", resp.StatusCode, raw)
	}
}

// Preflights are answered before authentication for allowed origins, on
// every kind of endpoint, and refused for any other origin; actual answers
// let allowed origins read the headers a FHIR client needs.
func TestServeCORS(t *testing.T) {
	const app = "https://app.example.org"
	addr, client, out, _ := startServe(t, "--cors-origins", app+",http://localhost:3000")
	base := "https://" + addr
	tok := adminLogin(t, client, base, out.String())

	for _, path := range []string{"/fhir/Patient", "/fhir", "/fhir/Patient/1", "/auth/token", "/auth/login", "/auth/revoke",
		"/.well-known/openid-configuration", "/fhir/.well-known/smart-configuration", "/patients", "/patients/PT-1", "/openapi.json"} {
		t.Run(path, func(t *testing.T) {
			pre := map[string]string{"Origin": app, "Access-Control-Request-Method": "POST",
				"Access-Control-Request-Headers": "authorization,content-type,prefer,if-none-exist"}
			resp, raw := do(t, client, "OPTIONS", base+path, pre, nil)
			h := resp.Header
			if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
				h.Get("Access-Control-Allow-Credentials") != "true" {
				t.Fatalf("allowed preflight: %d ACAO %q %.200s", resp.StatusCode, h.Get("Access-Control-Allow-Origin"), raw)
			}
			allowed := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
			for _, want := range []string{"authorization", "content-type", "prefer", "if-match", "if-none-exist", "if-none-match"} {
				if !strings.Contains(allowed, want) {
					t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, want)
				}
			}
			if !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || !slicesContain(h.Values("Vary"), "Origin") {
				t.Errorf("methods %q, Vary %q", h.Get("Access-Control-Allow-Methods"), h.Values("Vary"))
			}
			pre["Origin"] = "https://evil.example"
			resp, _ = do(t, client, "OPTIONS", base+path, pre, nil)
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight from another origin: %d ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}

	// The actual request: an allowed origin may read the answer and its
	// Location and ETag; another origin's gets no CORS header at all.
	hdr := map[string]string{"Origin": "http://localhost:3000", "Authorization": "Bearer " + tok, "Content-Type": "application/fhir+json"}
	resp, raw := do(t, client, "POST", base+"/fhir/Patient", hdr, []byte(testPatient))
	if resp.StatusCode != 201 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Fatalf("create from an allowed origin: %d ACAO %q %.200s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), raw)
	}
	resp, raw = do(t, client, "GET", base+"/fhir/metadata", nil, nil)
	if !strings.Contains(string(raw), `"cors":true`) {
		t.Errorf("the CapabilityStatement does not say security.cors: %d", resp.StatusCode)
	}
	resp, raw = do(t, client, "POST", base+"/fhir/Patient", hdr, []byte(testPatient))
	expose := resp.Header.Get("Access-Control-Expose-Headers")
	for _, want := range []string{"Location", "ETag", "Content-Location", "Last-Modified", "X-Request-Id"} {
		if !strings.Contains(expose, want) {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", expose, want)
		}
	}
	hdr["Origin"] = "https://evil.example"
	resp, _ = do(t, client, "GET", base+"/fhir/Patient?_count=1", hdr, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Expose-Headers") != "" {
		t.Errorf("another origin's request: %d ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// Without --cors-origins no origin is allowed, and "*" allows any origin
// but never with credentials.
func TestServeCORSDefaultsAndWildcard(t *testing.T) {
	pre := map[string]string{"Origin": "https://app.example.org", "Access-Control-Request-Method": "GET"}
	addr, client, _, _ := startServe(t)
	if resp, _ := do(t, client, "OPTIONS", "https://"+addr+"/fhir/Patient", pre, nil); resp.StatusCode != http.StatusForbidden ||
		resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("default: %d ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	addr, client, _, _ = startServe(t, "--cors-origins", "*")
	resp, _ := do(t, client, "OPTIONS", "https://"+addr+"/fhir/Patient", pre, nil)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("wildcard: %d ACAO %q credentials %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"),
			resp.Header.Get("Access-Control-Allow-Credentials"))
	}
}

// errorShape is what every error body of path holds.
func errorShape(path string) string {
	switch {
	case strings.HasPrefix(path, "/fhir"):
		return `"resourceType":"OperationOutcome"`
	case path == "/auth/token" || path == "/auth/revoke" || path == "/auth/introspect":
		return `"error":"`
	}
	return `"error":{"code":"`
}

func slicesContain(values []string, want string) bool {
	for _, v := range values {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), want) {
				return true
			}
		}
	}
	return false
}

// HEAD answers every GET route like GET, without the body.
func TestServeHEAD(t *testing.T) {
	addr, client, out, _ := startServe(t)
	base := "https://" + addr
	tok := adminLogin(t, client, base, out.String())
	auth := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/fhir+json"}
	resp, raw := do(t, client, "POST", base+"/fhir/Patient", auth, []byte(testPatient))
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, raw)
	}
	loc := resp.Header.Get("Location")
	id := strings.Split(strings.TrimPrefix(loc, base+"/fhir/Patient/"), "/")[0]
	for _, path := range []string{"/fhir/Patient/" + id, "/fhir/Patient/" + id + "/_history/1", "/fhir/Patient?_count=1",
		"/fhir/Patient/" + id + "/_history", "/fhir/metadata", "/fhir/.well-known/smart-configuration", "/openapi.json",
		"/.well-known/jwks.json", "/livez"} {
		t.Run(path, func(t *testing.T) {
			get, getBody := do(t, client, "GET", base+path, auth, nil)
			head, headBody := do(t, client, "HEAD", base+path, auth, nil)
			if get.StatusCode != 200 || head.StatusCode != 200 || len(headBody) != 0 {
				t.Fatalf("GET %d, HEAD %d with %d body bytes", get.StatusCode, head.StatusCode, len(headBody))
			}
			for _, h := range []string{"Content-Type", "ETag", "Last-Modified"} {
				if head.Header.Get(h) != get.Header.Get(h) {
					t.Errorf("%s: HEAD %q, GET %q", h, head.Header.Get(h), get.Header.Get(h))
				}
			}
			if cl := head.Header.Get("Content-Length"); cl != "" && cl != get.Header.Get("Content-Length") && get.Header.Get("Content-Length") != "" {
				t.Errorf("Content-Length: HEAD %s, GET %s (%d bytes)", cl, get.Header.Get("Content-Length"), len(getBody))
			}
		})
	}
	// With compression accepted, HEAD gets the headers of the compressed GET.
	zip := map[string]string{"Authorization": "Bearer " + tok, "Accept-Encoding": "gzip"}
	get, _ := do(t, client, "GET", base+"/fhir/metadata", zip, nil)
	head, body := do(t, client, "HEAD", base+"/fhir/metadata", zip, nil)
	if len(body) != 0 || get.Header.Get("Content-Encoding") != "gzip" || head.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("HEAD with gzip accepted: Content-Encoding %q (GET %q), %d body bytes",
			head.Header.Get("Content-Encoding"), get.Header.Get("Content-Encoding"), len(body))
	}
	// HEAD needs a token like GET does.
	if resp, _ := do(t, client, "HEAD", base+"/fhir/Patient/"+id, nil, nil); resp.StatusCode != 401 {
		t.Errorf("HEAD without a token: %d", resp.StatusCode)
	}
}

// Answers are compressed when the client accepts it, and gzip request
// bodies are decoded with the decoded size counted against the limits.
func TestServeCompression(t *testing.T) {
	addr, client, out, _ := startServe(t, "--max-resource-bytes", "1048576", "--max-bundle-bytes", "2097152")
	base := "https://" + addr
	tok := adminLogin(t, client, base, out.String())

	resp, raw := do(t, client, "GET", base+"/fhir/metadata", map[string]string{"Accept-Encoding": "gzip"}, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || !slicesContain(resp.Header.Values("Vary"), "Accept-Encoding") {
		t.Fatalf("metadata with gzip: %d Content-Encoding %q Vary %q", resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header.Values("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !json.Valid(plain) || !bytes.Contains(plain, []byte(`"CapabilityStatement"`)) {
		t.Fatalf("decoded metadata: %v %.100s", err, plain)
	}
	if len(raw)*5 > len(plain) {
		t.Errorf("metadata compressed %d → %d bytes only", len(plain), len(raw))
	}
	// Small answers are not worth it.
	resp, _ = do(t, client, "GET", base+"/livez", map[string]string{"Accept-Encoding": "gzip"}, nil)
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("a tiny answer was encoded: %q", resp.Header.Get("Content-Encoding"))
	}
	// Without Accept-Encoding nothing is encoded.
	if resp, _ = do(t, client, "GET", base+"/fhir/metadata", nil, nil); resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("identity asked, got %q", resp.Header.Get("Content-Encoding"))
	}

	hdr := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/fhir+json", "Content-Encoding": "gzip"}
	// A zip bomb: 40 KB on the wire, 40 MB decoded, far over the 1 MiB
	// resource limit.
	bomb := gzipped(t, append([]byte(`{"resourceType":"Patient","gender":"`), bytes.Repeat([]byte("a"), 40<<20)...))
	for _, tc := range []struct {
		name     string
		path     string
		encoding string
		body     []byte
		want     int
		ctype    string
	}{
		{"gzip resource", "/fhir/Patient", "gzip", gzipped(t, []byte(testPatient)), 201, "application/fhir+json"},
		{"gzip Bundle", "/fhir", "gzip", gzipped(t, []byte(`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"metadata"}}]}`)), 200, "application/fhir+json"},
		{"gzip platform body", "/auth/login", "gzip", gzipped(t, []byte(`{"email":"nobody@example.org","password":"wrong password"}`)), 401, "application/json"},
		{"zip bomb", "/fhir/Patient", "gzip", bomb, 413, "application/fhir+json"},
		{"zip bomb Bundle", "/fhir", "gzip", bomb, 413, "application/fhir+json"},
		{"zip bomb platform", "/patients", "gzip", bomb, 413, "application/json"},
		{"zip bomb search form", "/fhir/Patient/_search", "gzip", gzipped(t, append([]byte("name="), bytes.Repeat([]byte("a"), 40<<20)...)), 413, "application/fhir+json"},
		{"gzip search form", "/fhir/Patient/_search", "gzip", gzipped(t, []byte("family=Okafor")), 200, "application/fhir+json"},
		{"corrupt gzip", "/fhir/Patient", "gzip", []byte("not gzip at all"), 400, "application/fhir+json"},
		{"truncated gzip", "/fhir/Patient", "gzip", gzipped(t, []byte(testPatient))[:40], 400, "application/fhir+json"},
		{"unknown coding (FHIR)", "/fhir/Patient", "br", []byte(testPatient), 415, "application/fhir+json"},
		{"unknown coding (platform)", "/patients", "deflate", []byte(`{}`), 415, "application/json"},
		{"unknown coding (OAuth)", "/auth/token", "br", []byte(`grant_type=client_credentials`), 415, "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr["Content-Encoding"] = tc.encoding
			switch {
			case strings.HasSuffix(tc.path, "/_search") || strings.HasPrefix(tc.path, "/auth/token"):
				hdr["Content-Type"] = "application/x-www-form-urlencoded"
			case !strings.HasPrefix(tc.path, "/fhir"):
				hdr["Content-Type"] = "application/json"
			default:
				hdr["Content-Type"] = "application/fhir+json"
			}
			resp, raw := do(t, client, "POST", base+tc.path, hdr, tc.body)
			if resp.StatusCode != tc.want || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) {
				t.Errorf("%d %q %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			}
			// Each API answers in its own error shape, the middleware's answers too.
			if shape := errorShape(tc.path); resp.StatusCode >= 400 && !strings.Contains(string(raw), shape) {
				t.Errorf("error body %.300s lacks %s", raw, shape)
			}
		})
	}
}

// The CapabilityStatement declares SMART on FHIR with the OAuth
// endpoints, the PATCH formats and the system-level search parameters.
func TestServeCapabilityStatementSecurity(t *testing.T) {
	addr, client, _, _ := startServe(t)
	base := "https://" + addr
	resp, raw := do(t, client, "GET", base+"/fhir/metadata", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	var cs struct {
		PatchFormat []string `json:"patchFormat"`
		Rest        []struct {
			Security struct {
				CORS      bool `json:"cors"`
				Extension []struct {
					URL       string `json:"url"`
					Extension []struct {
						URL      string `json:"url"`
						ValueURI string `json:"valueUri"`
					} `json:"extension"`
				} `json:"extension"`
				Service []struct {
					Coding []struct{ System, Code string } `json:"coding"`
				} `json:"service"`
			} `json:"security"`
			SearchParam []struct{ Name, Type string } `json:"searchParam"`
		} `json:"rest"`
	}
	if err := json.Unmarshal(raw, &cs); err != nil || len(cs.Rest) != 1 {
		t.Fatalf("%v", err)
	}
	rest := cs.Rest[0]
	if len(rest.Security.Service) != 1 || rest.Security.Service[0].Coding[0].Code != "SMART-on-FHIR" ||
		rest.Security.Service[0].Coding[0].System != "http://terminology.hl7.org/CodeSystem/restful-security-service" {
		t.Errorf("security.service: %+v", rest.Security.Service)
	}
	uris := map[string]string{}
	for _, e := range rest.Security.Extension {
		if e.URL == "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris" {
			for _, sub := range e.Extension {
				uris[sub.URL] = sub.ValueURI
			}
		}
	}
	for name, path := range map[string]string{"token": "/auth/token", "revoke": "/auth/revoke", "introspect": "/auth/introspect"} {
		if uris[name] != base+path {
			t.Errorf("oauth-uris %s = %q, want %q", name, uris[name], base+path)
		}
	}
	if rest.Security.CORS {
		t.Error("security.cors is true without --cors-origins")
	}
	if !slicesContain(cs.PatchFormat, "application/json-patch+json") || !slicesContain(cs.PatchFormat, "application/fhir+json") {
		t.Errorf("patchFormat %q", cs.PatchFormat)
	}
	names := map[string]bool{}
	for _, p := range rest.SearchParam {
		names[p.Name] = true
	}
	for _, want := range []string{"_id", "_lastUpdated", "_tag", "_profile", "_security", "_source"} {
		if !names[want] {
			t.Errorf("system searchParam lacks %s: %v", want, names)
		}
	}
}

// A 405 names the methods the path takes, on platform paths as on FHIR's.
func TestServeMethodNotAllowedSaysWhatIs(t *testing.T) {
	addr, client, out, _ := startServe(t)
	base := "https://" + addr
	tok := adminLogin(t, client, base, out.String())
	auth := map[string]string{"Authorization": "Bearer " + tok}
	for path, want := range map[string]string{
		"/patients":              "POST",
		"/patients/PT-1":         "GET, HEAD, DELETE",
		"/auth/token":            "POST",
		"/openapi.json":          "GET, HEAD",
		"/.well-known/jwks.json": "GET, HEAD",
	} {
		resp, raw := do(t, client, "PUT", base+path, auth, []byte("{}"))
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != want || !strings.Contains(string(raw), errorShape(path)) {
			t.Errorf("PUT %s: %d Allow %q, want %q; %.200s", path, resp.StatusCode, resp.Header.Get("Allow"), want, raw)
		}
	}
}
