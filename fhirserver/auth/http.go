package auth

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/httpserver"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Public paths answer without a token; every other request needs one.
var publicPaths = map[string]bool{
	"/auth/login":                           true,
	"/auth/token":                           true,
	"/auth/revoke":                          true, // authenticates its caller itself
	"/auth/introspect":                      true, // authenticates its caller itself
	"/.well-known/jwks.json":                true,
	"/.well-known/openid-configuration":     true,
	"/fhir/.well-known/smart-configuration": true,
	"/fhir/metadata":                        true,
	"/openapi.json":                         true,
	"/livez":                                true,
	"/readyz":                               true,
}

// IsPublic reports whether path is served without a token.
func IsPublic(path string) bool { return publicPaths[path] }

// Require authenticates every non-public request by its bearer token and
// puts the principal in the request context. A missing or bad token is a
// 401 with WWW-Authenticate (an OperationOutcome under /fhir, the JSON
// error body elsewhere); the token itself is never logged or echoed.
func (s *Service) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPublic(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		raw, ok := bearer(r)
		if !ok {
			if usedBearer(r) {
				unauthorized(w, r, "the bearer token is empty")
			} else {
				unauthenticated(w, r)
			}
			return
		}
		p, err := s.Authenticate(r.Context(), raw)
		if err != nil {
			var te *TokenError
			if errors.As(err, &te) {
				s.audit(r.Context(), Event{Action: "bearer", IP: ClientIP(r), Reason: te.Reason})
				unauthorized(w, r, te.Reason)
				return
			}
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be checked")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// usedBearer reports whether the request tried the Bearer scheme, a token
// or not.
func usedBearer(r *http.Request) bool {
	scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Bearer")
}

// unauthorized answers a bearer token that was refused: the challenge
// says invalid_token and why (RFC 6750 §3.1).
func unauthorized(w http.ResponseWriter, r *http.Request, reason string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kiln", error="invalid_token", error_description="`+strings.ReplaceAll(reason, `"`, "'")+`"`)
	write401(w, r, reason)
}

// unauthenticated answers a request without any bearer token (none, or
// another scheme): RFC 6750 §3.1 says the challenge then carries no error
// code, only the scheme and realm; the client did not know a token was
// needed, so there is no token error to report.
func unauthenticated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kiln"`)
	write401(w, r, "a bearer token is required")
}

func write401(w http.ResponseWriter, r *http.Request, reason string) {
	if IsFHIRPath(r.URL.Path) {
		w.Header().Set("Content-Type", "application/fhir+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(outcome.New(http.StatusUnauthorized, "login", "authentication required: "+reason).Resource())
		return
	}
	httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "authentication required: "+reason)
}

// IsFHIRPath: the FHIR API answers errors with OperationOutcomes.
func IsFHIRPath(path string) bool { return path == "/fhir" || strings.HasPrefix(path, "/fhir/") }

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
	handle(http.MethodGet, "/fhir/.well-known/smart-configuration", http.HandlerFunc(s.smartConfiguration))
}

// Limited applies the per-IP rate limit of /auth endpoints: 429 with
// Retry-After when exceeded.
func (s *Service) Limited(next http.Handler) http.Handler { return s.limited(next) }

func (s *Service) limited(next http.Handler) http.Handler { return s.limit(next, TooMany) }

// limitedOAuth is limited for the OAuth endpoints, whose clients read the
// RFC 6749 error body: RFC 6749 has no code for a rate limit, so the 429
// says temporarily_unavailable, with Retry-After.
func (s *Service) limitedOAuth(next http.Handler) http.Handler { return s.limit(next, oauthTooMany) }

func oauthTooMany(w http.ResponseWriter, wait time.Duration) {
	setRetryAfter(w, wait)
	oauthError(w, http.StatusTooManyRequests, "temporarily_unavailable", "too many requests; retry later")
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
			oauthTooMany(w, wait)
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
	setRetryAfter(w, wait)
	httpserver.WriteError(w, http.StatusTooManyRequests, "too_many_requests", "too many requests; retry later")
}

func setRetryAfter(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
}

