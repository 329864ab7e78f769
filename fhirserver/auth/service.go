// Package auth is Kiln's OAuth2/OIDC issuer: the Service (login,
// refresh, revocation, introspection, client tokens), its HTTP endpoints
// and the Require middleware, users and passwords, machine clients,
// trusted external issuers, and the scopes with the policy table
// (policy.go), the one place that decides what a grant allows.
//
// Its workings are internal packages: access tokens and their signing
// keys (internal/token), the login and request limits (internal/throttle)
// and the OAuth endpoints' HTTP vocabulary (internal/oauthwire).
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/token"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Service is Kiln's OAuth2 issuer: users, machine clients, tokens,
// refresh tokens, revocation and throttling, over the store's records.
type Service struct {
	Users    *Users
	Clients  *Clients
	Keys     *Keys
	Tokens   *Tokens
	Throttle *Throttle
	// TokenEndpoint is the absolute URL of /auth/token (the audience of
	// private_key_jwt client assertions).
	TokenEndpoint string
	// Audit receives every authentication event (nil: none).
	Audit func(ctx context.Context, e Event)

	records  store.Records
	now      func() time.Time
	external []*external // trusted OpenID providers (AddExternal)
	// fhirBases are Config.FHIRBases.
	fhirBases []string
}

// Event is an authentication event for the audit trail: never a secret,
// a password or a token, and a subject id rather than an email.
type Event struct {
	Action  string // login, token, refresh, logout, revoke, introspect, bearer, client-issue, client-rotate, client-expire, client-introspect, password-reset
	Subject string // user/<id>, client/<id>, or "" when unknown
	IP      string
	Success bool
	Reason  string
}

// Config are the settings of NewService.
type Config struct {
	Records store.Records
	Sealer  Sealer
	// Issuer is the server's base URL (iss); Audience the FHIR base (aud).
	Issuer, Audience string
	// FHIRBases are the paths the FHIR APIs are mounted at ("/fhir"):
	// each has a public CapabilityStatement and SMART configuration, and
	// its 401s are OperationOutcomes. The service knows no base of its own.
	FHIRBases []string
	Now       func() time.Time // nil: time.Now
}

// NewService assembles the issuer and makes sure a signing key exists.
func NewService(ctx context.Context, cfg Config) (*Service, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	keys := NewKeys(cfg.Records, cfg.Sealer, now)
	if err := keys.Ensure(ctx); err != nil {
		return nil, err
	}
	s := &Service{
		Users: NewUsers(cfg.Records, now), Clients: NewClients(cfg.Records, now), Keys: keys,
		Tokens:        NewTokens(keys, cfg.Records, cfg.Issuer, cfg.Audience, now),
		Throttle:      NewThrottle(now),
		TokenEndpoint: EndpointsOf(cfg.Issuer).Token,
		records:       cfg.Records, now: now,
		fhirBases: append([]string(nil), cfg.FHIRBases...),
	}
	return s, nil
}

// Record reports an event that happened outside the service (the admin
// commands issuing or rotating client secrets) to the audit trail.
func (s *Service) Record(ctx context.Context, e Event) { s.audit(ctx, e) }

func (s *Service) audit(ctx context.Context, e Event) {
	if s.Audit != nil {
		s.Audit(ctx, e)
	}
}

