package auth

// The discovery documents: the JWKS, the OpenID configuration and the
// SMART configuration.

import (
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/oauthwire"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

func (s *Service) jwks(w http.ResponseWriter, r *http.Request) {
	set, err := s.Keys.JWKS(r.Context())
	if err != nil {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the key set could not be read")
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	oauthwire.WriteJSON(w, http.StatusOK, set)
}

// The client authentication methods of the token, revocation and
// introspection endpoints, and the algorithms of client assertions.
var (
	authMethods       = []string{"client_secret_basic", "client_secret_post", "private_key_jwt"}
	assertionAlgNames = func() []string {
		out := make([]string, len(assertionAlgs))
		for i, a := range assertionAlgs {
			out[i] = string(a)
		}
		return out
	}()
)

// Endpoints are the absolute URLs of the issuer's endpoints, as discovery
// publishes them (and the FHIR CapabilityStatement repeats them).
type Endpoints struct {
	Token, Revoke, Introspect, JWKS string
}

// EndpointsOf gives the endpoints of the issuer at base URL iss.
func EndpointsOf(iss string) Endpoints {
	return Endpoints{
		Token:      iss + pathToken,
		Revoke:     iss + pathRevoke,
		Introspect: iss + pathIntrospect,
		JWKS:       iss + "/.well-known/jwks.json",
	}
}

// discovery is what the OpenID and the SMART configuration documents
// share: the endpoints and what the token endpoint accepts.
func (s *Service) discovery() map[string]any {
	e := EndpointsOf(s.Tokens.Issuer)
	return map[string]any{
		"issuer":                                s.Tokens.Issuer,
		"jwks_uri":                              e.JWKS,
		"token_endpoint":                        e.Token,
		"revocation_endpoint":                   e.Revoke,
		"introspection_endpoint":                e.Introspect,
		"grant_types_supported":                 []string{"client_credentials", "refresh_token"},
		"token_endpoint_auth_methods_supported": authMethods,
		"token_endpoint_auth_signing_alg_values_supported": assertionAlgNames,
		// Revocation and introspection also take a bearer token, which
		// has no name in the registry of these methods.
		"revocation_endpoint_auth_methods_supported":               authMethods,
		"revocation_endpoint_auth_signing_alg_values_supported":    assertionAlgNames,
		"introspection_endpoint_auth_methods_supported":            authMethods,
		"introspection_endpoint_auth_signing_alg_values_supported": assertionAlgNames,
		"scopes_supported": ScopesSupported(),
	}
}

func (s *Service) openIDConfiguration(w http.ResponseWriter, r *http.Request) {
	d := s.discovery()
	d["id_token_signing_alg_values_supported"] = []string{"RS256"}
	d["response_types_supported"] = []string{"token"}
	d["subject_types_supported"] = []string{"public"}
	oauthwire.WriteJSON(w, http.StatusOK, d)
}

func (s *Service) smartConfiguration(w http.ResponseWriter, r *http.Request) {
	d := s.discovery()
	d["capabilities"] = []string{"client-confidential-asymmetric", "client-confidential-symmetric", "permission-v1", "permission-v2"}
	oauthwire.WriteJSON(w, http.StatusOK, d)
}

// ScopesSupported are the scopes the discovery documents advertise: the
// platform's, the accepted non-data ones, and the SMART wildcard forms
// (any resource type may replace *, and v1 .read/.write/.* are accepted).
func ScopesSupported() []string {
	out := append([]string{}, platformNames[:]...)
	out = append(out, metaNames[:]...)
	return append(out, "patient/*.rs", "user/*.cruds", "system/*.cruds")
}
