package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/internal/gztest"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// OAuth 2.0 client authentication at the token, revocation and
// introspection endpoints, as RFC 6749, 7009, 7523 and 7662 say, checked
// with golang.org/x/oauth2 and with hand-built requests.

// unthrottled gives the harness a /auth rate limit whose clock moves a
// second at every look, so that a test may send more /auth requests than
// one burst (the limit itself is TestThrottlingAuthRateLimit's).
func unthrottled(h *authHarness) {
	var mu sync.Mutex
	at := time.Now()
	h.svc.Throttle = auth.NewThrottle(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(time.Second)
		return at
	})
}

// auditLog collects the issuer's audit events.
type auditLog struct {
	mu     sync.Mutex
	events []auth.Event
}

func collectAudit(h *authHarness) *auditLog {
	l := &auditLog{}
	h.svc.Audit = func(_ context.Context, e auth.Event) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.events = append(l.events, e)
	}
	return l
}

// take returns the events recorded since the last take.
func (l *auditLog) take() []auth.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// expectNoSecrets fails if any event holds one of the secrets.
func expectNoSecrets(t *testing.T, events []auth.Event, secrets ...string) {
	t.Helper()
	for _, e := range events {
		all := e.Action + "\x00" + e.Subject + "\x00" + e.IP + "\x00" + e.Reason
		for _, s := range secrets {
			if s != "" && strings.Contains(all, s) {
				t.Errorf("audit event %+v holds a token or secret", e)
			}
		}
	}
}

// plantClient registers a client with a chosen id and secret through the
// records store, in the record format of auth's clients.go (only the
// secret's SHA-256 is kept): the server generates neither such an id nor
// such a secret, so there is no production path to one.
func plantClient(t *testing.T, h *authHarness, id, secret, scopes string) {
	t.Helper()
	sum := sha256.Sum256([]byte(secret))
	now := h.now().UTC()
	v, err := json.Marshal(auth.Client{ID: id, Name: "planted", Scopes: scopes, Created: now,
		Secrets: []auth.Secret{{Hash: hex.EncodeToString(sum[:]), Created: now, Expires: now.Add(auth.DefaultSecretLifetime)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.records.PutRecord(t.Context(), store.Record{Kind: "client", ID: id, Version: 1, Value: v}); err != nil {
		t.Fatal(err)
	}
}

// oauth2Context makes golang.org/x/oauth2 use the harness's TLS client.
func oauth2Context(h *authHarness) context.Context {
	return context.WithValue(h.t.Context(), oauth2.HTTPClient, h.srv.Client())
}

// TestClientSecretBasicFormEncoded: RFC 6749 §2.3.1 form-urlencodes the
// client id and secret before Base64. A client whose id and secret hold
// '-', '%', '+', ':', '/' and a space gets a token from
// golang.org/x/oauth2 in both auth styles; the raw, unencoded pair is
// refused (the server decodes), and a malformed escape is 401
// invalid_client, not 500.
func TestClientSecretBasicFormEncoded(t *testing.T) {
	h := newAuthHarness(t, nil)
	const id, secret = "kc-rig+7%2:a b", "s3-cr%et+pl/us:=& x"
	plantClient(t, h, id, secret, "system/Patient.rs")
	generated, generatedSecret, err := h.svc.Clients.Add(t.Context(), "rig-gen", "system/Patient.rs", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, id, secret string
	}{
		{"special characters", id, secret},
		{"a generated client", generated.ID, generatedSecret},
	} {
		for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
			t.Run(c.name+map[oauth2.AuthStyle]string{oauth2.AuthStyleInHeader: " in header", oauth2.AuthStyleInParams: " in params"}[style], func(t *testing.T) {
				cfg := clientcredentials.Config{ClientID: c.id, ClientSecret: c.secret, TokenURL: h.base + "/auth/token",
					Scopes: []string{"system/Patient.rs"}, AuthStyle: style}
				tok, err := cfg.Token(oauth2Context(h))
				if err != nil {
					t.Fatalf("token: %v", err)
				}
				if r := h.do(http.MethodGet, "/fhir/Patient", tok.AccessToken, nil); r.status != http.StatusOK {
					t.Fatalf("the token at the FHIR API: %d %s", r.status, r.body)
				}
				cfg.ClientSecret += "x"
				_, err = cfg.Token(oauth2Context(h))
				var re *oauth2.RetrieveError
				if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
					t.Fatalf("a wrong secret: %v, want 401 invalid_client", err)
				}
			})
		}
	}
	t.Run("unencoded or malformed", func(t *testing.T) {
		expectInvalidClient(t, h.form("/auth/token", "", id+":"+secret, clientCredentials("")))
		for _, pair := range []string{"kc-x%zz:secret", id + ":bad%2", "%:%"} {
			r := h.form("/auth/token", "", pair, clientCredentials(""))
			expectInvalidClient(t, r)
			if wa := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(wa, "Basic ") {
				t.Errorf("%q: WWW-Authenticate %q, want a Basic challenge", pair, wa)
			}
		}
	})
}

// assertionFor signs a private_key_jwt assertion of client id with key
// (kid "node-1"), with the claims a SMART backend service sends; mod
// changes them.
func assertionFor(t *testing.T, h *authHarness, key *ecdsa.PrivateKey, id string, mod func(c map[string]any)) string {
	t.Helper()
	now := h.now()
	c := map[string]any{"iss": id, "sub": id, "aud": h.base + "/auth/token", "exp": now.Add(4 * time.Minute).Unix(),
		"iat": now.Unix(), "jti": randHex(t, 12)}
	if mod != nil {
		mod(c)
	}
	return sign(t, key, jose.ES256, "node-1", "JWT", c)
}

func withAssertion(v url.Values, a string) url.Values {
	v.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
	v.Set("client_assertion", a)
	return v
}

// jwtClient registers a private_key_jwt client with a fresh EC key.
func jwtClient(t *testing.T, h *authHarness, name, scopes string) (*auth.Client, string, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "node-1", Algorithm: "ES256", Use: "sig"}}})
	cl, secret, err := h.svc.Clients.Add(t.Context(), name, scopes, jwks)
	if err != nil {
		t.Fatal(err)
	}
	return cl, secret, key
}

