package legacyapi

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/crypt"
)

// withAuth gives the API the issuer, as cmd/kiln does: /auth/login is
// served, and the issuer's routes are registered beside the API's.
func withAuth(c *Config, e *testEnv) {
	master := make([]byte, crypt.KeySize)
	if _, err := rand.Read(master); err != nil {
		e.t.Fatal(err)
	}
	keyring, err := crypt.NewKeyring(map[uint32][]byte{1: master})
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := auth.NewService(e.t.Context(), auth.Config{Records: e.st, Sealer: keyring, Issuer: "https://kiln.test", Audience: "https://kiln.test/fhir"})
	if err != nil {
		e.t.Fatal(err)
	}
	c.Auth, c.BaseURL = svc, "https://kiln.test"
}

// The served document describes exactly the routes the API and the
// issuer register (less the issuer's /fhir one), each operation of the
// table, and nothing undocumented; `kiln openapi` (Document) prints the
// same document.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, withAuth)
	r := e.do("GET", "/openapi.json", nil)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	doc := r.json(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi %v", doc["openapi"])
	}
	if got, _ := json.Marshal(doc["servers"]); !strings.Contains(string(got), `"url":"https://kiln.test"`) {
		t.Errorf("servers %s, want the base URL", got)
	}
	paths := doc["paths"].(map[string]any)
	served := map[string]bool{}
	register := func(method, path string) {
		key := opKey(method, path)
		served[key] = true
		item, _ := paths[path].(map[string]any)
		op, ok := item[strings.ToLower(method)].(map[string]any)
		if !ok || op["x-undocumented"] == true {
			t.Errorf("%s is served but not documented", key)
		}
	}
	for _, rt := range e.api.Routes() {
		register(rt.Method, rt.Path)
	}
	e.api.cfg.Auth.Routes(func(method, path string, _ http.Handler) {
		if !strings.HasPrefix(path, "/fhir/") {
			register(method, path)
		}
	})
	for _, want := range []string{"POST /auth/login", "POST /auth/token", "POST /auth/revoke", "POST /auth/introspect", "POST /auth/logout",
		"POST /patients", "GET /patients/{id}", "DELETE /patients/{id}", "GET /openapi.json",
		"POST /workforce", "POST /workforce/{id}/screening", "GET /workforce/{id}/compliance", "GET /.well-known/jwks.json", "GET /.well-known/openid-configuration"} {
		if !served[want] {
			t.Errorf("%s is not served", want)
		}
	}
	for path, item := range paths {
		for method := range item.(map[string]any) {
			if !served[opKey(strings.ToUpper(method), path)] {
				t.Errorf("%s %s is documented but not served", method, path)
			}
		}
	}
	for key := range operations {
		if !served[key] {
			t.Errorf("operation %s has no route", key)
		}
	}
	full, err := Document("https://kiln.test")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.MarshalIndent(full, "", "  "); !bytes.Equal(b, r.body) {
		t.Error("Document (kiln openapi) differs from the served document")
	}

	// Request bodies are the schema files; scopes are security requirements.
	post := paths["/patients"].(map[string]any)["post"].(map[string]any)
	schemaRef := post["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)["$ref"]
	if schemaRef != "#/components/schemas/NewPatient" {
		t.Errorf("POST /patients body %v", schemaRef)
	}
	comp := doc["components"].(map[string]any)["schemas"].(map[string]any)
	want, _ := json.Marshal(e.api.schemas.docs[schemaPatientCreate]["properties"])
	got, _ := json.Marshal(comp["NewPatient"].(map[string]any)["properties"])
	if !bytes.Equal(want, got) {
		t.Error("the served NewPatient schema differs from the file")
	}
	for path, want := range map[string]string{
		"/patients/{id} delete":      `[{"bearer":["patients:write"]}]`,
		"/auth/token post":           `[{"clientBasic":[]},{}]`,
		"/auth/revoke post":          `[{"clientBasic":[]},{"bearer":[]},{}]`,
		"/auth/introspect post":      `[{"clientBasic":[]},{"bearer":[]},{}]`,
		"/auth/logout post":          `[{"bearer":[]}]`,
		"/auth/login post":           `[]`,
		"/.well-known/jwks.json get": `[]`,
	} {
		p, m, _ := strings.Cut(path, " ")
		sec, _ := json.Marshal(paths[p].(map[string]any)[m].(map[string]any)["security"])
		if string(sec) != want {
			t.Errorf("%s security %s, want %s", path, sec, want)
		}
	}
	token := paths["/auth/token"].(map[string]any)["post"].(map[string]any)
	if _, ok := token["requestBody"].(map[string]any)["content"].(map[string]any)["application/x-www-form-urlencoded"]; !ok {
		t.Error("POST /auth/token: the body is not a form")
	}
	for _, ref := range []string{"Error", "OAuthError", "PatientSummary", "PatientAnonymized", "PatientCreated", "TokenRequest", "TokenResponse",
		"Introspection", "JWKSet", "OpenIDConfiguration", "LogoutResponse"} {
		if comp[ref] == nil {
			t.Errorf("no component %s", ref)
		}
	}
}