// oauthError is the RFC 6749 §5.2 error body.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	noStore(w)
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// invalidClient answers a failed client authentication: 401 with the
// RFC 6749 §5.2 body, and a Basic challenge only when the client used the
// Basic scheme (§5.2: the challenge matches the scheme used). A client
// authenticating in the body gets no challenge, which clients such as
// openid-client would otherwise report instead of the body.
func invalidClient(w http.ResponseWriter, r *http.Request, description string) {
	if usedBasic(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="kiln"`)
	}
	oauthError(w, http.StatusUnauthorized, "invalid_client", description)
}

func usedBasic(r *http.Request) bool {
	scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Basic")
}

// invalidToken answers a bad bearer token at an OAuth endpoint (RFC 6750
// §3), with the RFC 6749 body.
func invalidToken(w http.ResponseWriter, reason string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kiln", error="invalid_token", error_description="`+strings.ReplaceAll(reason, `"`, "'")+`"`)
	oauthError(w, http.StatusUnauthorized, "invalid_token", reason)
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteToken answers a token request (no-store, as RFC 6749 requires).
func WriteToken(w http.ResponseWriter, resp *TokenResponse) {
	noStore(w)
	writeJSON(w, http.StatusOK, resp)
}

const maxFormBytes = 64 << 10

// singleParams are the OAuth parameters a request may carry at most once
// (RFC 6749 §3.1, §3.2; RFC 7009 and 7662 take the same rule): a second
// value would leave it to chance which one is checked.
var singleParams = []string{"grant_type", "scope", "refresh_token", "client_id", "client_secret",
	"client_assertion", "client_assertion_type", "token", "token_type_hint"}

// parseForm reads the form body of an OAuth endpoint into r.PostForm,
// answering (and reporting false) when it cannot: a media type other than
// application/x-www-form-urlencoded (compared case-insensitively, with
// any parameters), a body over 64 KiB decoded (413), one that could not
// be read (a broken gzip encoding), a malformed form, or a parameter
// repeated. An empty form is a form: the endpoint says what it lacks.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		oauthError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the body is too large (at most 64 KiB)")
		return false
	case err != nil:
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body could not be read")
		return false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a valid application/x-www-form-urlencoded form")
		return false
	}
	for _, name := range singleParams {
		if len(form[name]) > 1 {
			oauthError(w, http.StatusBadRequest, "invalid_request", "the parameter "+name+" is repeated")
			return false
		}
	}
	r.PostForm = form
	return true
}

// token is POST /auth/token: client_credentials (client_secret_basic,
// client_secret_post, private_key_jwt) and refresh_token.
func (s *Service) token(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	ctx, ip := r.Context(), ClientIP(r)
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		cl, err := s.authenticateClient(r)
		if errors.Is(err, ErrInvalidClient) {
			s.audit(ctx, Event{Action: "token", IP: ip, Reason: "client authentication failed"})
			invalidClient(w, r, "client authentication failed")
			return
		}
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error", "the client could not be checked")
			return
		}
		resp, err := s.ClientToken(ctx, cl, r.PostForm.Get("scope"), ip)
		var se *ScopeError
		if errors.As(err, &se) {
			s.audit(ctx, Event{Action: "token", Subject: "client/" + cl.ID, IP: ip, Reason: "invalid scope"})
			oauthError(w, http.StatusBadRequest, "invalid_scope", se.Error())
			return
		}
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error", "no token could be issued")
			return
		}
		WriteToken(w, resp)
	case "refresh_token":
		if refreshByClient(r) {
			s.clientRefresh(w, r)
			return
		}
		resp, err := s.Refresh(ctx, r.PostForm.Get("refresh_token"), ip)
		if errors.Is(err, ErrInvalidGrant) {
			oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid, expired, revoked or was already used")
			return
		}
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error", "no token could be issued")
			return
		}
		WriteToken(w, resp)
	case "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "grant_type is required")
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "supported: client_credentials, refresh_token (users log in at /auth/login)")
	}
}

// refreshByClient reports whether a refresh_token request names a client:
// by its credentials, or by a client_id (Kiln's clients are all
// confidential, so one that names itself must authenticate, RFC 6749 §6).
// A Basic header with an empty id and secret names nobody: it is what
// golang.org/x/oauth2 sends for a configuration without a client, as a
// user refreshing a login's tokens has.
func refreshByClient(r *http.Request) bool {
	if id, secret, ok := r.BasicAuth(); ok && id == "" && secret == "" {
		return r.PostForm.Get("client_id") != "" || r.PostForm.Get("client_secret") != "" || r.PostForm.Get("client_assertion") != ""
	}
	return clientCredentials(r) || r.PostForm.Get("client_id") != ""
}

