package app_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/app"
)

// fakeClock is a clock the tests advance by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now().UTC().Truncate(time.Second)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// authHarness is the server kiln serve assembles (app.Open: login, the
// OAuth2 routes, the FHIR API with the ScopeAuthorizer, all behind
// Require and the middleware chain) over TLS on loopback, with a clock
// the test controls and a signing key the test knows.
type authHarness struct {
	t     *testing.T
	srv   *httptest.Server
	base  string // server root (issuer)
	app   *app.App
	svc   *auth.Service
	store store.Store
	// records is the same store's server-state records (users, keys,
	// revocations), as another instance would share them.
	records store.Records
	clock   *fakeClock
	// kid and key are the trusted signing key the harness planted in the
	// store before the service started: tests sign arbitrary tokens with it.
	kid string
	key *rsa.PrivateKey
}

// newAuthHarness builds the stack on the clock now; pass nil for a fresh
// fake clock (h.clock). With a non-nil now, h.clock is nil. mounts are
// the FHIR services (none: the clinical one at /fhir, as kiln serve).
func newAuthHarness(t *testing.T, now func() time.Time, mounts ...app.Mount) *authHarness {
	t.Helper()
	return newAuthHarnessOn(t, app.Storage{DataDir: t.TempDir()}, now, mounts...)
}