// TestClientAssertionAudience: RFC 7523 §3 and SMART Backend Services
// let a client assertion's aud be the issuer identifier as well as the
// token endpoint (openid-client sends the issuer); any other aud is
// still 401 invalid_client, and so is the URL of another endpoint of the
// server at the token endpoint.
func TestClientAssertionAudience(t *testing.T) {
	h := newAuthHarness(t, nil)
	unthrottled(h)
	cl, _, key := jwtClient(t, h, "node", "system/Observation.rs")
	cases := []struct {
		name string
		aud  any
		ok   bool
	}{
		{"the token endpoint", h.base + "/auth/token", true},
		{"the issuer", h.base, true},
		{"the issuer in an array", []string{h.base}, true},
		{"the token endpoint in an array", []string{h.base + "/auth/token"}, true},
		{"another audience and the issuer", []string{"https://other.example", h.base}, true},
		{"another server", "https://evil.example/auth/token", false},
		{"another server's issuer", []string{"https://evil.example"}, false},
		{"the issuer with a trailing slash", h.base + "/", false},
		{"the FHIR base", h.base + "/fhir", false},
		{"the introspection endpoint", h.base + "/auth/introspect", false},
		{"an empty array", []string{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := assertionFor(t, h, key, cl.ID, func(m map[string]any) { m["aud"] = c.aud })
			r := h.form("/auth/token", "", "", withAssertion(clientCredentials(""), a))
			if !c.ok {
				expectInvalidClient(t, r)
				if wa := r.header.Get("WWW-Authenticate"); wa != "" {
					t.Errorf("private_key_jwt refused with WWW-Authenticate %q, want none", wa)
				}
				return
			}
			m := tokenResponse(t, r)
			if r := h.do(http.MethodGet, "/fhir/Observation", m["access_token"].(string), nil); r.status != http.StatusOK {
				t.Fatalf("the token at the FHIR API: %d %s", r.status, r.body)
			}
			// The other checks still hold with this aud: the same jti
			// again, or another subject, are refused.
			expectInvalidClient(t, h.form("/auth/token", "", "", withAssertion(clientCredentials(""), a)))
			other := assertionFor(t, h, key, cl.ID, func(m map[string]any) { m["aud"] = c.aud; m["sub"] = "kc-someone-else" })
			expectInvalidClient(t, h.form("/auth/token", "", "", withAssertion(clientCredentials(""), other)))
			long := assertionFor(t, h, key, cl.ID, func(m map[string]any) { m["aud"] = c.aud; m["exp"] = h.now().Add(time.Hour).Unix() })
			expectInvalidClient(t, h.form("/auth/token", "", "", withAssertion(clientCredentials(""), long)))
		})
	}
	// At the introspection endpoint the assertion may name that endpoint.
	tok := tokenResponse(t, h.form("/auth/token", "", "", withAssertion(clientCredentials(""), assertionFor(t, h, key, cl.ID, nil))))["access_token"].(string)
	a := assertionFor(t, h, key, cl.ID, func(m map[string]any) { m["aud"] = h.base + "/auth/introspect" })
	r := h.form("/auth/introspect", "", "", withAssertion(url.Values{"token": {tok}}, a))
	if r.status != http.StatusOK || r.json(t)["active"] != true {
		t.Fatalf("introspection with aud = the introspection endpoint: %d %s", r.status, r.body)
	}
}

// TestInvalidClientChallenge: RFC 6749 §5.2. A failed client
// authentication at the token, revocation and introspection endpoints is
// 401 with the JSON error body; WWW-Authenticate: Basic comes only when
// the client used the Basic scheme, and a client authenticating in the
// body gets no challenge (openid-client reported the challenge, not the
// body).
func TestInvalidClientChallenge(t *testing.T) {
	h := newAuthHarness(t, nil)
	unthrottled(h)
	cl, secret, key := jwtClient(t, h, "node", "system/Patient.rs")
	tok := tokenResponse(t, h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("")))["access_token"].(string)
	for _, path := range []string{"/auth/token", "/auth/revoke", "/auth/introspect"} {
		base := func() url.Values {
			if path == "/auth/token" {
				return clientCredentials("")
			}
			return url.Values{"token": {tok}}
		}
		post := func(id, sec string) url.Values {
			v := base()
			v.Set("client_id", id)
			v.Set("client_secret", sec)
			return v
		}
		cases := []struct {
			name      string
			basic     string
			form      url.Values
			challenge bool
		}{
			{"basic, wrong secret", cl.ID + ":wrong", base(), true},
			{"basic, unknown client", "kc-nobody:" + secret, base(), true},
			{"basic, malformed escape", cl.ID + ":%g0", base(), true},
			{"post, wrong secret", "", post(cl.ID, "wrong"), false},
			{"post, unknown client", "", post("kc-nobody", secret), false},
			{"private_key_jwt, wrong audience", "", withAssertion(base(), assertionFor(t, h, key, cl.ID, func(m map[string]any) { m["aud"] = "https://evil.example" })), false},
			{"private_key_jwt, wrong assertion type", "", func() url.Values {
				v := withAssertion(base(), assertionFor(t, h, key, cl.ID, nil))
				v.Set("client_assertion_type", "urn:other")
				return v
			}(), false},
		}
		for _, c := range cases {
			t.Run(path+" "+c.name, func(t *testing.T) {
				r := h.form(path, "", c.basic, c.form)
				expectInvalidClient(t, r)
				wa := r.header.Get("WWW-Authenticate")
				if c.challenge && wa != `Basic realm="kiln"` {
					t.Errorf("WWW-Authenticate %q, want Basic realm=\"kiln\"", wa)
				}
				if !c.challenge && wa != "" {
					t.Errorf("WWW-Authenticate %q, want none when Basic was not used", wa)
				}
				var m map[string]string
				if err := json.Unmarshal(r.body, &m); err != nil || m["error_description"] == "" {
					t.Errorf("body %s, want the RFC 6749 error body with a description", r.body)
				}
			})
		}
	}
	// The token was neither revoked nor disclosed by the refused requests.
	if r := h.do(http.MethodGet, "/fhir/Patient", tok, nil); r.status != http.StatusOK {
		t.Fatalf("the token after refused revocations: %d %s", r.status, r.body)
	}
	// A client with no authentication at all at the token endpoint: 401
	// invalid_client, no challenge for a scheme it did not use.
	r := h.form("/auth/token", "", "", url.Values{"grant_type": {"client_credentials"}, "client_id": {cl.ID}})
	expectInvalidClient(t, r)
	if wa := r.header.Get("WWW-Authenticate"); wa != "" {
		t.Errorf("WWW-Authenticate %q without client authentication, want none", wa)
	}
}