// TokenResponse is the answer of /auth/login and /auth/token.
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	ExpiresIn    int    `json:"expires_in"`
	TokenType    string `json:"token_type"`
	UserRole     string `json:"user_role,omitempty"`
	Scope        string `json:"scope"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// ThrottledError: try again after Wait.
type ThrottledError struct{ Wait time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many attempts; retry after %s", e.Wait.Round(time.Second))
}

// Login checks a user's email and password and issues a token with every
// scope the user is allowed, plus a refresh token.
func (s *Service) Login(ctx context.Context, email, password, ip string) (*TokenResponse, error) {
	account, _ := NormalizeEmail(email)
	if account == "" {
		account = email
	}
	if wait := s.Throttle.LoginWait(account, ip); wait > 0 {
		s.audit(ctx, Event{Action: "login", IP: ip, Reason: "throttled"})
		return nil, &ThrottledError{wait}
	}
	user, err := s.Users.Authenticate(ctx, email, password)
	if errors.Is(err, ErrBadCredentials) {
		s.Throttle.Failed(account, ip)
		s.audit(ctx, Event{Action: "login", IP: ip, Reason: "bad credentials"})
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	s.Throttle.Succeeded(account)
	resp, err := s.userToken(ctx, user, "")
	if err != nil {
		return nil, err
	}
	s.audit(ctx, Event{Action: "login", Subject: "user/" + user.ID, IP: ip, Success: true})
	return resp, nil
}

// userToken issues an access token and a refresh token for user; family
// continues a refresh-token family ("" starts one).
func (s *Service) userToken(ctx context.Context, user *User, family string) (*TokenResponse, error) {
	g, _ := ParseScopes(user.Scopes)
	scope := g.String()
	if family == "" {
		family = token.RandomID()
	}
	raw, _, err := token.Sign(ctx, s.Tokens, Claims{Subject: "user/" + user.ID, Role: user.Role, FHIRUser: user.FHIRUser, Scope: scope, SessionID: family})
	if err != nil {
		return nil, err
	}
	refresh, err := s.newRefresh(ctx, user.Email, family)
	if err != nil {
		return nil, err
	}
	return &TokenResponse{AccessToken: raw, ExpiresIn: int(TokenLifetime / time.Second), TokenType: "Bearer",
		UserRole: user.Role, Scope: scope, RefreshToken: refresh}, nil
}

// Refresh tokens are opaque random strings; the store keeps only their
// hash. Each use rotates it: the used one is marked, and presenting a used
// one again (a stolen copy) revokes the whole family.
const (
	refreshKind     = "refresh"
	familyKind      = "refresh-family"
	RefreshLifetime = 30 * 24 * time.Hour
)

type refreshRecord struct {
	Email  string `json:"email"`
	Family string `json:"family"`
	Used   bool   `json:"used,omitempty"`
}

func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func (s *Service) newRefresh(ctx context.Context, email, family string) (string, error) {
	tok := token.RandomID() + token.RandomID()
	v, _ := json.Marshal(refreshRecord{Email: email, Family: family})
	err := s.records.PutRecord(ctx, store.Record{Kind: refreshKind, ID: tokenHash(tok), Version: 1, Value: v, Expires: s.now().Add(RefreshLifetime)})
	if err != nil {
		return "", fmt.Errorf("auth: store refresh token: %w", err)
	}
	return tok, nil
}

// ErrInvalidGrant is a refresh token (or assertion) that is unknown,
// expired, reused or revoked.
var ErrInvalidGrant = errors.New("invalid_grant")

// Refresh exchanges a refresh token for new tokens (rotation).
func (s *Service) Refresh(ctx context.Context, tok, ip string) (*TokenResponse, error) {
	rec, err := s.records.GetRecord(ctx, refreshKind, tokenHash(tok))
	if errors.Is(err, store.ErrNotFound) {
		s.audit(ctx, Event{Action: "refresh", IP: ip, Reason: "unknown refresh token"})
		return nil, ErrInvalidGrant
	}
	if err != nil {
		return nil, err
	}
	var rr refreshRecord
	if err := json.Unmarshal(rec.Value, &rr); err != nil {
		return nil, err
	}
	if _, err := s.records.GetRecord(ctx, familyKind, rr.Family); err == nil {
		return nil, ErrInvalidGrant // the family was revoked
	}
	if rr.Used {
		// Reuse: someone holds a copy. End the family for both.
		_ = s.endFamily(ctx, rr.Family)
		s.audit(ctx, Event{Action: "refresh", IP: ip, Reason: "refresh token reused: family revoked"})
		return nil, ErrInvalidGrant
	}
	rr.Used = true
	v, _ := json.Marshal(rr)
	rec.Value, rec.Version = v, rec.Version+1
	if err := s.records.PutRecord(ctx, *rec); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, ErrInvalidGrant // used concurrently
		}
		return nil, err
	}
	user, err := s.Users.Get(ctx, rr.Email)
	if err != nil || user.Disabled {
		return nil, ErrInvalidGrant
	}
	resp, err := s.userToken(ctx, user, rr.Family)
	if err != nil {
		return nil, err
	}
	s.audit(ctx, Event{Action: "refresh", Subject: "user/" + user.ID, IP: ip, Success: true})
	return resp, nil
}

// endFamily revokes one refresh token family (a session: its refresh
// tokens, whichever was last issued).
func (s *Service) endFamily(ctx context.Context, family string) error {
	err := s.records.PutRecord(ctx, store.Record{Kind: familyKind, ID: family, Version: 1, Value: []byte{1}, Expires: s.now().Add(RefreshLifetime)})
	if errors.Is(err, store.ErrConflict) {
		return nil // revoked already
	}
	return err
}

// Authenticate verifies a bearer token and returns its principal.
func (s *Service) Authenticate(ctx context.Context, raw string) (*Principal, error) {
	c, err := s.Tokens.Verify(ctx, raw)
	var te *TokenError
	if errors.As(err, &te) && len(s.external) > 0 {
		if p, ok := s.authenticateExternal(ctx, raw); ok {
			return p, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return principalOf(c), nil
}

// Caller is who asks to introspect or revoke a token: a client that
// authenticated with its credentials (Client), or the principal of a
// bearer token (Principal).
type Caller struct {
	Client    *Client
	Principal *Principal
}

// Subject names the caller in audit records: client/<id> or the
// principal's subject.
func (c Caller) Subject() string {
	switch {
	case c.Client != nil:
		return "client/" + c.Client.ID
	case c.Principal != nil:
		return c.Principal.Subject
	}
	return ""
}

func (c Caller) admin() bool { return c.Client == nil && c.Principal != nil && c.Principal.Grant.Admin }

// ErrNotTokenOwner: the caller may not revoke the token it named.
var ErrNotTokenOwner = errors.New("the token was not issued to the caller")

// RevokeToken revokes, on behalf of by, an access token (by its jti, until
// it expires) or a refresh token (its family). Unknown or invalid tokens
// are not an error (RFC 7009 §2.2). Admin may revoke any token. A token
// issued to a client may be revoked only by that client, authenticated
// with its credentials (RFC 7009 §2.1); a user's tokens (access or
// refresh) only by a bearer token of the same user. Anything else is
// ErrNotTokenOwner and revokes nothing.
func (s *Service) RevokeToken(ctx context.Context, tok string, by Caller) error {
	if c, err := s.Tokens.Verify(ctx, tok); err == nil {
		if !by.admin() && !ownsAccessToken(by, c) {
			return ErrNotTokenOwner
		}
		return s.Tokens.Revoke(ctx, c.ID, c.Expiry.Time())
	}
	rec, err := s.records.GetRecord(ctx, refreshKind, tokenHash(tok))
	if err != nil {
		return nil
	}
	var rr refreshRecord
	if json.Unmarshal(rec.Value, &rr) != nil {
		return nil
	}
	if !by.admin() {
		// Refresh tokens are users' only; the record names the account.
		user, err := s.Users.Get(ctx, rr.Email)
		if err != nil || by.Client != nil || by.Principal == nil || by.Principal.Subject != "user/"+user.ID {
			return ErrNotTokenOwner
		}
	}
	return s.endFamily(ctx, rr.Family)
}

// ownsAccessToken: a client token belongs to the client authenticated by
// its credentials, a user token to a bearer token of the same user.
func ownsAccessToken(by Caller, c *Claims) bool {
	if c.ClientID != "" {
		return by.Client != nil && by.Client.ID == c.ClientID
	}
	return by.Client == nil && by.Principal != nil && by.Principal.ClientID == "" && by.Principal.Subject == c.Subject
}

// Introspection is the RFC 7662 answer.
type Introspection struct {
	Active   bool   `json:"active"`
	Scope    string `json:"scope,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Sub      string `json:"sub,omitempty"`
	Exp      int64  `json:"exp,omitempty"`
	Iat      int64  `json:"iat,omitempty"`
	Iss      string `json:"iss,omitempty"`
	Aud      string `json:"aud,omitempty"`
	Jti      string `json:"jti,omitempty"`
	Role     string `json:"role,omitempty"`
	Type     string `json:"token_type,omitempty"`
}