// newAuthHarnessOn is newAuthHarness on storage (a data folder, which
// holds the master key, and the stores' SQLite files or MongoDB).
func newAuthHarnessOn(t *testing.T, storage app.Storage, now func() time.Time, mounts ...app.Mount) *authHarness {
	t.Helper()
	ctx := t.Context()
	var clock *fakeClock
	if now == nil {
		clock = newFakeClock()
		now = clock.Now
	}
	// The master key the app will load, and the records it will find.
	keyring, err := crypt.LoadKeyring(storage.DataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := app.OpenStore(ctx, storage, app.PartitionClinical)
	if err != nil {
		t.Fatal(err)
	}
	kid, key := plantSigningKey(t, st, keyring, now())
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewUnstartedServer(nil)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a, err := app.Open(ctx, app.Config{Storage: storage, BaseURL: srv.URL, FHIR: mounts, Now: now, ProfileURL: testProfileURL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	jwks, err := a.Auth.Keys.JWKS(ctx)
	if err != nil || len(jwks.Keys) != 1 || jwks.Keys[0].KeyID != kid {
		t.Fatalf("the planted key is not the published one: %v %+v", err, jwks)
	}
	srv.Config.Handler = a.Handler
	return &authHarness{t: t, srv: srv, base: srv.URL, app: a, svc: a.Auth, store: a.Store, records: a.Store, clock: clock, kid: kid, key: key}
}

// plantSigningKey writes an RSA signing key into the records in the
// format of auth's keys.go (keyRecord, sealed PKCS#8 with aad
// "signing-key:<kid>") before NewService runs, so that the service
// adopts it instead of generating one the test could not know.
func plantSigningKey(t *testing.T, rec store.Records, sealer auth.Sealer, now time.Time) (string, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	kid := "test-" + randHex(t, 8)
	sealed, err := sealer.Seal(der, []byte("signing-key:"+kid))
	if err != nil {
		t.Fatal(err)
	}
	v, err := json.Marshal(map[string]any{"kid": kid, "sealed": sealed, "created": now, "signs": now})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.PutRecord(t.Context(), store.Record{Kind: "signing-key", ID: kid, Version: 1, Value: v}); err != nil {
		t.Fatal(err)
	}
	return kid, key
}

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// do sends a request to the server root + path with an optional bearer
// token (""), a body and header pairs.
func (h *authHarness) do(method, path, token string, body []byte, headers ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil && strings.HasPrefix(path, "/fhir") {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// form posts an application/x-www-form-urlencoded body; basic is
// "id:secret" for client_secret_basic ("" for none).
func (h *authHarness) form(path, token, basic string, v url.Values) response {
	h.t.Helper()
	headers := []string{"Content-Type", "application/x-www-form-urlencoded"}
	if basic != "" {
		headers = append(headers, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(basic)))
	}
	return h.do(http.MethodPost, path, token, []byte(v.Encode()), headers...)
}

func (h *authHarness) login(email, password string) response {
	h.t.Helper()
	b, _ := json.Marshal(map[string]string{"email": email, "password": password})
	return h.do(http.MethodPost, "/auth/login", "", b, "Content-Type", "application/json")
}

// issue mints a token through the service's own issuer.
func (h *authHarness) issue(role, scope string) string {
	h.t.Helper()
	tok, _, err := h.svc.Tokens.Issue(h.t.Context(), "user/test-"+randHex(h.t, 4), role, "", "", scope)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// admin is a token with every scope and the admin role.
func (h *authHarness) admin() string {
	return h.issue(auth.RoleAdmin, auth.AllScopes(auth.ContextSystem).String())
}

func (h *authHarness) addUser(email, role, scopes, password string) {
	h.t.Helper()
	if _, err := h.svc.Users.Add(h.t.Context(), email, role, scopes, "", password); err != nil {
		h.t.Fatal(err)
	}
}

// validClaims are the claims of a token the server would accept.
func (h *authHarness) validClaims() map[string]any {
	t := h.now()
	return map[string]any{
		"iss": h.base, "sub": "user/forger", "aud": h.base + "/fhir",
		"exp": t.Add(time.Hour).Unix(), "iat": t.Unix(), "jti": randHex(h.t, 16),
		"scope": "system/*.cruds",
	}
}

func (h *authHarness) now() time.Time {
	if h.clock != nil {
		return h.clock.Now()
	}
	return time.Now()
}

// sign signs claims with an RSA key under the given JOSE algorithm, kid
// and typ ("" leaves typ out).
func sign(t *testing.T, key any, alg jose.SignatureAlgorithm, kid, typ string, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// handMade builds a compact JWS from a header and claims, signing the
// signing input with sig (nil: empty signature).
func handMade(t *testing.T, header, claims map[string]any, sig func(input []byte) []byte) string {
	t.Helper()
	hb, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := b64(hb) + "." + b64(cb)
	var s []byte
	if sig != nil {
		s = sig([]byte(input))
	}
	return input + "." + b64(s)
}

func hs256(key []byte) func([]byte) []byte {
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, key)
		m.Write(in)
		return m.Sum(nil)
	}
}

// expectInvalidToken asserts the 401 of a missing or bad bearer token.
func expectInvalidToken(t *testing.T, r response) {
	t.Helper()
	if r.status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401; body %s", r.status, r.body)
	}
	wa := r.header.Get("WWW-Authenticate")
	if !strings.HasPrefix(wa, "Bearer ") || !strings.Contains(wa, `error="invalid_token"`) {
		t.Errorf(`WWW-Authenticate %q, want Bearer … error="invalid_token"`, wa)
	}
}

// expectBearerChallenge asserts the 401 of a request without any bearer
// token: RFC 6750 §3.1, the challenge names the scheme and realm and no
// error code, since no token was tried.
func expectBearerChallenge(t *testing.T, r response) {
	t.Helper()
	if r.status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401; body %s", r.status, r.body)
	}
	if wa := r.header.Get("WWW-Authenticate"); wa != `Bearer realm="kiln"` {
		t.Errorf(`WWW-Authenticate %q, want Bearer realm="kiln" (no error code without a token)`, wa)
	}
}

// TestAuthTokenForgeries: every forged or defective token is refused with
// 401 invalid_token at a protected FHIR read, while a correct token signed
// the same way is accepted (so each case fails for its defect alone). A
// request with no bearer token at all gets the bare Bearer challenge.
func TestAuthTokenForgeries(t *testing.T) {
	h := newAuthHarness(t, nil)
	unthrottled(h) // more /auth/introspect requests than one burst

	// The public key as any client sees it.
	r := h.do(http.MethodGet, "/.well-known/jwks.json", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("jwks: %d %s", r.status, r.body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks: %v %s", err, r.body)
	}
	pub, ok := set.Keys[0].Key.(*rsa.PublicKey)
	if !ok {
		t.Fatalf("jwks key is %T", set.Keys[0].Key)
	}
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := x509.MarshalPKCS1PublicKey(pub)
	pemPKIX := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	jwkJSON, _ := json.Marshal(set.Keys[0])

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	with := func(mod func(c map[string]any)) map[string]any {
		c := h.validClaims()
		mod(c)
		return c
	}
	atHeader := func(alg string) map[string]any { return map[string]any{"alg": alg, "typ": "at+jwt", "kid": h.kid} }

	// The control: the trusted key, the right claims and headers.
	control := sign(t, h.key, jose.RS256, h.kid, "at+jwt", h.validClaims())
	if r := h.do(http.MethodGet, "/fhir/Patient", control, nil); r.status != http.StatusOK {
		t.Fatalf("the well-formed control token was refused: %d %s", r.status, r.body)
	}
	// A real token of the issuer, to tamper with.
	real := h.issue("provider", "patients:read")
	parts := strings.Split(real, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var pc map[string]any
	if err := json.Unmarshal(payload, &pc); err != nil {
		t.Fatal(err)
	}
	pc["scope"] = "system/*.cruds"
	pc["role"] = "admin"
	tamperedPayload, _ := json.Marshal(pc)
	tampered := parts[0] + "." + b64(tamperedPayload) + "." + parts[2]

	cases := []struct {
		name, token string
		header      []string // instead of a bearer token
	}{
		{name: "no token"},
		{name: "not bearer scheme", header: []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))}},
		{name: "garbage", token: "not-a-jwt"},
		{name: "alg none", token: handMade(t, atHeader("none"), h.validClaims(), nil)},
		{name: "alg None", token: handMade(t, atHeader("None"), h.validClaims(), nil)},
		{name: "alg none with RS256 signature kept", token: func() string {
			p := strings.Split(control, ".")
			hb, _ := json.Marshal(atHeader("none"))
			return b64(hb) + "." + p[1] + "." + p[2]
		}()},
		{name: "HS256 keyed with the PKIX DER public key", token: handMade(t, atHeader("HS256"), h.validClaims(), hs256(pkix))},
		{name: "HS256 keyed with the PEM public key", token: handMade(t, atHeader("HS256"), h.validClaims(), hs256(pemPKIX))},
		{name: "HS256 keyed with the PKCS1 public key", token: handMade(t, atHeader("HS256"), h.validClaims(), hs256(pkcs1))},
		{name: "HS256 keyed with the JWK JSON", token: handMade(t, atHeader("HS256"), h.validClaims(), hs256(jwkJSON))},
		{name: "HS256 keyed with the modulus", token: handMade(t, atHeader("HS256"), h.validClaims(), hs256(pub.N.Bytes()))},
		{name: "RS512 by the trusted key", token: sign(t, h.key, jose.RS512, h.kid, "at+jwt", h.validClaims())},
		{name: "PS256 by the trusted key", token: sign(t, h.key, jose.PS256, h.kid, "at+jwt", h.validClaims())},
		{name: "ES256 with the trusted kid", token: sign(t, ecKey, jose.ES256, h.kid, "at+jwt", h.validClaims())},
		{name: "expired long ago", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) {
			c["exp"] = h.now().Add(-time.Hour).Unix()
			c["iat"] = h.now().Add(-2 * time.Hour).Unix()
		}))},
		{name: "no exp", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { delete(c, "exp") }))},
		{name: "exp null", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { c["exp"] = nil }))},
		{name: "exp as a string", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { c["exp"] = "never" }))},
		{name: "wrong iss", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { c["iss"] = "https://evil.example" }))},
		{name: "no iss", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { delete(c, "iss") }))},
		{name: "wrong aud", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { c["aud"] = "https://other.example/fhir" }))},
		{name: "aud of the issuer root", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { c["aud"] = h.base }))},
		{name: "no aud", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { delete(c, "aud") }))},
		{name: "typ JWT (an ID token)", token: sign(t, h.key, jose.RS256, h.kid, "JWT", with(func(c map[string]any) { c["nonce"] = "n" }))},
		{name: "no typ", token: sign(t, h.key, jose.RS256, h.kid, "", h.validClaims())},
		{name: "typ at+jwt+x", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt+x", h.validClaims())},
		{name: "unknown kid (key not in the JWKS)", token: sign(t, other, jose.RS256, "not-published", "at+jwt", h.validClaims())},
		{name: "no kid", token: sign(t, h.key, jose.RS256, "", "at+jwt", h.validClaims())},
		{name: "trusted kid, other key", token: sign(t, other, jose.RS256, h.kid, "at+jwt", h.validClaims())},
		{name: "tampered payload", token: tampered},
		{name: "signature stripped", token: parts[0] + "." + parts[1] + "."},
		{name: "issued in the future", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) {
			c["iat"] = h.now().Add(time.Hour).Unix()
			c["exp"] = h.now().Add(2 * time.Hour).Unix()
		}))},
		{name: "no jti", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { delete(c, "jti") }))},
		{name: "no sub", token: sign(t, h.key, jose.RS256, h.kid, "at+jwt", with(func(c map[string]any) { delete(c, "sub") }))},
		{name: "two tokens", token: control + " " + control},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headers := c.header
			for _, path := range []string{"/fhir/Patient", "/fhir/Patient?_count=1", "/auth/introspect"} {
				var r response
				if path == "/auth/introspect" {
					// An OAuth endpoint: a JSON error, the same 401.
					hs := append([]string{"Content-Type", "application/x-www-form-urlencoded"}, headers...)
					r = h.do(http.MethodPost, path, c.token, []byte("token=x"), hs...)
					if c.token == "" {
						// No bearer token at all: it also takes client
						// authentication, so it answers invalid_client.
						expectInvalidClient(t, r)
						continue
					}
				} else {
					r = h.do(http.MethodGet, path, c.token, nil, headers...)
				}
				if c.token == "" {
					expectBearerChallenge(t, r)
				} else {
					expectInvalidToken(t, r)
				}
				if strings.HasPrefix(path, "/fhir") {
					expectOutcome(t, r, http.StatusUnauthorized, "")
				}
			}
		})
	}
	// The refusals left the control usable (nothing was cached wrongly).
	if r := h.do(http.MethodGet, "/fhir/Patient", control, nil); r.status != http.StatusOK {
		t.Fatalf("the control token is refused after the forgeries: %d %s", r.status, r.body)
	}
}