// TestClientCredentialsInvalidScope: asking for scopes the client holds
// none of is 400 invalid_scope, through golang.org/x/oauth2 too; asking
// for some it holds and some it does not gets a token for those it holds
// (RFC 6749 §3.3), and its scope says so.
func TestClientCredentialsInvalidScope(t *testing.T) {
	h := newAuthHarness(t, nil)
	unthrottled(h)
	cl, secret, err := h.svc.Clients.Add(t.Context(), "rig", "system/Patient.rs", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ask, want string // want "" is invalid_scope
	}{
		{"patients:read", ""},
		{"system/Observation.rs", ""},
		{"system/Patient.c", ""},
		{"openid", ""},
		{"no-such-scope", ""},
		{"system/Patient.rs no-such-scope", ""},
		{"system/Patient.rs", "system/Patient.rs"},
		{"system/Patient.r", "system/Patient.r"},
		{"system/*.rs", "system/Patient.rs"},
		{"system/Patient.rs patients:read openid", "system/Patient.rs"},
	} {
		t.Run(c.ask, func(t *testing.T) {
			r := h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials(c.ask))
			if c.want == "" {
				if r.status != http.StatusBadRequest || r.json(t)["error"] != "invalid_scope" {
					t.Fatalf("%d %s, want 400 invalid_scope", r.status, r.body)
				}
				return
			}
			if m := tokenResponse(t, r); m["scope"] != c.want {
				t.Fatalf("scope %v, want %q", m["scope"], c.want)
			}
		})
	}
	t.Run("golang.org/x/oauth2", func(t *testing.T) {
		for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
			cfg := clientcredentials.Config{ClientID: cl.ID, ClientSecret: secret, TokenURL: h.base + "/auth/token",
				Scopes: []string{"patients:write"}, AuthStyle: style}
			_, err := cfg.Token(oauth2Context(h))
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "invalid_scope" || re.Response.StatusCode != http.StatusBadRequest {
				t.Errorf("style %d: %v, want 400 invalid_scope", style, err)
			}
		}
	})
}

// introspectionFixture is a server with clients and users whose tokens
// the introspection and revocation tests use.
type introspectionFixture struct {
	h                 *authHarness
	holder, other, rs *auth.Client
	holderSecret      string
	otherSecret       string
	rsSecret          string
	holderKey         *ecdsa.PrivateKey
}

func newIntrospectionFixture(t *testing.T) *introspectionFixture {
	h := newAuthHarness(t, nil)
	unthrottled(h)
	f := &introspectionFixture{h: h}
	f.holder, f.holderSecret, f.holderKey = jwtClient(t, h, "holder", "system/Patient.rs")
	var err error
	if f.other, f.otherSecret, err = h.svc.Clients.Add(t.Context(), "other", "system/Patient.rs", nil); err != nil {
		t.Fatal(err)
	}
	if f.rs, f.rsSecret, err = h.svc.Clients.Register(t.Context(), auth.Registration{Name: "gateway", Scopes: "system/Patient.rs", Introspect: true}); err != nil {
		t.Fatal(err)
	}
	h.addUser("ada@example.org", auth.RoleProvider, "patients:read", "the first user's long password")
	h.addUser("bob@example.org", auth.RoleProvider, "patients:read", "the second user's long password")
	return f
}

// clientToken gets a token of a client by client_secret_basic.
func (f *introspectionFixture) clientToken(cl *auth.Client, secret string) string {
	f.h.t.Helper()
	return tokenResponse(f.h.t, f.h.form("/auth/token", "", cl.ID+":"+secret, clientCredentials("")))["access_token"].(string)
}

// userLogin logs a user in: access and refresh token.
func (f *introspectionFixture) userLogin(email, password string) (string, string) {
	f.h.t.Helper()
	m := tokenResponse(f.h.t, f.h.login(email, password))
	return m["access_token"].(string), m["refresh_token"].(string)
}

func (f *introspectionFixture) ada() (string, string) {
	return f.userLogin("ada@example.org", "the first user's long password")
}
func (f *introspectionFixture) bob() (string, string) {
	return f.userLogin("bob@example.org", "the second user's long password")
}

// caller is how a test authenticates at /auth/revoke or /auth/introspect.
type caller struct {
	name   string
	bearer func() string      // a bearer token
	basic  string             // id:secret for client_secret_basic
	form   func(v url.Values) // client_secret_post or private_key_jwt
	none   bool               // no authentication
}

func (f *introspectionFixture) post(path string, c caller, token string) response {
	f.h.t.Helper()
	v := url.Values{"token": {token}}
	if c.form != nil {
		c.form(v)
	}
	bearer := ""
	if c.bearer != nil {
		bearer = c.bearer()
	}
	return f.h.form(path, bearer, c.basic, v)
}

func (f *introspectionFixture) callers() map[string]caller {
	h := f.h
	return map[string]caller{
		"none":         {none: true},
		"holder basic": {basic: f.holder.ID + ":" + f.holderSecret},
		"holder post": {form: func(v url.Values) {
			v.Set("client_id", f.holder.ID)
			v.Set("client_secret", f.holderSecret)
		}},
		"holder private_key_jwt": {form: func(v url.Values) {
			withAssertion(v, assertionFor(h.t, h, f.holderKey, f.holder.ID, func(m map[string]any) { m["aud"] = h.base }))
		}},
		"holder bearer":          {bearer: func() string { return f.clientToken(f.holder, f.holderSecret) }},
		"other basic":            {basic: f.other.ID + ":" + f.otherSecret},
		"other bearer":           {bearer: func() string { return f.clientToken(f.other, f.otherSecret) }},
		"resource server basic":  {basic: f.rs.ID + ":" + f.rsSecret},
		"resource server bearer": {bearer: func() string { return f.clientToken(f.rs, f.rsSecret) }},
		"admin bearer":           {bearer: h.admin},
		"ada bearer":             {bearer: func() string { a, _ := f.ada(); return a }},
		"bob bearer":             {bearer: func() string { b, _ := f.bob(); return b }},
	}
}

