package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// fakeProvider is an OpenID provider on loopback: discovery and keys.
func fakeProvider(t *testing.T, key *rsa.PrivateKey) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": srv.URL + "/keys",
			"authorization_endpoint": srv.URL + "/authorize", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "ext-1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv = httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func externalToken(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestExternalIssuer proves a trusted provider's tokens are verified with
// go-oidc (signature, iss, aud, exp) and that only the configured claim
// mapping turns their claims into scopes.
func TestExternalIssuer(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	idp := fakeProvider(t, key)
	ctx := oidc.ClientContext(context.Background(), idp.Client())
	svc := newMemService(t, ctx, nil)
	if err := svc.AddExternal(ctx, ExternalIssuer{Issuer: idp.URL, Audience: "kiln",
		ClaimScopes: map[string]string{"groups=clinicians": "patients:read", "department=workforce": "workforce:read"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	base := func() map[string]any {
		return map[string]any{"iss": idp.URL, "aud": "kiln", "sub": "u-1", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(),
			"groups": []string{"staff", "clinicians"}, "scope": "patients:write"}
	}
	p, err := svc.Authenticate(ctx, externalToken(t, key, "ext-1", base()))
	if err != nil {
		t.Fatalf("a valid external token: %v", err)
	}
	if !p.Grant.Has(PatientsRead) || p.Grant.Has(PatientsWrite) || p.Grant.Has(WorkforceRead) || p.Role != RoleProvider {
		t.Errorf("grant %q role %q: want patients:read only (the token's own scope claim is not trusted)", p.Grant.String(), p.Role)
	}
	bad := []struct {
		name   string
		key    *rsa.PrivateKey
		change func(map[string]any)
	}{
		{"wrong audience", key, func(c map[string]any) { c["aud"] = "someone-else" }},
		{"expired", key, func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() }},
		{"another issuer", key, func(c map[string]any) { c["iss"] = "https://evil.example" }},
		{"signed by another key", other, func(map[string]any) {}},
	}
	for _, b := range bad {
		c := base()
		b.change(c)
		if _, err := svc.Authenticate(ctx, externalToken(t, b.key, "ext-1", c)); err == nil {
			t.Errorf("%s: accepted", b.name)
		}
	}
	if err := svc.AddExternal(ctx, ExternalIssuer{Issuer: idp.URL, Audience: "kiln", ClaimScopes: map[string]string{"groups=x": "nonsense:scope"}}); err == nil {
		t.Error("a mapping to an unknown scope was accepted")
	}
	if err := svc.AddExternal(ctx, ExternalIssuer{Issuer: "http://plain.example", Audience: "kiln"}); err == nil {
		t.Error("a plain-HTTP issuer was accepted")
	}
}