// TestAuthTokenExpired: a token is accepted until exp plus the 30 s clock
// skew, and refused with 401 invalid_token after it.
func TestAuthTokenExpired(t *testing.T) {
	h := newAuthHarness(t, nil)
	tok := h.issue("provider", "patients:read")
	if r := h.do(http.MethodGet, "/fhir/Patient", tok, nil); r.status != http.StatusOK {
		t.Fatalf("fresh token: %d %s", r.status, r.body)
	}
	h.clock.Advance(auth.TokenLifetime + 29*time.Second)
	if r := h.do(http.MethodGet, "/fhir/Patient", tok, nil); r.status != http.StatusOK {
		t.Fatalf("token within the skew after exp: %d %s", r.status, r.body)
	}
	h.clock.Advance(2 * time.Second)
	r := h.do(http.MethodGet, "/fhir/Patient", tok, nil)
	expectInvalidToken(t, r)
	if !strings.Contains(r.header.Get("WWW-Authenticate"), "expired") {
		t.Errorf("WWW-Authenticate %q does not say expired", r.header.Get("WWW-Authenticate"))
	}
}

// TestAuthTokenRevoked: POST /auth/logout revokes the presented token, and
// POST /auth/revoke (RFC 7009) revokes the given one; both are refused
// afterwards while other tokens keep working.
func TestAuthTokenRevoked(t *testing.T) {
	h := newAuthHarness(t, nil)
	h.addUser("nurse@example.org", auth.RoleProvider, "patients:read patients:write", "correct horse battery staple")
	r := h.login("nurse@example.org", "correct horse battery staple")
	if r.status != http.StatusOK {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	tok, _ := r.json(t)["access_token"].(string)
	other := h.issue("provider", "patients:read")

	t.Run("logout", func(t *testing.T) {
		if r := h.do(http.MethodGet, "/fhir/Patient", tok, nil); r.status != http.StatusOK {
			t.Fatalf("before logout: %d %s", r.status, r.body)
		}
		if r := h.do(http.MethodPost, "/auth/logout", tok, nil); r.status != http.StatusOK {
			t.Fatalf("logout: %d %s", r.status, r.body)
		}
		expectInvalidToken(t, h.do(http.MethodGet, "/fhir/Patient", tok, nil))
		expectInvalidToken(t, h.do(http.MethodPost, "/auth/logout", tok, nil))
		if r := h.do(http.MethodGet, "/fhir/Patient", other, nil); r.status != http.StatusOK {
			t.Fatalf("an unrelated token after logout: %d %s", r.status, r.body)
		}
	})
	t.Run("revoke", func(t *testing.T) {
		victim := h.issue("provider", "patients:read")
		if r := h.do(http.MethodGet, "/fhir/Patient", victim, nil); r.status != http.StatusOK {
			t.Fatalf("before revoke: %d %s", r.status, r.body)
		}
		// Without authentication nothing is revoked (RFC 7009 §2.1).
		expectInvalidClient(t, h.form("/auth/revoke", "", "", url.Values{"token": {victim}}))
		if r := h.do(http.MethodGet, "/fhir/Patient", victim, nil); r.status != http.StatusOK {
			t.Fatalf("after an unauthenticated revoke: %d %s", r.status, r.body)
		}
		admin := h.admin()
		r := h.form("/auth/revoke", admin, "", url.Values{"token": {victim}})
		if r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		expectInvalidToken(t, h.do(http.MethodGet, "/fhir/Patient", victim, nil))
		// RFC 7009 §2.2: an unknown token is not an error.
		if r := h.form("/auth/revoke", admin, "", url.Values{"token": {"garbage"}}); r.status != http.StatusOK {
			t.Fatalf("revoke of garbage: %d %s", r.status, r.body)
		}
		// Introspection agrees.
		r = h.form("/auth/introspect", admin, "", url.Values{"token": {victim}})
		if r.status != http.StatusOK || r.json(t)["active"] != false {
			t.Fatalf("introspection of a revoked token: %d %s", r.status, r.body)
		}
		if r := h.form("/auth/introspect", admin, "", url.Values{"token": {other}}); r.status != http.StatusOK || r.json(t)["active"] != true {
			t.Fatalf("introspection of a live token: %d %s", r.status, r.body)
		}
	})
}

// TestAuthTokenRevokedElsewhere: a token revoked by another instance over
// the same store (a second Tokens on the same records) is refused once the
// verifying instance rechecks its revocation list, within seconds, even
// though it had accepted (and may remember) the token before.
func TestAuthTokenRevokedElsewhere(t *testing.T) {
	h := newAuthHarness(t, nil)
	tok, claims, err := h.svc.Tokens.Issue(t.Context(), "user/elsewhere", auth.RoleProvider, "", "", "patients:read")
	if err != nil {
		t.Fatal(err)
	}
	if r := h.do(http.MethodGet, "/fhir/Patient", tok, nil); r.status != http.StatusOK {
		t.Fatalf("before revocation: %d %s", r.status, r.body)
	}
	otherInstance := auth.NewTokens(h.svc.Keys, h.records, h.base, h.base+"/fhir", h.clock.Now)
	if err := otherInstance.Revoke(t.Context(), claims.ID, claims.Expiry.Time()); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Second)
	expectInvalidToken(t, h.do(http.MethodGet, "/fhir/Patient", tok, nil))
}