// TestIntrospectionCallers: RFC 7662 with client authentication
// (client_secret_basic, client_secret_post, private_key_jwt) or a bearer
// token. The token's details go to the client it was issued to, a
// resource-server client (Registration.Introspect) and admin; any other
// authenticated caller gets {"active":false} and nothing of the token
// (§2.2); an unauthenticated one 401. The audit events name the caller
// and the outcome, never a token or secret.
func TestIntrospectionCallers(t *testing.T) {
	f := newIntrospectionFixture(t)
	h := f.h
	log := collectAudit(h)
	holderTok := f.clientToken(f.holder, f.holderSecret)
	adaTok, _ := f.ada()
	callers := f.callers()
	ada, err := h.svc.Users.Get(t.Context(), "ada@example.org")
	if err != nil {
		t.Fatal(err)
	}
	// Who sees the details of which token; every other authenticated
	// caller gets {"active":false}.
	sees := map[string][]string{
		"holder basic": {"client"}, "holder post": {"client"}, "holder private_key_jwt": {"client"}, "holder bearer": {"client"},
		"resource server basic": {"client", "user"}, "resource server bearer": {"client", "user"},
		"admin bearer": {"client", "user"},
	}
	targets := map[string]struct{ tok, sub string }{
		"client": {holderTok, "client/" + f.holder.ID},
		"user":   {adaTok, "user/" + ada.ID},
	}
	for name, c := range callers {
		for target, tt := range targets {
			t.Run(name+" on a "+target+" token", func(t *testing.T) {
				log.take()
				r := f.post("/auth/introspect", c, tt.tok)
				if c.none {
					expectInvalidClient(t, r)
					if wa := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(wa, "Bearer ") {
						t.Errorf("WWW-Authenticate %q, want a Bearer challenge", wa)
					}
					return
				}
				if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
					t.Fatalf("%d (Cache-Control %q) %s", r.status, r.header.Get("Cache-Control"), r.body)
				}
				m := r.json(t)
				if slices.Contains(sees[name], target) {
					if m["active"] != true || m["sub"] == nil || m["scope"] == nil || m["exp"] == nil {
						t.Fatalf("want the token's details: %s", r.body)
					}
					if m["sub"] != tt.sub {
						t.Errorf("sub %v, want %s", m["sub"], tt.sub)
					}
				} else if string(r.body) != `{"active":false}` {
					t.Fatalf("a caller not allowed to introspect got %s, want {\"active\":false}", r.body)
				}
				events := log.take()
				var ev *auth.Event
				for i := range events {
					if events[i].Action == "introspect" {
						ev = &events[i]
					}
				}
				if ev == nil || ev.Subject == "" || ev.IP == "" || ev.Success != slices.Contains(sees[name], target) {
					t.Errorf("audit events %+v, want an introspect event naming the caller and the outcome", events)
				}
				expectNoSecrets(t, events, holderTok, adaTok, f.holderSecret, f.otherSecret, f.rsSecret)
			})
		}
	}
	t.Run("refused authentication", func(t *testing.T) {
		expectInvalidToken(t, h.form("/auth/introspect", "not-a-token", "", url.Values{"token": {holderTok}}))
		r := h.form("/auth/introspect", "", f.holder.ID+":wrong", url.Values{"token": {holderTok}})
		expectInvalidClient(t, r)
		// Both at once is ambiguous.
		v := url.Values{"token": {holderTok}, "client_id": {f.holder.ID}, "client_secret": {f.holderSecret}}
		if r := h.form("/auth/introspect", holderTok, "", v); r.status != http.StatusBadRequest {
			t.Errorf("bearer and client credentials together: %d %s, want 400", r.status, r.body)
		}
	})
	t.Run("inactive tokens", func(t *testing.T) {
		for _, tok := range []string{"garbage", h.issue(auth.RoleProvider, "patients:read")[:40]} {
			r := h.form("/auth/introspect", "", f.rs.ID+":"+f.rsSecret, url.Values{"token": {tok}})
			if r.status != http.StatusOK || string(r.body) != `{"active":false}` {
				t.Errorf("an invalid token: %d %s", r.status, r.body)
			}
		}
	})
}

// TestRevocationCallers: RFC 7009 with an authenticated caller. A client
// token is revoked only by that client with its credentials, a user's
// access or refresh token only by a bearer token of the same user
// (including the token itself), any by admin; everyone else is refused
// (400 unauthorized_client, or 401 without authentication) and the token
// keeps working. An unknown token is 200.
func TestRevocationCallers(t *testing.T) {
	f := newIntrospectionFixture(t)
	h := f.h
	log := collectAudit(h)
	callers := f.callers()
	works := func(tok string) bool {
		r := h.do(http.MethodGet, "/fhir/Patient", tok, nil)
		if r.status != http.StatusOK && r.status != http.StatusUnauthorized {
			t.Fatalf("the FHIR API: %d %s", r.status, r.body)
		}
		return r.status == http.StatusOK
	}
	refreshWorks := func(tok string) bool {
		r := h.form("/auth/token", "", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}})
		return r.status == http.StatusOK
	}
	type target struct {
		kind string
		new  func() (tok string, works func() bool)
	}
	access := func(mint func() string) func() (string, func() bool) {
		return func() (string, func() bool) {
			tok := mint()
			return tok, func() bool { return works(tok) }
		}
	}
	targets := []target{
		{"client", access(func() string { return f.clientToken(f.holder, f.holderSecret) })},
		{"user", access(func() string { a, _ := f.ada(); return a })},
		{"refresh", func() (string, func() bool) {
			_, r := f.ada()
			return r, func() bool { return refreshWorks(r) }
		}},
	}
	// Who may revoke which kind of token.
	may := map[string][]string{
		"holder basic": {"client"}, "holder post": {"client"}, "holder private_key_jwt": {"client"},
		"ada bearer":   {"user", "refresh"},
		"admin bearer": {"client", "user", "refresh"},
	}
	for name, c := range callers {
		for _, tg := range targets {
			t.Run(name+" revokes a "+tg.kind+" token", func(t *testing.T) {
				tok, alive := tg.new()
				log.take()
				r := f.post("/auth/revoke", c, tok)
				allowed := slices.Contains(may[name], tg.kind)
				switch {
				case c.none:
					expectInvalidClient(t, r)
				case allowed && r.status != http.StatusOK:
					t.Fatalf("%d %s, want 200", r.status, r.body)
				case !allowed && (r.status != http.StatusBadRequest || r.json(t)["error"] != "unauthorized_client"):
					t.Fatalf("%d %s, want 400 unauthorized_client", r.status, r.body)
				}
				events := log.take()
				if alive() == allowed {
					t.Fatalf("after the revocation (allowed %v) the token still works: %v", allowed, !allowed)
				}
				var ev *auth.Event
				for i := range events {
					if events[i].Action == "revoke" {
						ev = &events[i]
					}
				}
				if ev == nil || ev.IP == "" || ev.Success != allowed || (!c.none && ev.Subject == "") {
					t.Errorf("audit events %+v, want a revoke event naming the caller and the outcome", events)
				}
				expectNoSecrets(t, events, tok, f.holderSecret, f.otherSecret, f.rsSecret)
			})
		}
	}
	t.Run("a user token revokes itself", func(t *testing.T) {
		tok, _ := f.bob()
		if r := h.form("/auth/revoke", tok, "", url.Values{"token": {tok}}); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		expectInvalidToken(t, h.do(http.MethodGet, "/fhir/Patient", tok, nil))
	})
	t.Run("unknown tokens", func(t *testing.T) {
		for _, tok := range []string{"garbage", strings.Repeat("a", 64)} {
			if r := h.form("/auth/revoke", "", f.holder.ID+":"+f.holderSecret, url.Values{"token": {tok}}); r.status != http.StatusOK {
				t.Errorf("revoking an unknown token: %d %s, want 200", r.status, r.body)
			}
		}
		if r := h.form("/auth/revoke", "", f.holder.ID+":"+f.holderSecret, url.Values{}); r.status != http.StatusBadRequest {
			t.Errorf("no token: %d %s, want 400 invalid_request", r.status, r.body)
		}
	})
	t.Run("bad credentials revoke nothing", func(t *testing.T) {
		tok := f.clientToken(f.holder, f.holderSecret)
		expectInvalidClient(t, h.form("/auth/revoke", "", f.holder.ID+":wrong", url.Values{"token": {tok}}))
		expectInvalidToken(t, h.form("/auth/revoke", "forged", "", url.Values{"token": {tok}}))
		expectInvalidClient(t, h.form("/auth/revoke", "", "", url.Values{"token": {tok}, "client_id": {f.holder.ID}}))
		if !works(tok) {
			t.Fatal("the token was revoked by a caller that failed to authenticate")
		}
	})
}