// clientRefresh answers a refresh_token request that names a client. The
// client must authenticate (401 invalid_client otherwise), and the
// refresh token must have been issued to it (RFC 6749 §6); Kiln issues
// refresh tokens only to users logging in, never to a client, so every
// such request is invalid_grant. The refresh token is not even looked
// up: it is neither spent nor, if already used, taken as a reuse that
// ends its family, so a client's stolen secret cannot end users' sessions.
func (s *Service) clientRefresh(w http.ResponseWriter, r *http.Request) {
	ctx, ip := r.Context(), ClientIP(r)
	cl, err := s.authenticateClient(r)
	if errors.Is(err, ErrInvalidClient) {
		s.audit(ctx, Event{Action: "refresh", IP: ip, Reason: "client authentication failed"})
		invalidClient(w, r, "client authentication failed")
		return
	}
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "the client could not be checked")
		return
	}
	s.audit(ctx, Event{Action: "refresh", Subject: "client/" + cl.ID, IP: ip, Reason: "refresh token not issued to the client"})
	oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was not issued to this client")
}

const jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// authenticateClient applies the one client authentication the request
// uses; using two at once is refused.
func (s *Service) authenticateClient(r *http.Request) (*Client, error) {
	ctx := r.Context()
	id, secret, basic := r.BasicAuth()
	form := r.PostForm
	assertion := form.Get("client_assertion")
	methods := 0
	for _, used := range []bool{basic, form.Get("client_secret") != "", assertion != ""} {
		if used {
			methods++
		}
	}
	if methods != 1 || usedBasic(r) && !basic { // or a Basic header that does not parse
		return nil, ErrInvalidClient
	}
	switch {
	case basic:
		// RFC 6749 §2.3.1: both are form-urlencoded before Base64.
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return nil, ErrInvalidClient
		}
		// A client_id in the body may only repeat the Basic one: two
		// identities in one request leave unclear who is asking.
		if bodyID := form.Get("client_id"); bodyID != "" && bodyID != id {
			return nil, ErrInvalidClient
		}
		return s.Clients.CheckSecret(ctx, id, secret)
	case assertion != "":
		if form.Get("client_assertion_type") != jwtBearer {
			return nil, ErrInvalidClient
		}
		return s.Clients.CheckAssertion(ctx, assertion, form.Get("client_id"), s.assertionAudiences(r))
	default:
		return s.Clients.CheckSecret(ctx, form.Get("client_id"), form.Get("client_secret"))
	}
}

// assertionAudiences are the aud values a client assertion may name (RFC
// 7523 §3: one identifying the authorization server): the issuer, the
// token endpoint, and the endpoint the assertion was sent to.
func (s *Service) assertionAudiences(r *http.Request) []string {
	auds := []string{s.Tokens.Issuer, s.TokenEndpoint}
	if r.URL.Path != "/auth/token" {
		auds = append(auds, s.Tokens.Issuer+r.URL.Path)
	}
	return auds
}

// clientCredentials reports whether the request carries client
// credentials (a client_id alone authenticates nothing).
func clientCredentials(r *http.Request) bool {
	return usedBasic(r) || r.PostForm.Get("client_secret") != "" || r.PostForm.Get("client_assertion") != ""
}

// authenticateCaller authenticates the caller of /auth/revoke and
// /auth/introspect: by client credentials (client_secret_basic,
// client_secret_post, private_key_jwt) or by a bearer token, never both.
// On failure it answers (and audits) and reports false.
func (s *Service) authenticateCaller(w http.ResponseWriter, r *http.Request, action string) (Caller, bool) {
	ctx, ip := r.Context(), ClientIP(r)
	raw, isBearer := bearer(r)
	switch {
	case isBearer && clientCredentials(r):
		oauthError(w, http.StatusBadRequest, "invalid_request", "use one authentication: client credentials or a bearer token")
		return Caller{}, false
	case isBearer:
		p, err := s.Authenticate(ctx, raw)
		var te *TokenError
		if errors.As(err, &te) {
			s.audit(ctx, Event{Action: action, IP: ip, Reason: te.Reason})
			invalidToken(w, te.Reason)
			return Caller{}, false
		}
		if err != nil {
			oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be checked")
			return Caller{}, false
		}
		return Caller{Principal: p}, true
	case clientCredentials(r):
		cl, err := s.authenticateClient(r)
		if errors.Is(err, ErrInvalidClient) {
			s.audit(ctx, Event{Action: action, IP: ip, Reason: "client authentication failed"})
			invalidClient(w, r, "client authentication failed")
			return Caller{}, false
		}
		if err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error", "the client could not be checked")
			return Caller{}, false
		}
		return Caller{Client: cl}, true
	}
	s.audit(ctx, Event{Action: action, IP: ip, Reason: "no authentication"})
	// Nothing was tried: say which schemes work (RFC 6750 §3.1, no error
	// code in the challenge), with the RFC 6749 body.
	w.Header().Set("WWW-Authenticate", `Bearer realm="kiln"`)
	oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication or a bearer token is required")
	return Caller{}, false
}