// --- scopes against endpoint classes -------------------------------------

func (h *authHarness) create(token, typ string, body string) string {
	h.t.Helper()
	r := h.do(http.MethodPost, "/fhir/"+typ, token, []byte(body))
	if r.status != http.StatusCreated {
		h.t.Fatalf("create %s: %d %s", typ, r.status, r.body)
	}
	id, _ := r.json(h.t)["id"].(string)
	if id == "" {
		h.t.Fatalf("create %s: no id in %s", typ, r.body)
	}
	return id
}

const minimalClaim = `{"resourceType":"Claim","status":"active",
 "type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/claim-type","code":"professional"}]},
 "use":"claim","patient":{"reference":"Patient/%s"},"created":"2026-03-02",
 "provider":{"display":"Lagos Clinic"},
 "priority":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/processpriority","code":"normal"}]},
 "insurance":[{"sequence":1,"focal":true,"coverage":{"display":"NHIS"}}]}`

// TestScopeEndpointClasses: each scope against reads and writes of clinical
// resources, financial writes, and (for workforce:read) the clinical
// partition it must never reach. A refusal is 403 with a forbidden
// OperationOutcome; an allowed request is anything but 401/403.
func TestScopeEndpointClasses(t *testing.T) {
	h := newAuthHarness(t, nil)
	admin := h.admin()
	pid := h.create(admin, "Patient", string(fixture(t, "patient.json")))
	oid := h.create(admin, "Observation", strings.Replace(string(fixture(t, "observation.json")), "Patient/example", "Patient/"+pid, 1))
	patient := string(fixture(t, "patient.json"))
	observation := string(fixture(t, "observation.json"))
	claim := strings.Replace(minimalClaim, "%s", pid, 1)
	updatePatient := strings.Replace(patient, `"resourceType": "Patient",`, `"resourceType": "Patient", "id": "`+pid+`",`, 1)

	type req struct {
		name, method, path, body string
	}
	var (
		readPatient   = req{"read Patient", http.MethodGet, "/fhir/Patient/" + pid, ""}
		searchPatient = req{"search Patient", http.MethodGet, "/fhir/Patient?gender=female", ""}
		historyPat    = req{"history Patient", http.MethodGet, "/fhir/Patient/" + pid + "/_history", ""}
		createPatient = req{"create Patient", http.MethodPost, "/fhir/Patient", patient}
		updPatient    = req{"update Patient", http.MethodPut, "/fhir/Patient/" + pid, updatePatient}
		readObs       = req{"read Observation", http.MethodGet, "/fhir/Observation/" + oid, ""}
		searchObs     = req{"search Observation", http.MethodGet, "/fhir/Observation", ""}
		createObs     = req{"create Observation", http.MethodPost, "/fhir/Observation", observation}
		createClaim   = req{"create Claim", http.MethodPost, "/fhir/Claim", claim}
		searchClaim   = req{"search Claim", http.MethodGet, "/fhir/Claim", ""}
		searchAll     = req{"system search", http.MethodGet, "/fhir?_count=1", ""}
	)
	all := []req{readPatient, searchPatient, historyPat, createPatient, updPatient, readObs, searchObs, createObs, createClaim, searchClaim, searchAll}
	cases := []struct {
		scope   string
		allowed []req // everything else in all is refused
	}{
		{"patients:read", []req{readPatient, searchPatient, historyPat, readObs, searchObs, searchClaim, searchAll}},
		{"patients:write", []req{createPatient, updPatient, createObs}},
		{"workforce:read", nil},
		{"payments:write", []req{createClaim}},
		{"consultations:read", nil},
		{"user/Observation.rs", []req{readObs, searchObs}},
		{"patient/Observation.rs", nil}, // needs a launch patient Kiln does not issue
		{"user/Patient.read", []req{readPatient, searchPatient, historyPat}},
		{"user/Patient.c", []req{createPatient}},
		{"system/*.cruds", all},
		{"openid fhirUser", nil},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.scope, "/", "_"), func(t *testing.T) {
			tok := h.issue(auth.RoleProvider, c.scope)
			for _, rq := range all {
				want := false
				for _, a := range c.allowed {
					want = want || a.name == rq.name
				}
				var body []byte
				if rq.body != "" {
					body = []byte(rq.body)
				}
				r := h.do(rq.method, rq.path, tok, body)
				switch {
				case want && (r.status == http.StatusForbidden || r.status == http.StatusUnauthorized):
					t.Errorf("%s with %q: %d, want allowed; %s", rq.name, c.scope, r.status, r.body)
				case want && r.status >= 300:
					t.Errorf("%s with %q: allowed but failed %d; %s", rq.name, c.scope, r.status, r.body)
				case !want && r.status != http.StatusForbidden:
					t.Errorf("%s with %q: %d, want 403; %s", rq.name, c.scope, r.status, r.body)
				case !want:
					expectOutcome(t, r, http.StatusForbidden, "")
					if !bytes.Contains(r.body, []byte(`"forbidden"`)) {
						t.Errorf("%s with %q: 403 without issue code forbidden: %s", rq.name, c.scope, r.body)
					}
				}
			}
		})
	}
	// The public FHIR document needs no token at all.
	if r := h.do(http.MethodGet, "/fhir/metadata", "", nil); r.status != http.StatusOK {
		t.Errorf("GET /fhir/metadata without a token: %d", r.status)
	}
}

// entryTypes counts the searchset's entries by resource type.
func entryTypes(t *testing.T, r response) map[string]int {
	t.Helper()
	var b struct {
		Total int `json:"total"`
		Entry []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("not a Bundle: %v %s", err, r.body)
	}
	out := map[string]int{}
	for _, e := range b.Entry {
		out[e.Resource.ResourceType]++
	}
	return out
}

