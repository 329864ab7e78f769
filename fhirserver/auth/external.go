package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
)

// ExternalIssuer is a trusted OpenID provider whose JWTs Kiln accepts as
// bearer tokens. Its claims never grant anything by themselves: only the
// mapping turns them into scopes.
type ExternalIssuer struct {
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	// ClaimScopes maps "claim=value" to space-separated scopes: a token
	// whose claim equals value (or, for a list claim, contains it) gets
	// those scopes, e.g. {"groups=clinicians": "patients:read patients:write"}.
	ClaimScopes map[string]string `json:"claim_scopes"`
	// Role is the role of its users in Kiln (default "provider").
	Role string `json:"role,omitempty"`
}

type external struct {
	cfg      ExternalIssuer
	verifier *oidc.IDTokenVerifier
	host     string
}

// LoadExternalIssuers reads a JSON array of ExternalIssuer from path.
func LoadExternalIssuers(path string) ([]ExternalIssuer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trusted issuers: %w", err)
	}
	var list []ExternalIssuer
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("trusted issuers %s: %w", path, err)
	}
	return list, nil
}

// AddExternal trusts an OpenID provider: its discovery document and keys
// are fetched with the HTTP client in ctx (oidc.ClientContext) or the
// default one; the mapping's scopes must all be known.
func (s *Service) AddExternal(ctx context.Context, cfg ExternalIssuer) error {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("trusted issuer %q: want an https URL", cfg.Issuer)
	}
	if cfg.Audience == "" {
		return fmt.Errorf("trusted issuer %s: an audience is required", cfg.Issuer)
	}
	for k, scopes := range cfg.ClaimScopes {
		if claim, _, ok := strings.Cut(k, "="); !ok || claim == "" {
			return fmt.Errorf("trusted issuer %s: mapping key %q: want claim=value", cfg.Issuer, k)
		}
		if _, rejected := ParseScopes(scopes); len(rejected) > 0 {
			return fmt.Errorf("trusted issuer %s: unknown scopes %s", cfg.Issuer, strings.Join(rejected, " "))
		}
	}
	if cfg.Role == "" {
		cfg.Role = RoleProvider
	}
	if !slices.Contains(Roles, cfg.Role) || cfg.Role == RoleAdmin {
		return fmt.Errorf("trusted issuer %s: role %q is not allowed (admin only for Kiln's own users)", cfg.Issuer, cfg.Role)
	}
	p, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return fmt.Errorf("trusted issuer %s: %w", cfg.Issuer, err)
	}
	v := p.VerifierContext(context.WithoutCancel(ctx), &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.PS256},
		Now:                  s.now,
	})
	s.external = append(s.external, &external{cfg: cfg, verifier: v, host: u.Host})
	return nil
}

// authenticateExternal tries each trusted provider in turn (no claim of
// the token is read before one of them verified it).
func (s *Service) authenticateExternal(ctx context.Context, raw string) (*Principal, bool) {
	for _, e := range s.external {
		idt, err := e.verifier.Verify(ctx, raw)
		if err != nil {
			continue
		}
		var claims map[string]any
		if err := idt.Claims(&claims); err != nil {
			continue
		}
		var scopes []string
		for k, granted := range e.cfg.ClaimScopes {
			claim, value, _ := strings.Cut(k, "=")
			if claimHas(claims[claim], value) {
				scopes = append(scopes, granted)
			}
		}
		g, _ := ParseScopes(strings.Join(scopes, " "))
		jti, _ := claims["jti"].(string)
		if jti != "" {
			if revoked, err := s.Tokens.Revoked(ctx, jti); err != nil || revoked {
				return nil, false
			}
		}
		return &Principal{Subject: "external/" + e.host + "/" + idt.Subject, Role: e.cfg.Role, Grant: g, TokenID: jti, Expiry: idt.Expiry}, true
	}
	return nil, false
}

// claimHas: the claim equals value, or is a list (or a space-separated
// string, as "scope" is) holding it.
func claimHas(v any, value string) bool {
	switch v := v.(type) {
	case string:
		return v == value || slices.Contains(strings.Fields(v), value)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok && s == value {
				return true
			}
		}
	case bool:
		return fmt.Sprint(v) == value
	case float64:
		return fmt.Sprint(v) == value
	}
	return false
}