// TestDiscoveryAuthMethods: both discovery documents name the client
// authentication methods of the revocation and introspection endpoints.
func TestDiscoveryAuthMethods(t *testing.T) {
	h := newAuthHarness(t, nil)
	for _, path := range []string{"/.well-known/openid-configuration", "/fhir/.well-known/smart-configuration"} {
		r := h.do(http.MethodGet, path, "", nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d", path, r.status)
		}
		m := r.json(t)
		for _, k := range []string{"token_endpoint_auth_methods_supported", "revocation_endpoint_auth_methods_supported", "introspection_endpoint_auth_methods_supported"} {
			got, _ := json.Marshal(m[k])
			if string(got) != `["client_secret_basic","client_secret_post","private_key_jwt"]` {
				t.Errorf("%s %s: %s", path, k, got)
			}
		}
		for _, k := range []string{"revocation_endpoint_auth_signing_alg_values_supported", "introspection_endpoint_auth_signing_alg_values_supported"} {
			if got, _ := json.Marshal(m[k]); !strings.Contains(string(got), "ES384") {
				t.Errorf("%s %s: %s", path, k, got)
			}
		}
	}
}

// TestBearerChallengeWithoutToken: RFC 6750 §3.1. A request with no
// bearer token (no Authorization, or another scheme) gets the bare
// challenge Bearer realm="kiln", with no error code; a bad token gets
// error="invalid_token". Both are 401, an OperationOutcome under /fhir.
func TestBearerChallengeWithoutToken(t *testing.T) {
	h := newAuthHarness(t, nil)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/fhir/Patient"}, {http.MethodGet, "/fhir/Patient/x"}, {http.MethodPost, "/auth/logout"}, {http.MethodGet, "/nowhere"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			for name, headers := range map[string][]string{
				"no Authorization": nil,
				"Basic":            {"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))},
				"another scheme":   {"Authorization", "Negotiate abc"},
			} {
				r := h.do(c.method, c.path, "", nil, headers...)
				if wa := r.header.Get("WWW-Authenticate"); r.status != http.StatusUnauthorized || wa != `Bearer realm="kiln"` {
					t.Errorf("%s: %d, WWW-Authenticate %q, want 401 and Bearer realm=\"kiln\"", name, r.status, wa)
				}
				if strings.HasPrefix(c.path, "/fhir") {
					expectOutcome(t, r, http.StatusUnauthorized, "")
				}
			}
			for _, tok := range []string{"not-a-token", h.issue(auth.RoleProvider, "patients:read") + "x"} {
				expectInvalidToken(t, h.do(c.method, c.path, tok, nil))
			}
		})
	}
}

// TestClientAssertionKeyAlg: a registered key that declares its alg
// (RFC 7517 §4.4) verifies assertions signed with that alg only; an
// assertion under another alg of the same key type is 401 invalid_client.
// A key without alg takes any of the supported ones.
func TestClientAssertionKeyAlg(t *testing.T) {
	h := newAuthHarness(t, nil)
	unthrottled(h)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	register := func(alg string) *auth.Client {
		jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "node-1", Algorithm: alg, Use: "sig"}}})
		cl, _, err := h.svc.Clients.Add(t.Context(), "node-"+alg, "system/Observation.rs", jwks)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	assertion := func(cl *auth.Client, alg jose.SignatureAlgorithm) url.Values {
		now := h.now()
		return withAssertion(clientCredentials(""), sign(t, key, alg, "node-1", "JWT", map[string]any{"iss": cl.ID, "sub": cl.ID,
			"aud": h.base + "/auth/token", "exp": now.Add(4 * time.Minute).Unix(), "iat": now.Unix(), "jti": randHex(t, 12)}))
	}
	rs384, rs256, noAlg := register("RS384"), register("RS256"), register("")
	for _, c := range []struct {
		cl  *auth.Client
		alg jose.SignatureAlgorithm
		ok  bool
	}{
		{rs384, jose.RS384, true}, {rs384, jose.RS256, false},
		{rs256, jose.RS256, true}, {rs256, jose.RS384, false},
		{noAlg, jose.RS256, true}, {noAlg, jose.RS384, true},
	} {
		r := h.form("/auth/token", "", "", assertion(c.cl, c.alg))
		if c.ok {
			tokenResponse(t, r)
		} else {
			expectInvalidClient(t, r)
		}
	}
}

// oauthErrorOf checks an RFC 6749 error answer (no-store, the JSON body)
// and returns its description.
func oauthErrorOf(t *testing.T, r response, status int, code string) string {
	t.Helper()
	var m map[string]string
	if r.status != status || json.Unmarshal(r.body, &m) != nil || m["error"] != code {
		t.Fatalf("%d %s, want %d with error %s", r.status, r.body, status, code)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q on an OAuth error, want no-store", cc)
	}
	return m["error_description"]
}