// TestScopeIncludeOfUngrantedType: a token for Observation only may search
// Observations, but an _include or _revinclude must not reveal a Patient:
// an untyped include answers without the Patient, a typed one (naming
// Patient) is refused.
func TestScopeIncludeOfUngrantedType(t *testing.T) {
	h := newAuthHarness(t, nil)
	admin := h.admin()
	pid := h.create(admin, "Patient", string(fixture(t, "patient.json")))
	h.create(admin, "Observation", strings.Replace(string(fixture(t, "observation.json")), "Patient/example", "Patient/"+pid, 1))
	// With every scope the include works: the Patient is in the Bundle.
	r := h.do(http.MethodGet, "/fhir/Observation?_include=Observation:subject", admin, nil)
	if r.status != http.StatusOK || entryTypes(t, r)["Patient"] != 1 {
		t.Fatalf("admin include: %d %s", r.status, r.body)
	}
	tok := h.issue(auth.RoleProvider, "user/Observation.rs")
	for _, q := range []string{
		"/fhir/Observation?_include=Observation:subject",
		"/fhir/Observation?_include=*",
		"/fhir/Observation?_include=Observation:subject&_include:iterate=Patient:link",
		"/fhir/Observation/_search?_include=Observation:subject",
	} {
		var r response
		if strings.Contains(q, "/_search") {
			u, _ := url.Parse(q)
			r = h.do(http.MethodPost, u.Path, tok, []byte(u.RawQuery), "Content-Type", "application/x-www-form-urlencoded")
		} else {
			r = h.do(http.MethodGet, q, tok, nil)
		}
		if r.status == http.StatusForbidden {
			continue // refusing the whole search is also safe
		}
		if r.status != http.StatusOK {
			t.Errorf("%s: %d %s", q, r.status, r.body)
			continue
		}
		types := entryTypes(t, r)
		if types["Patient"] != 0 || bytes.Contains(r.body, []byte("Okafor")) {
			t.Errorf("%s reveals the Patient to user/Observation.rs: %s", q, r.body)
		}
		if types["Observation"] != 1 {
			t.Errorf("%s: the allowed Observation is missing: %s", q, r.body)
		}
	}
	for _, q := range []string{
		"/fhir/Observation?_include=Observation:subject:Patient",
		"/fhir/Observation?_revinclude=Patient:link",
		"/fhir/Observation?subject:Patient.family=Okafor",
		"/fhir/Observation?_has:Provenance:target:agent=Practitioner/x",
	} {
		r := h.do(http.MethodGet, q, tok, nil)
		if r.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403; %s", q, r.status, r.body)
		}
	}
}

// TestScopeTransactionWithForbiddenEntry: a transaction with one entry the
// token may not perform is refused as a whole, and nothing of it is
// stored; the same transaction without that entry succeeds.
func TestScopeTransactionWithForbiddenEntry(t *testing.T) {
	h := newAuthHarness(t, nil)
	admin := h.admin()
	tok := h.issue(auth.RoleProvider, "user/Patient.cruds")
	marker := "tx-" + randHex(t, 6)
	patient := `{"resourceType":"Patient","identifier":[{"system":"urn:test","value":"` + marker + `"}],"name":[{"family":"Txfamily"}]}`
	org := `{"resourceType":"Organization","identifier":[{"system":"urn:test","value":"` + marker + `"}],"name":"Tx Org"}`
	bundle := func(entries ...string) []byte {
		var es []string
		for _, e := range entries {
			var m map[string]any
			if err := json.Unmarshal([]byte(e), &m); err != nil {
				t.Fatal(err)
			}
			es = append(es, `{"fullUrl":"urn:uuid:`+randUUID(t)+`","resource":`+e+`,"request":{"method":"POST","url":"`+m["resourceType"].(string)+`"}}`)
		}
		return []byte(`{"resourceType":"Bundle","type":"transaction","entry":[` + strings.Join(es, ",") + `]}`)
	}
	count := func(typ string) int {
		r := h.do(http.MethodGet, "/fhir/"+typ+"?identifier=urn:test|"+marker, admin, nil)
		if r.status != http.StatusOK {
			t.Fatalf("admin search %s: %d %s", typ, r.status, r.body)
		}
		return entryTypes(t, r)[typ]
	}

	for _, order := range [][]string{{patient, org}, {org, patient}} {
		r := h.do(http.MethodPost, "/fhir", tok, bundle(order...))
		if r.status != http.StatusForbidden {
			t.Errorf("transaction with a forbidden Organization entry: %d, want 403; %s", r.status, r.body)
		}
		if n := count("Patient"); n != 0 {
			t.Fatalf("the refused transaction stored %d Patient(s)", n)
		}
		if n := count("Organization"); n != 0 {
			t.Fatalf("the refused transaction stored %d Organization(s)", n)
		}
	}
	// Control: the allowed part alone goes through.
	if r := h.do(http.MethodPost, "/fhir", tok, bundle(patient)); r.status != http.StatusOK {
		t.Fatalf("transaction with only the allowed entry: %d %s", r.status, r.body)
	}
	if n := count("Patient"); n != 1 {
		t.Fatalf("after the allowed transaction: %d Patients, want 1", n)
	}
}

func randUUID(t *testing.T) string {
	s := randHex(t, 16)
	return s[:8] + "-" + s[8:12] + "-4" + s[13:16] + "-a" + s[17:20] + "-" + s[20:]
}

// --- client credentials -------------------------------------------------

// tokenResponse checks a successful token response and returns its body.
func tokenResponse(t *testing.T, r response) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("token request: %d %s", r.status, r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	m := r.json(t)
	if m["token_type"] != "Bearer" || m["access_token"] == "" || m["expires_in"] != float64(3600) {
		t.Errorf("token response %s", r.body)
	}
	return m
}

func expectInvalidClient(t *testing.T, r response) {
	t.Helper()
	if r.status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401 invalid_client; %s", r.status, r.body)
	}
	var m map[string]string
	if err := json.Unmarshal(r.body, &m); err != nil || m["error"] != "invalid_client" {
		t.Fatalf("body %s, want error invalid_client", r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q on an error, want no-store", cc)
	}
}

func clientCredentials(scope string) url.Values {
	v := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		v.Set("scope", scope)
	}
	return v
}

