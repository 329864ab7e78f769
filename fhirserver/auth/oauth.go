package auth

// The OAuth endpoints: token, revocation and introspection, with their
// client authentication and RFC 6749 error answers.

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/oauthwire"
)

// WriteToken answers a token request (no-store, as RFC 6749 requires).
func WriteToken(w http.ResponseWriter, resp *TokenResponse) {
	oauthwire.NoStore(w)
	oauthwire.WriteJSON(w, http.StatusOK, resp)
}

// token is POST /auth/token: client_credentials (client_secret_basic,
// client_secret_post, private_key_jwt) and refresh_token.
func (s *Service) token(w http.ResponseWriter, r *http.Request) {
	if !oauthwire.ParseForm(w, r) {
		return
	}
	ctx, ip := r.Context(), ClientIP(r)
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		cl, err := s.authenticateClient(r)
		if errors.Is(err, ErrInvalidClient) {
			s.audit(ctx, Event{Action: "token", IP: ip, Reason: "client authentication failed"})
			oauthwire.InvalidClient(w, r, "client authentication failed")
			return
		}
		if err != nil {
			oauthwire.Error(w, http.StatusInternalServerError, "server_error", "the client could not be checked")
			return
		}
		resp, err := s.ClientToken(ctx, cl, r.PostForm.Get("scope"), ip)
		var se *ScopeError
		if errors.As(err, &se) {
			s.audit(ctx, Event{Action: "token", Subject: "client/" + cl.ID, IP: ip, Reason: "invalid scope"})
			oauthwire.Error(w, http.StatusBadRequest, "invalid_scope", se.Error())
			return
		}
		if err != nil {
			oauthwire.Error(w, http.StatusInternalServerError, "server_error", "no token could be issued")
			return
		}
		WriteToken(w, resp)
	case "refresh_token":
		if oauthwire.RefreshByClient(r) {
			s.clientRefresh(w, r)
			return
		}
		resp, err := s.Refresh(ctx, r.PostForm.Get("refresh_token"), ip)
		if errors.Is(err, ErrInvalidGrant) {
			oauthwire.Error(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid, expired, revoked or was already used")
			return
		}
		if err != nil {
			oauthwire.Error(w, http.StatusInternalServerError, "server_error", "no token could be issued")
			return
		}
		WriteToken(w, resp)
	case "":
		oauthwire.Error(w, http.StatusBadRequest, "invalid_request", "grant_type is required")
	default:
		oauthwire.Error(w, http.StatusBadRequest, "unsupported_grant_type", "supported: client_credentials, refresh_token (users log in at /auth/login)")
	}
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
		oauthwire.InvalidClient(w, r, "client authentication failed")
		return
	}
	if err != nil {
		oauthwire.Error(w, http.StatusInternalServerError, "server_error", "the client could not be checked")
		return
	}
	s.audit(ctx, Event{Action: "refresh", Subject: "client/" + cl.ID, IP: ip, Reason: "refresh token not issued to the client"})
	oauthwire.Error(w, http.StatusBadRequest, "invalid_grant", "the refresh token was not issued to this client")
}

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
	if methods != 1 || oauthwire.UsedScheme(r, "Basic") && !basic { // or a Basic header that does not parse
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
		if form.Get("client_assertion_type") != oauthwire.JWTBearer {
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

// authenticateCaller authenticates the caller of /auth/revoke and
// /auth/introspect: by client credentials (client_secret_basic,
// client_secret_post, private_key_jwt) or by a bearer token, never both.
// On failure it answers (and audits) and reports false.
func (s *Service) authenticateCaller(w http.ResponseWriter, r *http.Request, action string) (Caller, bool) {
	ctx, ip := r.Context(), ClientIP(r)
	raw, isBearer := oauthwire.Bearer(r)
	switch {
	case isBearer && oauthwire.ClientCredentials(r):
		oauthwire.Error(w, http.StatusBadRequest, "invalid_request", "use one authentication: client credentials or a bearer token")
		return Caller{}, false
	case isBearer:
		p, err := s.Authenticate(ctx, raw)
		var te *TokenError
		if errors.As(err, &te) {
			s.audit(ctx, Event{Action: action, IP: ip, Reason: te.Reason})
			oauthwire.InvalidToken(w, te.Reason)
			return Caller{}, false
		}
		if err != nil {
			oauthwire.Error(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be checked")
			return Caller{}, false
		}
		return Caller{Principal: p}, true
	case oauthwire.ClientCredentials(r):
		cl, err := s.authenticateClient(r)
		if errors.Is(err, ErrInvalidClient) {
			s.audit(ctx, Event{Action: action, IP: ip, Reason: "client authentication failed"})
			oauthwire.InvalidClient(w, r, "client authentication failed")
			return Caller{}, false
		}
		if err != nil {
			oauthwire.Error(w, http.StatusInternalServerError, "server_error", "the client could not be checked")
			return Caller{}, false
		}
		return Caller{Client: cl}, true
	}
	s.audit(ctx, Event{Action: action, IP: ip, Reason: "no authentication"})
	// Nothing was tried: say which schemes work (RFC 6750 §3.1, no error
	// code in the challenge), with the RFC 6749 body.
	w.Header().Set("WWW-Authenticate", `Bearer realm="kiln"`)
	oauthwire.Error(w, http.StatusUnauthorized, "invalid_client", "client authentication or a bearer token is required")
	return Caller{}, false
}

// revoke is RFC 7009 for an authenticated caller (see RevokeToken for
// who may revoke what): 200 whether or not the token was valid, 400
// unauthorized_client for a token of someone else, which stays valid.
func (s *Service) revoke(w http.ResponseWriter, r *http.Request) {
	if !oauthwire.ParseForm(w, r) {
		return
	}
	by, ok := s.authenticateCaller(w, r, "revoke")
	if !ok {
		return
	}
	ctx, ip := r.Context(), ClientIP(r)
	tok := r.PostForm.Get("token")
	if tok == "" {
		oauthwire.Error(w, http.StatusBadRequest, "invalid_request", "token is required")
		return
	}
	err := s.RevokeToken(ctx, tok, by)
	if errors.Is(err, ErrNotTokenOwner) {
		s.audit(ctx, Event{Action: "revoke", Subject: by.Subject(), IP: ip, Reason: "not the caller's token"})
		oauthwire.Error(w, http.StatusBadRequest, "unauthorized_client", "the token was not issued to the caller")
		return
	}
	if err != nil {
		oauthwire.Error(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be revoked")
		return
	}
	s.audit(ctx, Event{Action: "revoke", Subject: by.Subject(), IP: ip, Success: true})
	oauthwire.NoStore(w)
	w.WriteHeader(http.StatusOK)
}

// introspect is RFC 7662 for an authenticated caller: the token's details
// if the caller may know them, {"active":false} otherwise (§2.2). It
// reports whether the caller authenticated (see limitedIntrospect).
func (s *Service) introspect(w http.ResponseWriter, r *http.Request) (authenticated bool) {
	if !oauthwire.ParseForm(w, r) {
		return false
	}
	by, ok := s.authenticateCaller(w, r, "introspect")
	if !ok {
		return false
	}
	ctx := r.Context()
	tok := r.PostForm.Get("token")
	if tok == "" {
		oauthwire.Error(w, http.StatusBadRequest, "invalid_request", "token is required")
		return true
	}
	in, allowed, err := s.Introspect(ctx, tok, by)
	if err != nil {
		oauthwire.Error(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the token could not be checked")
		return true
	}
	e := Event{Action: "introspect", Subject: by.Subject(), IP: ClientIP(r), Success: allowed}
	if !allowed {
		e.Reason = "not allowed to introspect the token"
	}
	s.audit(ctx, e)
	oauthwire.NoStore(w)
	oauthwire.WriteJSON(w, http.StatusOK, in)
	return true
}