// TestRefreshTokenClientAuthentication: RFC 6749 §6. A refresh request
// that names a client (credentials, or a client_id alone: Kiln's clients
// are all confidential) must authenticate it: a failure is 401
// invalid_client (a Basic challenge only when Basic was used). A client
// that did authenticate gets 400 invalid_grant for any refresh token,
// since Kiln issues them only to users. Neither answer touches the
// refresh token: it is not spent, and a used one presented that way does
// not end its family, so a stolen client secret cannot end users'
// sessions. A user refreshing through golang.org/x/oauth2 with no client
// (which sends an empty Basic pair in the header style) still refreshes.
func TestRefreshTokenClientAuthentication(t *testing.T) {
	f := newIntrospectionFixture(t)
	h := f.h
	log := collectAudit(h)
	refreshForm := func(tok string) url.Values {
		return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}
	}
	// refreshes spends tok as a user would and returns the next one.
	refreshes := func(t *testing.T, tok string) string {
		t.Helper()
		m := tokenResponse(t, h.form("/auth/token", "", "", refreshForm(tok)))
		return m["refresh_token"].(string)
	}
	with := func(tok string, set func(v url.Values)) url.Values {
		v := refreshForm(tok)
		set(v)
		return v
	}
	type attempt struct {
		name  string
		basic string
		form  func(tok string) url.Values
	}
	post := func(id, secret string) func(string) url.Values {
		return func(tok string) url.Values {
			return with(tok, func(v url.Values) { v.Set("client_id", id); v.Set("client_secret", secret) })
		}
	}
	failed := []attempt{
		{"basic, wrong secret", f.holder.ID + ":wrong-secret", refreshForm},
		{"basic, unknown client", "kc-nobody:" + f.holderSecret, refreshForm},
		{"basic, malformed", "no-colon-here", refreshForm},
		{"post, wrong secret", "", post(f.holder.ID, "wrong-secret")},
		{"client_id without a secret", "", func(tok string) url.Values {
			return with(tok, func(v url.Values) { v.Set("client_id", f.holder.ID) })
		}},
		{"private_key_jwt, wrong audience", "", func(tok string) url.Values {
			return withAssertion(refreshForm(tok), assertionFor(t, h, f.holderKey, f.holder.ID, func(m map[string]any) { m["aud"] = "https://evil.example" }))
		}},
		{"basic with another body client_id", f.holder.ID + ":" + f.holderSecret, func(tok string) url.Values {
			return with(tok, func(v url.Values) { v.Set("client_id", f.other.ID) })
		}},
	}
	authenticated := []attempt{
		{"basic", f.holder.ID + ":" + f.holderSecret, refreshForm},
		{"basic, resource server", f.rs.ID + ":" + f.rsSecret, refreshForm},
		{"post", "", post(f.other.ID, f.otherSecret)},
		{"private_key_jwt", "", func(tok string) url.Values {
			return withAssertion(refreshForm(tok), assertionFor(t, h, f.holderKey, f.holder.ID, nil))
		}},
	}
	_, fresh := f.ada()
	for _, a := range failed {
		t.Run("fresh token, "+a.name, func(t *testing.T) {
			log.take()
			r := h.form("/auth/token", "", a.basic, a.form(fresh))
			oauthErrorOf(t, r, http.StatusUnauthorized, "invalid_client")
			wa := r.header.Get("WWW-Authenticate")
			if a.basic != "" && wa != `Basic realm="kiln"` || a.basic == "" && wa != "" {
				t.Errorf("WWW-Authenticate %q (Basic used: %v)", wa, a.basic != "")
			}
			expectNoSecrets(t, log.take(), fresh, f.holderSecret, f.otherSecret, f.rsSecret)
		})
	}
	for _, a := range authenticated {
		t.Run("fresh token, "+a.name, func(t *testing.T) {
			log.take()
			r := h.form("/auth/token", "", a.basic, a.form(fresh))
			oauthErrorOf(t, r, http.StatusBadRequest, "invalid_grant")
			if wa := r.header.Get("WWW-Authenticate"); wa != "" {
				t.Errorf("WWW-Authenticate %q on invalid_grant", wa)
			}
			events := log.take()
			if len(events) != 1 || events[0].Action != "refresh" || events[0].Success || !strings.HasPrefix(events[0].Subject, "client/") {
				t.Errorf("audit events %+v, want one failed refresh naming the client", events)
			}
			expectNoSecrets(t, events, fresh, f.holderSecret, f.otherSecret, f.rsSecret)
		})
	}
	// None of those spent the refresh token.
	next := refreshes(t, fresh)
	// The spent one, presented by a client: refused without being taken
	// for a reuse, which would end the family (next with it).
	for _, a := range append(failed, authenticated...) {
		r := h.form("/auth/token", "", a.basic, a.form(fresh))
		if r.status != http.StatusUnauthorized && r.status != http.StatusBadRequest {
			t.Fatalf("%s with a spent refresh token: %d %s", a.name, r.status, r.body)
		}
	}
	next = refreshes(t, next)
	// Without a client, reuse detection is as it was: the spent one ends
	// the family.
	oauthErrorOf(t, h.form("/auth/token", "", "", refreshForm(fresh)), http.StatusBadRequest, "invalid_grant")
	oauthErrorOf(t, h.form("/auth/token", "", "", refreshForm(next)), http.StatusBadRequest, "invalid_grant")

	t.Run("golang.org/x/oauth2", func(t *testing.T) {
		for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleAutoDetect, oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
			_, user := f.bob()
			// A user's refresh, with no client configured.
			cfg := oauth2.Config{Endpoint: oauth2.Endpoint{TokenURL: h.base + "/auth/token", AuthStyle: style}}
			tok, err := cfg.TokenSource(oauth2Context(h), &oauth2.Token{RefreshToken: user}).Token()
			if err != nil || tok.AccessToken == "" || tok.RefreshToken == user {
				t.Fatalf("style %d: a user's refresh: %v", style, err)
			}
			// A client presenting the user's (new) refresh token.
			cfg.ClientID, cfg.ClientSecret = f.other.ID, f.otherSecret
			_, err = cfg.TokenSource(oauth2Context(h), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || re.Response.StatusCode != http.StatusBadRequest {
				t.Fatalf("style %d: a client with a user's refresh token: %v, want 400 invalid_grant", style, err)
			}
			cfg.ClientSecret = "wrong"
			_, err = cfg.TokenSource(oauth2Context(h), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
				t.Fatalf("style %d: a wrong client secret: %v, want 401 invalid_client", style, err)
			}
			refreshes(t, tok.RefreshToken) // still unspent
		}
	})
}