// TestClientCredentialsSecret: client_secret_basic and client_secret_post
// get a token (no-store) that works at the FHIR API within the client's
// scopes; a wrong secret, an unknown client or two methods at once get
// 401 invalid_client.
func TestClientCredentialsSecret(t *testing.T) {
	h := newAuthHarness(t, nil)
	cl, secret, err := h.svc.Clients.Add(t.Context(), "rig-7", "system/Patient.rs system/Observation.rs", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("basic", func(t *testing.T) {
		m := tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("")))
		tok := m["access_token"].(string)
		if r := h.do(http.MethodGet, "/fhir/Patient", tok, nil); r.status != http.StatusOK {
			t.Fatalf("client token read: %d %s", r.status, r.body)
		}
		if r := h.do(http.MethodPost, "/fhir/Patient", tok, fixture(t, "patient.json")); r.status != http.StatusForbidden {
			t.Fatalf("client token write beyond its scopes: %d %s", r.status, r.body)
		}
	})
	t.Run("post", func(t *testing.T) {
		v := clientCredentials("system/Patient.rs")
		v.Set("client_id", cl.ID)
		v.Set("client_secret", secret)
		m := tokenResponse(t, h.form("/auth/token", "", "", v))
		if m["scope"] != "system/Patient.rs" {
			t.Errorf("narrowed scope %v, want system/Patient.rs", m["scope"])
		}
		tok := m["access_token"].(string)
		if r := h.do(http.MethodGet, "/fhir/Observation", tok, nil); r.status != http.StatusForbidden {
			t.Errorf("narrowed token reads Observation: %d", r.status)
		}
	})
	t.Run("more than allowed is narrowed", func(t *testing.T) {
		m := tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("system/*.cruds")))
		tok := m["access_token"].(string)
		if r := h.do(http.MethodGet, "/fhir/Claim", tok, nil); r.status != http.StatusForbidden {
			t.Errorf("a client got more than it is allowed: %d (scope %v)", r.status, m["scope"])
		}
	})
	t.Run("refusals", func(t *testing.T) {
		expectInvalidClient(t, h.form("/auth/token", "", cl.ID+":wrong", clientCredentials("")))
		expectInvalidClient(t, h.form("/auth/token", "", "kc-nobody:"+secret, clientCredentials("")))
		v := clientCredentials("")
		v.Set("client_id", cl.ID)
		v.Set("client_secret", secret)
		expectInvalidClient(t, h.form("/auth/token", "", cl.ID+":"+secret, v)) // two methods
		expectInvalidClient(t, h.form("/auth/token", "", "", clientCredentials("")))
	})
}

// TestClientSecretRotationOverlap: after a rotation both secrets work;
// the old one until the overlap (7 days) ends, then 401 invalid_client.
func TestClientSecretRotationOverlap(t *testing.T) {
	h := newAuthHarness(t, nil)
	cl, old, err := h.svc.Clients.Add(t.Context(), "rig-8", "system/Patient.rs", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(30 * 24 * time.Hour)
	fresh, err := h.svc.Clients.Rotate(t.Context(), cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+old, clientCredentials("")))
	tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+fresh, clientCredentials("")))
	h.clock.Advance(auth.DefaultOverlap - time.Minute)
	tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+old, clientCredentials("")))
	h.clock.Advance(2 * time.Minute)
	expectInvalidClient(t, h.form("/auth/token", "", cl.ID+":"+old, clientCredentials("")))
	m := tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+fresh, clientCredentials("")))
	// The new secret's token works at the API, 37 days after the start.
	if r := h.do(http.MethodGet, "/fhir/Patient", m["access_token"].(string), nil); r.status != http.StatusOK {
		t.Fatalf("token of the rotated secret: %d %s", r.status, r.body)
	}
}

// TestClientSecretExpiry: a secret works until its 90-day lifetime ends,
// then 401 invalid_client; a rotation issues a working one again.
func TestClientSecretExpiry(t *testing.T) {
	h := newAuthHarness(t, nil)
	cl, secret, err := h.svc.Clients.Add(t.Context(), "rig-9", "system/Patient.rs", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(auth.DefaultSecretLifetime - time.Minute)
	tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("")))
	h.clock.Advance(2 * time.Minute)
	expectInvalidClient(t, h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("")))
	v := clientCredentials("")
	v.Set("client_id", cl.ID)
	v.Set("client_secret", secret)
	expectInvalidClient(t, h.form("/auth/token", "", "", v))
	// A rotation after expiry does not resurrect the expired secret.
	fresh, err := h.svc.Clients.Rotate(t.Context(), cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	expectInvalidClient(t, h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("")))
	tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+fresh, clientCredentials("")))
}

// TestClientPrivateKeyJWT: SMART Backend Services private_key_jwt with a
// client registered with an EC JWKS gets a token; replaying the same
// assertion (same jti), a wrong audience, a too-long lifetime or an
// unregistered key get 401 invalid_client.
func TestClientPrivateKeyJWT(t *testing.T) {
	h := newAuthHarness(t, nil)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "node-1", Algorithm: "ES256", Use: "sig"}}})
	cl, _, err := h.svc.Clients.Add(t.Context(), "node", "system/Observation.rs", jwks)
	if err != nil {
		t.Fatal(err)
	}
	assertion := func(signKey any, mod func(c map[string]any)) string {
		now := h.clock.Now()
		c := map[string]any{"iss": cl.ID, "sub": cl.ID, "aud": h.base + "/auth/token", "exp": now.Add(4 * time.Minute).Unix(),
			"iat": now.Unix(), "jti": randHex(t, 12)}
		if mod != nil {
			mod(c)
		}
		return sign(t, signKey, jose.ES256, "node-1", "JWT", c)
	}
	post := func(a string, withID bool) response {
		v := clientCredentials("")
		v.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		v.Set("client_assertion", a)
		if withID {
			v.Set("client_id", cl.ID)
		}
		return h.form("/auth/token", "", "", v)
	}
	a := assertion(key, nil)
	m := tokenResponse(t, post(a, true))
	if r := h.do(http.MethodGet, "/fhir/Observation", m["access_token"].(string), nil); r.status != http.StatusOK {
		t.Fatalf("private_key_jwt token read: %d %s", r.status, r.body)
	}
	expectInvalidClient(t, post(a, true))  // replay
	expectInvalidClient(t, post(a, false)) // replay without client_id
	tokenResponse(t, post(assertion(key, nil), false))

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	expectInvalidClient(t, post(assertion(other, nil), true))
	expectInvalidClient(t, post(assertion(key, func(c map[string]any) { c["aud"] = "https://evil.example/token" }), true))
	expectInvalidClient(t, post(assertion(key, func(c map[string]any) { c["exp"] = h.clock.Now().Add(time.Hour).Unix() }), true))
	expectInvalidClient(t, post(assertion(key, func(c map[string]any) { delete(c, "jti") }), true))
	expectInvalidClient(t, post(assertion(key, func(c map[string]any) { c["sub"] = "kc-someone-else" }), true))
	expectInvalidClient(t, post(handMade(t, map[string]any{"alg": "none", "kid": "node-1"}, map[string]any{
		"iss": cl.ID, "sub": cl.ID, "aud": h.base + "/auth/token", "exp": h.clock.Now().Add(time.Minute).Unix(), "jti": "x"}, nil), true))
	// Expired assertion.
	stale := assertion(key, nil)
	h.clock.Advance(5 * time.Minute)
	expectInvalidClient(t, post(stale, true))
	// The registered keys expire like secrets.
	h.clock.Advance(auth.DefaultSecretLifetime)
	expectInvalidClient(t, post(assertion(key, nil), true))

	// Rotation: a new key set registered for the client works for another
	// lifetime; the old key, no longer listed, does not.
	next, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks2, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: next.Public(), KeyID: "node-1", Algorithm: "ES256", Use: "sig"}}})
	if err := h.svc.Clients.SetKeys(t.Context(), cl.ID, jwks2); err != nil {
		t.Fatal(err)
	}
	tokenResponse(t, post(assertion(next, nil), true))
	expectInvalidClient(t, post(assertion(key, nil), true))
	if err := h.svc.Clients.SetKeys(t.Context(), cl.ID, []byte(`{"keys":[]}`)); err == nil {
		t.Error("an empty key set was registered")
	}
}

