package auth

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/oauthwire"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// Public paths answer without a token; every other request needs one.
// Under each FHIR base, so do fhirPublic.
var publicPaths = map[string]bool{
	"/auth/login":                       true,
	"/auth/token":                       true,
	"/auth/revoke":                      true, // authenticates its caller itself
	"/auth/introspect":                  true, // authenticates its caller itself
	"/.well-known/jwks.json":            true,
	"/.well-known/openid-configuration": true,
	"/openapi.json":                     true,
	"/livez":                            true,
	"/readyz":                           true,
}

// fhirPublic are the paths under a FHIR base served without a token.
var fhirPublic = []string{smartConfigurationPath, "/metadata"}

// smartConfigurationPath is the SMART configuration under a FHIR base.
const smartConfigurationPath = "/.well-known/smart-configuration"

// IsPublic reports whether path is served without a token.
func (s *Service) IsPublic(path string) bool {
	if publicPaths[path] {
		return true
	}
	for _, b := range s.fhirBases {
		if rest, ok := strings.CutPrefix(path, b); ok && slices.Contains(fhirPublic, rest) {
			return true
		}
	}
	return false
}

// Require authenticates every non-public request by its bearer token and
// puts the principal in the request context. A missing or bad token is a
// 401 with WWW-Authenticate (an OperationOutcome under a FHIR base, the
// JSON error body elsewhere); the token itself is never logged or echoed.
func (s *Service) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.IsPublic(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		raw, ok := oauthwire.Bearer(r)
		if !ok {
			if oauthwire.UsedScheme(r, "Bearer") {
				s.unauthorized(w, r, "the bearer token is empty")
			} else {
				s.unauthenticated(w, r)
			}
			return
		}
		p, err := s.Authenticate(r.Context(), raw)
		if err != nil {
			var te *TokenError
			if errors.As(err, &te) {
				s.audit(r.Context(), Event{Action: "bearer", IP: ClientIP(r), Reason: te.Reason})
				s.unauthorized(w, r, te.Reason)
				return
			}
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be checked")
			return
		}
		p.Address = ClientIP(r)
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// unauthorized answers a bearer token that was refused: the challenge
// says invalid_token and why (RFC 6750 §3.1).
func (s *Service) unauthorized(w http.ResponseWriter, r *http.Request, reason string) {
	w.Header().Set("WWW-Authenticate", oauthwire.TokenChallenge(reason))
	s.write401(w, r, reason)
}

// unauthenticated answers a request without any bearer token (none, or
// another scheme): RFC 6750 §3.1 says the challenge then carries no error
// code, only the scheme and realm; the client did not know a token was
// needed, so there is no token error to report.
func (s *Service) unauthenticated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kiln"`)
	s.write401(w, r, "a bearer token is required")
}

func (s *Service) write401(w http.ResponseWriter, r *http.Request, reason string) {
	if s.IsFHIRPath(r.URL.Path) {
		w.Header().Set("Content-Type", "application/fhir+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(outcome.New(http.StatusUnauthorized, "login", "authentication required: "+reason).Resource())
		return
	}
	httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "authentication required: "+reason)
}

// IsFHIRPath reports whether path is under one of the FHIR bases, whose
// APIs answer errors with OperationOutcomes.
func (s *Service) IsFHIRPath(path string) bool {
	for _, b := range s.fhirBases {
		if path == b || strings.HasPrefix(path, b+"/") {
			return true
		}
	}
	return false
}

// ClientIP is the address a request came from (the TCP peer: Kiln does not
// trust forwarding headers it cannot verify).
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// The OAuth endpoints, whose errors have the RFC 6749 body.
const (
	pathToken      = "/auth/token"
	pathRevoke     = "/auth/revoke"
	pathIntrospect = "/auth/introspect"
)

// OAuthPaths are the paths of the OAuth endpoints: every error they
// answer, the middleware's included, has the RFC 6749 body.
func OAuthPaths() []string { return []string{pathToken, pathRevoke, pathIntrospect} }

// Routes registers the OAuth2/OIDC endpoints through handle (a router's
// method-and-path registration).
func (s *Service) Routes(handle func(method, path string, h http.Handler)) {
	handle(http.MethodPost, pathToken, s.limitedOAuth(http.HandlerFunc(s.token)))
	handle(http.MethodPost, pathRevoke, s.limitedOAuth(http.HandlerFunc(s.revoke)))
	handle(http.MethodPost, pathIntrospect, s.limitedIntrospect(s.introspect))
	handle(http.MethodPost, "/auth/logout", s.limited(http.HandlerFunc(s.logout)))
	handle(http.MethodGet, "/.well-known/jwks.json", http.HandlerFunc(s.jwks))
	handle(http.MethodGet, "/.well-known/openid-configuration", http.HandlerFunc(s.openIDConfiguration))
	for _, b := range s.fhirBases {
		handle(http.MethodGet, b+smartConfigurationPath, http.HandlerFunc(s.smartConfiguration))
	}
}

// Limited applies the per-IP rate limit of /auth endpoints: 429 with
// Retry-After when exceeded.
func (s *Service) Limited(next http.Handler) http.Handler { return s.limited(next) }

func (s *Service) limited(next http.Handler) http.Handler { return s.limit(next, TooMany) }

// limitedOAuth is limited for the OAuth endpoints, whose clients read the
// RFC 6749 error body: RFC 6749 has no code for a rate limit, so the 429
// says temporarily_unavailable, with Retry-After.
func (s *Service) limitedOAuth(next http.Handler) http.Handler {
	return s.limit(next, oauthwire.TooMany)
}

// limitedIntrospect is the limit of /auth/introspect, which a resource
// server may call for every request it serves, from one address: a call
// whose caller authenticated costs nothing, any other (no or failed
// authentication, a malformed form) takes a token from the address's
// bucket. An empty bucket is refused before anything is read or checked,
// so floods of guesses stay as cheap and as limited as elsewhere.
// serve reports whether its caller authenticated.
func (s *Service) limitedIntrospect(serve func(http.ResponseWriter, *http.Request) (authenticated bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip := ClientIP(r)
		if ok, wait := s.Throttle.Ready(ip); !ok {
			oauthwire.TooMany(w, wait)
			return
		}
		if !serve(w, r) {
			s.Throttle.Charge(ip)
		}
	})
}

func (s *Service) limit(next http.Handler, tooMany func(http.ResponseWriter, time.Duration)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := s.Throttle.Allow(ClientIP(r)); !ok {
			tooMany(w, wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TooMany answers 429 with Retry-After (whole seconds, at least 1).
func TooMany(w http.ResponseWriter, wait time.Duration) {
	oauthwire.SetRetryAfter(w, wait)
	httpserver.WriteError(w, http.StatusTooManyRequests, "too_many_requests", "too many requests; retry later")
}

// logout revokes the token the request presents (Require verified it).
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	p, ok := FromContext(r.Context())
	if !ok {
		s.unauthenticated(w, r)
		return
	}
	// The session ends: the token, and its refresh tokens (the family).
	err := s.Tokens.Revoke(r.Context(), p.TokenID, p.Expiry)
	if err == nil && p.SessionID != "" {
		err = s.endFamily(r.Context(), p.SessionID)
	}
	if err != nil {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be revoked")
		return
	}
	s.audit(r.Context(), Event{Action: "logout", Subject: p.Subject, IP: ClientIP(r), Success: true})
	oauthwire.NoStore(w)
	oauthwire.WriteJSON(w, http.StatusOK, map[string]bool{"revoked": true})
}