// Without the issuer, the document has neither its routes nor their
// bodies, and the server is the one that answered.
func TestOpenAPIWithoutAuth(t *testing.T) {
	e := newEnv(t)
	doc := e.do("GET", "/openapi.json", nil).json(t)
	paths := doc["paths"].(map[string]any)
	for _, p := range []string{"/auth/login", "/auth/token", "/.well-known/jwks.json"} {
		if paths[p] != nil {
			t.Errorf("%s documented without the issuer", p)
		}
	}
	if comp := doc["components"].(map[string]any)["schemas"].(map[string]any); comp["OAuthError"] != nil || comp["TokenResponse"] != nil {
		t.Error("OAuth bodies documented without the issuer")
	}
	if s, _ := json.Marshal(doc["servers"]); string(s) != `[{"description":"The server that served this document.","url":"/"}]` {
		t.Errorf("servers %s", s)
	}
}

// Every operation that takes input or a caller's identity lists its 4xx
// answers, with the body its endpoint really uses: the OAuth endpoints
// the RFC 6749 body for their own errors, the others the platform Error.
// (The lint's operation-4xx-response rule is off for the three static
// documents; this test holds the rest to it.)
func TestOpenAPIErrorResponses(t *testing.T) {
	oauth := []string{"POST /auth/token", "POST /auth/revoke", "POST /auth/introspect"}
	for key, op := range operations {
		takesInput := op.request != "" || len(op.security) > 0 || strings.Contains(key, "{")
		if !takesInput {
			continue
		}
		var codes []string
		for c := range op.errors {
			codes = append(codes, c)
		}
		for c := range op.oauthErrors {
			codes = append(codes, c)
		}
		if !slices.ContainsFunc(codes, func(c string) bool { return strings.HasPrefix(c, "4") }) {
			t.Errorf("%s has no 4xx answer", key)
		}
		isOAuth := slices.Contains(oauth, key)
		for c := range op.errors {
			if isOAuth && c != "429" { // the rate limit answers before the endpoint, in the platform shape
				t.Errorf("%s: %s is documented with the platform body", key, c)
			}
		}
		if !isOAuth && len(op.oauthErrors) > 0 {
			t.Errorf("%s: documented with the OAuth body", key)
		}
		if isOAuth && (op.oauthErrors["400"] == "" || op.oauthErrors["401"] == "") {
			t.Errorf("%s: no OAuth 400 and 401", key)
		}
		// The form's size limit and the chain's refusal of a content
		// coding answer there too, in the RFC 6749 shape.
		if isOAuth && (op.oauthErrors["413"] == "" || op.oauthErrors["415"] == "") {
			t.Errorf("%s: no OAuth 413 and 415", key)
		}
		for c, text := range op.errors {
			if text == "" && errorText[c] == "" {
				t.Errorf("%s: %s has no description", key, c)
			}
		}
	}
}

// The bodies the issuer's endpoints really answer match the schemas the
// document gives them.
func TestOpenAPIBodiesMatchAnswers(t *testing.T) {
	e := newEnv(t, withAuth)
	svc := e.api.cfg.Auth
	if _, err := svc.Users.Add(t.Context(), "ada@example.org", auth.RoleAdmin, "patients:read", "", "a long admin password"); err != nil {
		t.Fatal(err)
	}
	form := func(path string, v url.Values, headers ...string) resp {
		return e.do("POST", path, []byte(v.Encode()), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, headers...)...)
	}
	r := e.do("POST", "/auth/login", []byte(`{"email":"ada@example.org","password":"a long admin password"}`))
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	e.conforms(schemaLoginResponse, r.body)
	login := r.json(t)
	e.conforms(schemaError, e.do("POST", "/auth/login", []byte(`{"email":"ada@example.org","password":"wrong"}`)).body)

	r = form("/auth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {login["refresh_token"].(string)}})
	if r.status != 200 {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	e.conforms(schemaTokenResponse, r.body)
	access := r.json(t)["access_token"].(string)
	for _, v := range []url.Values{{"grant_type": {"password"}}, {}, {"grant_type": {"refresh_token"}, "refresh_token": {"spent"}},
		{"grant_type": {"client_credentials"}, "client_id": {"nobody"}, "client_secret": {"nothing"}}} {
		r := form("/auth/token", v)
		if r.status != 400 && r.status != 401 {
			t.Errorf("token %v: %d", v, r.status)
		}
		e.conforms(schemaOAuthError, r.body)
	}
	for _, path := range []string{"/auth/token", "/auth/revoke", "/auth/introspect"} {
		r := form(path, url.Values{"token": {strings.Repeat("a", 65<<10)}})
		if r.status != 413 {
			t.Errorf("%s: an oversized form: %d %s", path, r.status, r.body)
		}
		e.conforms(schemaOAuthError, r.body)
	}
	r = form("/auth/introspect", url.Values{"token": {access}}, "Authorization", "Bearer "+access)
	if r.status != 200 || r.json(t)["active"] != true {
		t.Fatalf("introspect: %d %s", r.status, r.body)
	}
	e.conforms(schemaIntrospection, r.body)
	for path, schema := range map[string]string{"/.well-known/jwks.json": schemaJWKS, "/.well-known/openid-configuration": schemaOpenIDConfiguration} {
		r := e.do("GET", path, nil)
		if r.status != 200 {
			t.Fatalf("%s: %d", path, r.status)
		}
		e.conforms(schema, r.body)
	}
}