// TestClientRefreshTokenRotation: a refresh token is single-use; using a
// used one again revokes its family, so the newer refresh token fails too.
func TestClientRefreshTokenRotation(t *testing.T) {
	h := newAuthHarness(t, nil)
	h.addUser("doc@example.org", auth.RoleProvider, "patients:read", "refresh me please")
	r := h.login("doc@example.org", "refresh me please")
	if r.status != http.StatusOK {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	r1, _ := r.json(t)["refresh_token"].(string)
	if r1 == "" {
		t.Fatalf("no refresh token in %s", r.body)
	}
	refresh := func(tok string) response {
		return h.form("/auth/token", "", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}})
	}
	m := tokenResponse(t, refresh(r1))
	r2, _ := m["refresh_token"].(string)
	if r2 == "" || r2 == r1 {
		t.Fatalf("refresh did not rotate: %s", m)
	}
	if r := h.do(http.MethodGet, "/fhir/Patient", m["access_token"].(string), nil); r.status != http.StatusOK {
		t.Fatalf("refreshed access token: %d %s", r.status, r.body)
	}
	for i, tok := range []string{r1, r2, r1, "unknown"} {
		r := refresh(tok)
		if r.status != http.StatusBadRequest || !bytes.Contains(r.body, []byte(`"invalid_grant"`)) {
			t.Errorf("refresh #%d after reuse: %d %s, want 400 invalid_grant", i, r.status, r.body)
		}
	}
}

// --- login --------------------------------------------------------------

// TestLoginEnumeration: an unknown email, a wrong password and a disabled
// account get the same status and byte-identical bodies; a malformed body
// is a 400; the right password gets the five fields of the contract.
func TestLoginEnumeration(t *testing.T) {
	h := newAuthHarness(t, nil)
	h.addUser("known@example.org", auth.RoleProvider, "patients:read patients:write", "the right password")
	h.addUser("gone@example.org", auth.RoleProvider, "patients:read", "the right password")
	if err := h.svc.Users.SetDisabled(t.Context(), "gone@example.org", true); err != nil {
		t.Fatal(err)
	}
	unknown := h.login("nobody@example.org", "the right password")
	wrong := h.login("known@example.org", "a wrong password")
	disabled := h.login("gone@example.org", "the right password")
	for name, r := range map[string]response{"unknown email": unknown, "wrong password": wrong, "disabled account": disabled} {
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401; %s", name, r.status, r.body)
		}
		if !bytes.Equal(r.body, unknown.body) {
			t.Errorf("%s body %q differs from the unknown email's %q", name, r.body, unknown.body)
		}
		if r.header.Get("Content-Type") != unknown.header.Get("Content-Type") {
			t.Errorf("%s Content-Type %q differs", name, r.header.Get("Content-Type"))
		}
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Errorf("%s: the 401 body is not JSON: %s", name, r.body)
		}
	}

	for _, body := range []string{
		``, `not json`, `[]`, `{"email":1,"password":"x"}`, `{"email":"known@example.org"}`,
		`{"email":"known@example.org","password":""}`, `{"email":"known@example.org","password":"x","admin":true}`,
		`{"email":"known@example.org","password":"x"} {}`, `{"email":"known@example.org","password":"x"`,
	} {
		r := h.do(http.MethodPost, "/auth/login", "", []byte(body), "Content-Type", "application/json")
		if r.status != http.StatusBadRequest {
			t.Errorf("malformed body %.40q: %d, want 400; %s", body, r.status, r.body)
		}
	}
	// Too large, or not JSON at all: the statuses every platform endpoint uses.
	if r := h.do(http.MethodPost, "/auth/login", "", []byte(`{"email":"`+strings.Repeat("a", 9000)+`","password":"x"}`), "Content-Type", "application/json"); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized login body: %d, want 413; %s", r.status, r.body)
	}
	if r := h.do(http.MethodPost, "/auth/login", "", []byte(`email=a&password=b`), "Content-Type", "application/x-www-form-urlencoded"); r.status != http.StatusUnsupportedMediaType {
		t.Errorf("a form-encoded login body: %d, want 415; %s", r.status, r.body)
	}

	r := h.login("known@example.org", "the right password")
	m := tokenResponse(t, r)
	for _, k := range []string{"access_token", "expires_in", "token_type", "user_role", "scope"} {
		if _, ok := m[k]; !ok {
			t.Errorf("login response lacks %s: %s", k, r.body)
		}
	}
	if m["user_role"] != "provider" || m["scope"] != "patients:read patients:write" {
		t.Errorf("login response %s", r.body)
	}
	// Email addresses are matched case-insensitively: same account.
	if r := h.login("KNOWN@example.org", "the right password"); r.status != http.StatusOK {
		t.Errorf("login with an upper-case email: %d %s", r.status, r.body)
	}
}

func retryAfter(t *testing.T, r response) time.Duration {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429; %s", r.status, r.body)
	}
	s, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || s < 1 {
		t.Fatalf("Retry-After %q, want whole seconds ≥ 1", r.header.Get("Retry-After"))
	}
	return time.Duration(s) * time.Second
}