// gzipped is b gzip-encoded, as a request body.
func gzipped(t *testing.T, b []byte) []byte { return gztest.Encode(t, b) }

// TestOAuthFormBodies: the token, revocation and introspection endpoints
// read their form as RFC 6749 and HTTP say: the media type matches in any
// case and with parameters; an empty form is a form (the endpoint names
// what is missing); a body over 64 KiB (sent so, or inflating from gzip)
// is 413 and one that cannot be read (broken gzip) 400, each with the
// RFC 6749 body and its own description, not "must be a form".
func TestOAuthFormBodies(t *testing.T) {
	f := newIntrospectionFixture(t)
	h := f.h
	holderTok := f.clientToken(f.holder, f.holderSecret)
	ok := map[string]url.Values{
		"/auth/token":      clientCredentials(""),
		"/auth/introspect": {"token": {holderTok}},
		"/auth/revoke":     {"token": {"not-a-known-token"}},
	}
	missing := map[string]string{"/auth/token": "grant_type is required", "/auth/introspect": "token is required", "/auth/revoke": "token is required"}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(f.holder.ID+":"+f.holderSecret))
	send := func(path, contentType string, body []byte, headers ...string) response {
		return h.do(http.MethodPost, path, "", body, append([]string{"Content-Type", contentType, "Authorization", basic}, headers...)...)
	}
	const form = "application/x-www-form-urlencoded"
	for path, v := range ok {
		t.Run(path, func(t *testing.T) {
			for _, ct := range []string{form, "APPLICATION/X-WWW-FORM-URLENCODED", "Application/x-www-form-urlencoded; charset=utf-8", form + ` ; charset="UTF-8"`} {
				if r := send(path, ct, []byte(v.Encode())); r.status != http.StatusOK {
					t.Errorf("Content-Type %q: %d %s", ct, r.status, r.body)
				}
			}
			if r := send(path, form, gzipped(t, []byte(v.Encode())), "Content-Encoding", "gzip"); r.status != http.StatusOK {
				t.Errorf("a gzip-encoded form: %d %s", r.status, r.body)
			}
			for _, ct := range []string{"", "text/plain", form + "-not", "application/json", "multipart/form-data; boundary=x", "application/"} {
				d := oauthErrorOf(t, send(path, ct, []byte(v.Encode())), http.StatusBadRequest, "invalid_request")
				if !strings.Contains(d, "x-www-form-urlencoded") {
					t.Errorf("Content-Type %q: description %q", ct, d)
				}
			}
			if d := oauthErrorOf(t, send(path, form, nil), http.StatusBadRequest, "invalid_request"); d != missing[path] {
				t.Errorf("an empty form: %q, want %q", d, missing[path])
			}
			big := []byte(v.Encode() + "&pad=" + strings.Repeat("a", 70<<10))
			for name, r := range map[string]response{
				"plain":           send(path, form, big),
				"gzip (inflates)": send(path, form, gzipped(t, big), "Content-Encoding", "gzip"),
			} {
				if d := oauthErrorOf(t, r, http.StatusRequestEntityTooLarge, "invalid_request"); !strings.Contains(d, "too large") {
					t.Errorf("an oversized form, %s: description %q", name, d)
				}
			}
			if r := send(path, form, []byte(v.Encode()+"&pad="+strings.Repeat("a", 60<<10))); r.status != http.StatusOK {
				t.Errorf("a 60 KiB form: %d %s", r.status, r.body)
			}
			whole := gzipped(t, []byte(v.Encode()))
			for name, body := range map[string][]byte{"not gzip": []byte(v.Encode()), "truncated gzip": whole[:len(whole)-6]} {
				if d := oauthErrorOf(t, send(path, form, body, "Content-Encoding", "gzip"), http.StatusBadRequest, "invalid_request"); d != "the body could not be read" {
					t.Errorf("%s: description %q", name, d)
				}
			}
			if d := oauthErrorOf(t, send(path, form, []byte("token=%zz&grant_type=x")), http.StatusBadRequest, "invalid_request"); !strings.Contains(d, "form") {
				t.Errorf("a malformed form: description %q", d)
			}
		})
	}
}

