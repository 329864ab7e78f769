package auth

// The OAuth endpoints: token, revocation and introspection, with their
// client authentication and RFC 6749 error answers.

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
)

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
	if usedScheme(r, "Basic") {
		w.Header().Set("WWW-Authenticate", `Basic realm="kiln"`)
	}
	oauthError(w, http.StatusUnauthorized, "invalid_client", description)
}

// invalidToken answers a bad bearer token at an OAuth endpoint (RFC 6750
// §3), with the RFC 6749 body.
func invalidToken(w http.ResponseWriter, reason string) {
	w.Header().Set("WWW-Authenticate", invalidTokenChallenge(reason))
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
	if methods != 1 || usedScheme(r, "Basic") && !basic { // or a Basic header that does not parse
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
	if r.URL.Path != pathToken {
		auds = append(auds, s.Tokens.Issuer+r.URL.Path)
	}
	return auds
}

// clientCredentials reports whether the request carries client
// credentials (a client_id alone authenticates nothing).
func clientCredentials(r *http.Request) bool {
	return usedScheme(r, "Basic") || r.PostForm.Get("client_secret") != "" || r.PostForm.Get("client_assertion") != ""
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