// TestLoginThrottlingBackoff: after three failed logins of one account
// further attempts (even with the right password) get 429 with
// Retry-After; the delay doubles and is capped at 15 minutes, and once it
// has passed the right password logs in: no permanent lock-out. Another
// account is not slowed down.
func TestLoginThrottlingBackoff(t *testing.T) {
	h := newAuthHarness(t, nil)
	h.addUser("victim@example.org", auth.RoleProvider, "patients:read", "the right password")
	h.addUser("bystander@example.org", auth.RoleProvider, "patients:read", "the right password")
	for i := range 3 {
		if r := h.login("victim@example.org", "guess"); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i+1, r.status, r.body)
		}
	}
	wait := retryAfter(t, h.login("victim@example.org", "the right password"))
	if wait != time.Second {
		t.Errorf("first back-off %s, want 1s", wait)
	}
	if r := h.login("bystander@example.org", "the right password"); r.status != http.StatusOK {
		t.Errorf("another account is throttled: %d %s", r.status, r.body)
	}
	prev := time.Duration(0)
	for i := range 14 {
		h.clock.Advance(wait)
		if r := h.login("victim@example.org", "guess"); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d after waiting %s: %d %s", i, wait, r.status, r.body)
		}
		wait = retryAfter(t, h.login("victim@example.org", "the right password"))
		if wait < prev || wait > 15*time.Minute {
			t.Fatalf("back-off %s after %s: want non-decreasing and at most 15 min", wait, prev)
		}
		prev = wait
	}
	if wait != 15*time.Minute {
		t.Errorf("back-off after many failures %s, want the 15 min cap", wait)
	}
	h.clock.Advance(wait - 2*time.Second)
	retryAfter(t, h.login("victim@example.org", "the right password"))
	h.clock.Advance(2 * time.Second)
	if r := h.login("victim@example.org", "the right password"); r.status != http.StatusOK {
		t.Fatalf("the right password after the back-off: %d %s", r.status, r.body)
	}
	// A success resets the count.
	if r := h.login("victim@example.org", "guess"); r.status != http.StatusUnauthorized {
		t.Fatalf("a failure after the success: %d %s", r.status, r.body)
	}
	if r := h.login("victim@example.org", "the right password"); r.status != http.StatusOK {
		t.Fatalf("one failure after a reset is throttled: %d %s", r.status, r.body)
	}
}

// TestThrottlingAuthRateLimit: the per-IP token bucket of /auth endpoints
// (burst 30, 2 per second) answers 429 with Retry-After after a burst,
// on /auth/login and /auth/token alike, and lets requests through again
// once the bucket refilled.
func TestThrottlingAuthRateLimit(t *testing.T) {
	h := newAuthHarness(t, nil)
	bad := url.Values{"grant_type": {"password"}}
	limited := -1
	for i := range 40 {
		var r response
		if i%2 == 0 {
			r = h.form("/auth/token", "", "", bad)
		} else {
			r = h.do(http.MethodPost, "/auth/login", "", []byte(`{}`), "Content-Type", "application/json")
		}
		if r.status == http.StatusTooManyRequests {
			limited = i
			break
		}
	}
	if limited != 30 {
		t.Fatalf("the first 429 came at request %d, want 30 (burst 30)", limited)
	}
	// Each endpoint answers in its own error shape: OAuth clients read the
	// RFC 6749 body, the platform's the JSON error body.
	r := h.form("/auth/token", "", "", bad)
	wait := retryAfter(t, r)
	if !strings.Contains(string(r.body), `"error":"temporarily_unavailable"`) {
		t.Errorf("/auth/token 429 body: %s", r.body)
	}
	r = h.do(http.MethodPost, "/auth/login", "", []byte(`{}`), "Content-Type", "application/json")
	if retryAfter(t, r); !strings.Contains(string(r.body), `"error":{"code":"too_many_requests"`) {
		t.Errorf("/auth/login 429 body: %s", r.body)
	}
	for _, path := range []string{"/auth/revoke", "/auth/introspect"} {
		r = h.form(path, "", "", url.Values{"token": {"x"}})
		if retryAfter(t, r); !strings.Contains(string(r.body), `"error":"temporarily_unavailable"`) {
			t.Errorf("%s 429 body: %s", path, r.body)
		}
	}
	// FHIR reads are not behind the /auth limit.
	if r := h.do(http.MethodGet, "/fhir/metadata", "", nil); r.status != http.StatusOK {
		t.Errorf("/fhir/metadata during the /auth limit: %d", r.status)
	}
	h.clock.Advance(wait)
	if r := h.form("/auth/token", "", "", bad); r.status != http.StatusBadRequest {
		t.Fatalf("after Retry-After: %d %s, want the endpoint's own 400", r.status, r.body)
	}
}

// TestScopeConditionalNeedsSearch: conditional interactions run a search,
// so a create-only grant may create but not create conditionally, and
// criteria that chain into an ungranted type are refused.
func TestScopeConditionalNeedsSearch(t *testing.T) {
	h := newAuthHarness(t, newFakeClock().Now)
	body := []byte(`{"resourceType":"Patient","identifier":[{"system":"urn:kiln:test","value":"cond-1"}]}`)
	createOnly := h.issue(auth.RoleProvider, "user/Patient.c")
	if r := h.do("POST", "/fhir/Patient", createOnly, body); r.status != http.StatusCreated {
		t.Fatalf("plain create with user/Patient.c: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/fhir/Patient", createOnly, body, "If-None-Exist", "identifier=urn:kiln:test|cond-1"); r.status != http.StatusForbidden {
		t.Errorf("conditional create with user/Patient.c: %d, want 403; %s", r.status, r.body)
	}
	createSearch := h.issue(auth.RoleProvider, "user/Patient.cs")
	if r := h.do("POST", "/fhir/Patient", createSearch, body, "If-None-Exist", "identifier=urn:kiln:test|cond-1"); r.status != http.StatusOK {
		t.Errorf("conditional create with user/Patient.cs (one match): %d, want 200; %s", r.status, r.body)
	}
	if r := h.do("POST", "/fhir/Patient", createSearch, body, "If-None-Exist", "organization.name=acme"); r.status != http.StatusForbidden {
		t.Errorf("conditional create whose criteria chain into Organization: %d, want 403; %s", r.status, r.body)
	}
}