// TestOAuthRepeatedParameters: RFC 6749 §3.1 and §3.2, parameters must
// not be included more than once. Each OAuth parameter given twice (even
// with the same value) is 400 invalid_request naming it, where the same
// request with it once succeeds, and nothing is done (a refresh token is
// not spent, a token not revoked). A body client_id beside Basic must be
// the Basic client: another one is 401 invalid_client.
func TestOAuthRepeatedParameters(t *testing.T) {
	f := newIntrospectionFixture(t)
	h := f.h
	holderBasic := f.holder.ID + ":" + f.holderSecret
	rsBasic := f.rs.ID + ":" + f.rsSecret
	_, refresh := f.ada()
	holderTok := f.clientToken(f.holder, f.holderSecret)
	postAuth := func(v url.Values) url.Values {
		v.Set("client_id", f.holder.ID)
		v.Set("client_secret", f.holderSecret)
		return v
	}
	cases := []struct {
		param, path, basic string
		form               func() url.Values
	}{
		{"grant_type", "/auth/token", holderBasic, func() url.Values { return clientCredentials("") }},
		{"scope", "/auth/token", holderBasic, func() url.Values { return clientCredentials("system/Patient.rs") }},
		{"client_id", "/auth/token", "", func() url.Values { return postAuth(clientCredentials("")) }},
		{"client_secret", "/auth/token", "", func() url.Values { return postAuth(clientCredentials("")) }},
		{"client_assertion", "/auth/token", "", func() url.Values {
			return withAssertion(clientCredentials(""), assertionFor(t, h, f.holderKey, f.holder.ID, nil))
		}},
		{"client_assertion_type", "/auth/token", "", func() url.Values {
			return withAssertion(clientCredentials(""), assertionFor(t, h, f.holderKey, f.holder.ID, nil))
		}},
		{"token", "/auth/introspect", rsBasic, func() url.Values { return url.Values{"token": {holderTok}} }},
		{"token_type_hint", "/auth/introspect", rsBasic, func() url.Values {
			return url.Values{"token": {holderTok}, "token_type_hint": {"access_token"}}
		}},
		{"token", "/auth/revoke", holderBasic, func() url.Values { return url.Values{"token": {"not-a-known-token"}} }},
		{"token_type_hint", "/auth/revoke", holderBasic, func() url.Values {
			return url.Values{"token": {"not-a-known-token"}, "token_type_hint": {"refresh_token"}}
		}},
	}
	for _, c := range cases {
		t.Run(c.path+" "+c.param, func(t *testing.T) {
			v := c.form()
			v[c.param] = append(v[c.param], v[c.param][0])
			if d := oauthErrorOf(t, h.form(c.path, "", c.basic, v), http.StatusBadRequest, "invalid_request"); !strings.Contains(d, c.param+" ") {
				t.Errorf("description %q does not name %s", d, c.param)
			}
			if r := h.form(c.path, "", c.basic, c.form()); r.status != http.StatusOK {
				t.Fatalf("the same request with %s once: %d %s", c.param, r.status, r.body)
			}
		})
	}
	t.Run("different values", func(t *testing.T) {
		v := clientCredentials("")
		v.Add("grant_type", "refresh_token")
		v.Set("refresh_token", refresh)
		oauthErrorOf(t, h.form("/auth/token", "", holderBasic, v), http.StatusBadRequest, "invalid_request")
	})
	t.Run("nothing is done", func(t *testing.T) {
		v := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh, refresh}}
		oauthErrorOf(t, h.form("/auth/token", "", "", v), http.StatusBadRequest, "invalid_request")
		tokenResponse(t, h.form("/auth/token", "", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}))
		oauthErrorOf(t, h.form("/auth/revoke", "", holderBasic, url.Values{"token": {holderTok, holderTok}}), http.StatusBadRequest, "invalid_request")
		if r := h.do(http.MethodGet, "/fhir/Patient", holderTok, nil); r.status != http.StatusOK {
			t.Fatalf("the token after a refused revocation: %d %s", r.status, r.body)
		}
	})
	t.Run("basic and another body client_id", func(t *testing.T) {
		for path, v := range map[string]url.Values{
			"/auth/token":      clientCredentials(""),
			"/auth/introspect": {"token": {holderTok}},
			"/auth/revoke":     {"token": {holderTok}},
		} {
			other := url.Values{"client_id": {f.other.ID}}
			same := url.Values{"client_id": {f.holder.ID}}
			for k, vals := range v {
				other[k], same[k] = vals, vals
			}
			r := h.form(path, "", holderBasic, other)
			oauthErrorOf(t, r, http.StatusUnauthorized, "invalid_client")
			if wa := r.header.Get("WWW-Authenticate"); wa != `Basic realm="kiln"` {
				t.Errorf("%s: WWW-Authenticate %q", path, wa)
			}
			if path == "/auth/revoke" {
				if r := h.do(http.MethodGet, "/fhir/Patient", holderTok, nil); r.status != http.StatusOK {
					t.Fatalf("the token after a refused revocation: %d %s", r.status, r.body)
				}
			}
			if r := h.form(path, "", holderBasic, same); r.status != http.StatusOK {
				t.Errorf("%s with the Basic client's own client_id: %d %s", path, r.status, r.body)
			}
		}
	})
}

// TestIntrospectionRateLimit: a resource server introspecting the token
// of every request it serves is not held to the per-address /auth limit
// (burst 30): 100 authenticated introspections in one instant all get
// 200. Unauthenticated or failed ones are counted, the 31st is 429 with
// the RFC 6749 body and Retry-After, and once the allowance is spent even
// the resource server is refused before its credentials are checked.
func TestIntrospectionRateLimit(t *testing.T) {
	h := newAuthHarness(t, nil) // the clock stands still unless advanced
	log := collectAudit(h)
	rs, rsSecret, err := h.svc.Clients.Register(t.Context(), auth.Registration{Name: "gateway", Scopes: "system/Patient.rs", Introspect: true})
	if err != nil {
		t.Fatal(err)
	}
	rsToken, err := h.svc.ClientToken(t.Context(), rs, "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	target := h.issue(auth.RoleProvider, "patients:read")
	introspect := func(bearer, basic string) response {
		return h.form("/auth/introspect", bearer, basic, url.Values{"token": {target}})
	}
	for i := range 100 {
		var r response
		if i%2 == 0 {
			r = introspect("", rs.ID+":"+rsSecret)
		} else {
			r = introspect(rsToken.AccessToken, "")
		}
		if r.status != http.StatusOK || r.json(t)["active"] != true {
			t.Fatalf("authenticated introspection %d: %d %s", i+1, r.status, r.body)
		}
	}
	unauthenticated := []func() response{
		func() response { return introspect("", "") },
		func() response { return introspect("", rs.ID+":wrong-secret") },
		func() response { return introspect("not-a-token", "") },
		func() response {
			return h.do(http.MethodPost, "/auth/introspect", "", []byte("token=x"), "Content-Type", "text/plain")
		},
	}
	limited := -1
	for i := range 40 {
		r := unauthenticated[i%len(unauthenticated)]()
		if r.status == http.StatusTooManyRequests {
			limited = i
			retryAfter(t, r)
			oauthErrorOf(t, r, http.StatusTooManyRequests, "temporarily_unavailable")
			break
		}
		if r.status != http.StatusUnauthorized && r.status != http.StatusBadRequest {
			t.Fatalf("unauthenticated introspection %d: %d %s", i+1, r.status, r.body)
		}
	}
	if limited != 30 {
		t.Fatalf("the first 429 came at unauthenticated request %d (from 0), want 30 (burst 30)", limited)
	}
	log.take()
	r := introspect("", rs.ID+":"+rsSecret)
	wait := retryAfter(t, r)
	if events := log.take(); len(events) != 0 {
		t.Errorf("a refused introspection was authenticated first: audit %+v", events)
	}
	h.clock.Advance(wait)
	if r := introspect("", rs.ID+":"+rsSecret); r.status != http.StatusOK {
		t.Fatalf("after Retry-After: %d %s", r.status, r.body)
	}
	// The token endpoint still counts every request.
	h.clock.Advance(time.Minute)
	for i := range 31 {
		r := h.form("/auth/token", "", rs.ID+":"+rsSecret, clientCredentials(""))
		if i < 30 && r.status != http.StatusOK || i == 30 && r.status != http.StatusTooManyRequests {
			t.Fatalf("token request %d: %d %s", i, r.status, r.body)
		}
	}
}