// Introspect reports to by whether tok is an active access token, and
// its details when by may know them: admin, the client the token was
// issued to, or a resource-server client (Client.Introspect), whether
// authenticated by credentials or by its own client token. For anyone
// else every token is inactive (RFC 7662 §2.2), so that no caller learns
// another's role, subject or scopes. allowed reports whether the answer
// was the token's own.
func (s *Service) Introspect(ctx context.Context, tok string, by Caller) (in Introspection, allowed bool, err error) {
	c, verr := s.Tokens.Verify(ctx, tok)
	if verr != nil {
		var te *TokenError
		if !errors.As(verr, &te) {
			return Introspection{}, false, verr
		}
		return Introspection{Active: false}, true, nil
	}
	ok, err := s.mayIntrospect(ctx, by, c)
	if err != nil || !ok {
		return Introspection{Active: false}, false, err
	}
	in = Introspection{Active: true, Scope: c.Scope, ClientID: c.ClientID, Sub: c.Subject, Exp: c.Expiry.Time().Unix(),
		Iss: c.Issuer, Jti: c.ID, Role: c.Role, Type: "Bearer"}
	if c.IssuedAt != nil {
		in.Iat = c.IssuedAt.Time().Unix()
	}
	if len(c.Audience) > 0 {
		in.Aud = c.Audience[0]
	}
	return in, true, nil
}

func (s *Service) mayIntrospect(ctx context.Context, by Caller, c *Claims) (bool, error) {
	if by.admin() {
		return true, nil
	}
	cl := by.Client
	if cl == nil && by.Principal != nil && by.Principal.ClientID != "" && strings.HasPrefix(by.Principal.Subject, "client/") {
		// A client's own access token: the client record, as it is now,
		// decides (it may have been disabled or lost its flag since).
		got, err := s.Clients.Get(ctx, by.Principal.ClientID)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if got.Disabled {
			return false, nil
		}
		cl = got
	}
	if cl == nil {
		return false, nil
	}
	return cl.Introspect || (c.ClientID != "" && cl.ID == c.ClientID), nil
}