// revoke is RFC 7009 for an authenticated caller (see RevokeToken for
// who may revoke what): 200 whether or not the token was valid, 400
// unauthorized_client for a token of someone else, which stays valid.
func (s *Service) revoke(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	by, ok := s.authenticateCaller(w, r, "revoke")
	if !ok {
		return
	}
	ctx, ip := r.Context(), ClientIP(r)
	tok := r.PostForm.Get("token")
	if tok == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "token is required")
		return
	}
	err := s.RevokeToken(ctx, tok, by)
	if errors.Is(err, ErrNotTokenOwner) {
		s.audit(ctx, Event{Action: "revoke", Subject: by.Subject(), IP: ip, Reason: "not the caller's token"})
		oauthError(w, http.StatusBadRequest, "unauthorized_client", "the token was not issued to the caller")
		return
	}
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be revoked")
		return
	}
	s.audit(ctx, Event{Action: "revoke", Subject: by.Subject(), IP: ip, Success: true})
	noStore(w)
	w.WriteHeader(http.StatusOK)
}

// introspect is RFC 7662 for an authenticated caller: the token's details
// if the caller may know them, {"active":false} otherwise (§2.2). It
// reports whether the caller authenticated (see limitedIntrospect).
func (s *Service) introspect(w http.ResponseWriter, r *http.Request) (authenticated bool) {
	if !parseForm(w, r) {
		return false
	}
	by, ok := s.authenticateCaller(w, r, "introspect")
	if !ok {
		return false
	}
	ctx := r.Context()
	tok := r.PostForm.Get("token")
	if tok == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "token is required")
		return true
	}
	in, allowed, err := s.Introspect(ctx, tok, by)
	if err != nil {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be checked")
		return true
	}
	e := Event{Action: "introspect", Subject: by.Subject(), IP: ClientIP(r), Success: allowed}
	if !allowed {
		e.Reason = "not allowed to introspect the token"
	}
	s.audit(ctx, e)
	noStore(w)
	writeJSON(w, http.StatusOK, in)
	return true
}

// logout revokes the token the request presents (Require verified it).
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	p, ok := FromContext(r.Context())
	if !ok {
		unauthenticated(w, r)
		return
	}
	if err := s.Tokens.Revoke(r.Context(), p.TokenID, p.Expiry); err != nil {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the token could not be revoked")
		return
	}
	s.audit(r.Context(), Event{Action: "logout", Subject: p.Subject, IP: ClientIP(r), Success: true})
	noStore(w)
	writeJSON(w, http.StatusOK, map[string]bool{"revoked": true})
}

func (s *Service) jwks(w http.ResponseWriter, r *http.Request) {
	set, err := s.Keys.JWKS(r.Context())
	if err != nil {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the key set could not be read")
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, set)
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
	writeJSON(w, http.StatusOK, d)
}

func (s *Service) smartConfiguration(w http.ResponseWriter, r *http.Request) {
	d := s.discovery()
	d["capabilities"] = []string{"client-confidential-asymmetric", "client-confidential-symmetric", "permission-v1", "permission-v2"}
	writeJSON(w, http.StatusOK, d)
}

// ScopesSupported are the scopes the discovery documents advertise: the
// platform's, the accepted non-data ones, and the SMART wildcard forms
// (any resource type may replace *, and v1 .read/.write/.* are accepted).
func ScopesSupported() []string {
	out := append([]string{}, platformNames[:]...)
	out = append(out, metaNames[:]...)
	return append(out, "patient/*.rs", "user/*.cruds", "system/*.cruds")
}
