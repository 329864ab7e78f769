package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/token"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

const (
	clientKind    = "client"
	assertionKind = "assertion-jti"
	// DefaultSecretLifetime: machine client secrets (and registered keys)
	// expire after 90 days; DefaultOverlap: after a rotation the previous
	// secret keeps working this long.
	DefaultSecretLifetime = 90 * 24 * time.Hour
	DefaultOverlap        = 7 * 24 * time.Hour
	// maxAssertionLifetime bounds exp - now of a client assertion (SMART
	// Backend Services: no more than five minutes).
	maxAssertionLifetime = 5 * time.Minute
)

// Client is a machine client ("high-risk industrial node").
type Client struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Scopes   string          `json:"scopes"`
	Secrets  []Secret        `json:"secrets,omitempty"`
	JWKS     json.RawMessage `json:"jwks,omitempty"` // public keys for private_key_jwt
	KeysUpTo time.Time       `json:"keysUpTo,omitzero"`
	Disabled bool            `json:"disabled,omitempty"`
	// Introspect marks a resource server: it may introspect (RFC 7662) any
	// token, not only its own.
	Introspect bool      `json:"introspect,omitempty"`
	Created    time.Time `json:"created"`

	version int64
}

// Secret is one client secret: only its SHA-256 is kept (secrets are 256
// random bits, so a slow hash adds nothing).
type Secret struct {
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Clients are the registered machine clients.
type Clients struct {
	records        store.Records
	now            func() time.Time
	SecretLifetime time.Duration
	Overlap        time.Duration
}

// NewClients returns the clients of records.
func NewClients(records store.Records, now func() time.Time) *Clients {
	return &Clients{records: records, now: now, SecretLifetime: DefaultSecretLifetime, Overlap: DefaultOverlap}
}

// ErrInvalidClient is every failed client authentication.
var ErrInvalidClient = errors.New("invalid_client")

// Add registers a client with the scopes it may ask for; jwks (a JWK Set
// of public keys, optional) enables private_key_jwt. It returns the
// client and its first secret, which is not stored and cannot be shown
// again.
func (c *Clients) Add(ctx context.Context, name, scopes string, jwks []byte) (*Client, string, error) {
	return c.Register(ctx, Registration{Name: name, Scopes: scopes, JWKS: jwks})
}

// Registration is what Register needs to know of a new client.
type Registration struct {
	Name   string
	Scopes string // the scopes it may ask for
	JWKS   []byte // public keys for private_key_jwt (optional)
	// Introspect makes it a resource server, allowed to introspect every
	// token (kiln admin client add --introspect).
	Introspect bool
}

// Register registers a client and returns it with its first secret, which
// is not stored and cannot be shown again.
func (c *Clients) Register(ctx context.Context, reg Registration) (*Client, string, error) {
	g, rejected := ParseScopes(reg.Scopes)
	if len(rejected) > 0 {
		return nil, "", fmt.Errorf("unknown scopes: %s", strings.Join(rejected, " "))
	}
	if strings.TrimSpace(reg.Name) == "" {
		return nil, "", errors.New("a client needs a name")
	}
	cl := &Client{ID: "kc-" + token.RandomID()[:20], Name: reg.Name, Scopes: g.String(), Introspect: reg.Introspect, Created: c.now().UTC()}
	if len(reg.JWKS) > 0 {
		if err := checkJWKS(reg.JWKS); err != nil {
			return nil, "", err
		}
		cl.JWKS, cl.KeysUpTo = reg.JWKS, c.now().Add(c.SecretLifetime)
	}
	secret := c.newSecret(cl)
	if err := c.put(ctx, cl); err != nil {
		return nil, "", err
	}
	return cl, secret, nil
}

func (c *Clients) newSecret(cl *Client) string {
	secret := token.RandomID() + token.RandomID()
	now := c.now().UTC()
	cl.Secrets = append(cl.Secrets, Secret{Hash: tokenHash(secret), Created: now, Expires: now.Add(c.SecretLifetime)})
	return secret
}

// Rotate issues a new secret; the previous ones keep working for the
// overlap window (or until they expire, if sooner).
func (c *Clients) Rotate(ctx context.Context, id string) (string, error) {
	cl, err := c.Get(ctx, id)
	if err != nil {
		return "", err
	}
	cutoff := c.now().Add(c.Overlap)
	kept := cl.Secrets[:0]
	for _, s := range cl.Secrets {
		if s.Expires.After(c.now()) {
			s.Expires = minTime(s.Expires, cutoff)
			kept = append(kept, s)
		}
	}
	cl.Secrets = kept
	secret := c.newSecret(cl)
	return secret, c.put(ctx, cl)
}

// SetKeys registers a new JWK Set for a client's private_key_jwt, valid
// for the secret lifetime (90 days) from now; it replaces the previous set.
// For an overlap, list the old key beside the new one until the client
// has switched, then register the new one alone.
func (c *Clients) SetKeys(ctx context.Context, id string, jwks []byte) error {
	cl, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := checkJWKS(jwks); err != nil {
		return err
	}
	cl.JWKS, cl.KeysUpTo = jwks, c.now().Add(c.SecretLifetime)
	return c.put(ctx, cl)
}

// SetIntrospect makes a client a resource server (on) or not (off).
func (c *Clients) SetIntrospect(ctx context.Context, id string, on bool) error {
	cl, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	cl.Introspect = on
	return c.put(ctx, cl)
}

// checkJWKS accepts a JWK Set of public keys, each with a kid.
func checkJWKS(jwks []byte) error {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) == 0 {
		return errors.New("the JWKS file is not a JSON Web Key Set with at least one key")
	}
	for _, k := range set.Keys {
		if !k.IsPublic() || k.KeyID == "" {
			return errors.New("every key of the JWKS must be a public key with a kid")
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (c *Clients) put(ctx context.Context, cl *Client) error {
	v, err := json.Marshal(cl)
	if err != nil {
		return err
	}
	if err := c.records.PutRecord(ctx, store.Record{Kind: clientKind, ID: cl.ID, Version: cl.version + 1, Value: v}); err != nil {
		return err
	}
	cl.version++
	return nil
}

// Get returns a client (store.ErrNotFound if none).
func (c *Clients) Get(ctx context.Context, id string) (*Client, error) {
	r, err := c.records.GetRecord(ctx, clientKind, id)
	if err != nil {
		return nil, err
	}
	var cl Client
	if err := json.Unmarshal(r.Value, &cl); err != nil {
		return nil, fmt.Errorf("auth: client record %s: %w", r.ID, err)
	}
	cl.version = r.Version
	return &cl, nil
}

// List returns every client.
func (c *Clients) List(ctx context.Context) ([]*Client, error) {
	recs, err := c.records.ListRecords(ctx, clientKind)
	if err != nil {
		return nil, err
	}
	out := make([]*Client, 0, len(recs))
	for _, r := range recs {
		var cl Client
		if err := json.Unmarshal(r.Value, &cl); err != nil {
			return nil, err
		}
		out = append(out, &cl)
	}
	return out, nil
}

// CheckSecret authenticates a client by its secret: any unexpired secret
// of the client matches.
func (c *Clients) CheckSecret(ctx context.Context, id, secret string) (*Client, error) {
	cl, err := c.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && cl.Disabled {
		return nil, ErrInvalidClient
	}
	if err != nil {
		return nil, err
	}
	h := tokenHash(secret)
	now := c.now()
	for _, s := range cl.Secrets {
		if subtle.ConstantTimeCompare([]byte(s.Hash), []byte(h)) == 1 && now.Before(s.Expires) {
			return cl, nil
		}
	}
	return nil, ErrInvalidClient
}

// assertionAlgs are the client assertion algorithms SMART Backend Services
// names (RS384, ES384) plus their 256-bit siblings.
var assertionAlgs = []jose.SignatureAlgorithm{jose.RS384, jose.ES384, jose.RS256, jose.ES256}

// CheckAssertion authenticates a client by a private_key_jwt assertion
// (RFC 7523, SMART Backend Services): signed by one of the client's
// registered keys, iss = sub = the client id, aud naming one of audiences
// (the issuer, the token endpoint, the endpoint called), exp within five
// minutes, a jti never seen before.
func (c *Clients) CheckAssertion(ctx context.Context, assertion, clientID string, audiences []string) (*Client, error) {
	if len(audiences) == 0 {
		return nil, ErrInvalidClient // an empty expectation would match any aud
	}
	if len(assertion) > token.MaxBytes {
		return nil, ErrInvalidClient
	}
	tok, err := jwt.ParseSigned(assertion, assertionAlgs)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrInvalidClient
	}
	if clientID == "" {
		// The key to verify with is the client's: the issuer is read
		// unverified only to find it, and checked again once verified.
		var unverified jwt.Claims
		if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
			return nil, ErrInvalidClient
		}
		clientID = unverified.Issuer
	}
	cl, err := c.Get(ctx, clientID)
	if err != nil || cl.Disabled || len(cl.JWKS) == 0 || !c.now().Before(cl.KeysUpTo) {
		return nil, ErrInvalidClient
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(cl.JWKS, &set); err != nil {
		return nil, ErrInvalidClient
	}
	keys := set.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		return nil, ErrInvalidClient
	}
	// A key registered with an alg signs with that one only (RFC 7517
	// §4.4): an assertion under another alg of the same key type is not
	// what the client said it would send.
	if alg := keys[0].Algorithm; alg != "" && alg != tok.Headers[0].Algorithm {
		return nil, ErrInvalidClient
	}
	var claims jwt.Claims
	if err := tok.Claims(keys[0].Key, &claims); err != nil {
		return nil, ErrInvalidClient
	}
	now := c.now()
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: cl.ID, Subject: cl.ID, AnyAudience: jwt.Audience(audiences), Time: now}, token.ClockSkew)
	if err != nil || claims.Expiry == nil || claims.ID == "" || claims.Expiry.Time().After(now.Add(maxAssertionLifetime+token.ClockSkew)) {
		return nil, ErrInvalidClient
	}
	// Replay: each jti once, remembered until the assertion expires.
	err = c.records.PutRecord(ctx, store.Record{Kind: assertionKind, ID: cl.ID + "\x1f" + claims.ID, Version: 1, Value: []byte{1},
		Expires: claims.Expiry.Time().Add(token.ClockSkew)})
	if errors.Is(err, store.ErrConflict) {
		return nil, ErrInvalidClient
	}
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// ClientToken issues an access token to an authenticated client: the
// scopes it asked for that it is allowed (all it is allowed if it asked
// for none). Asking for scopes of which it holds none is a *ScopeError;
// holding some of them gets a token for those (RFC 6749 §3.3: the scope of
// the answer says so). No refresh token: a client authenticates again.
func (s *Service) ClientToken(ctx context.Context, cl *Client, requested, ip string) (*TokenResponse, error) {
	allowed, _ := ParseScopes(cl.Scopes)
	g := allowed
	if strings.TrimSpace(requested) != "" {
		asked, rejected := ParseScopes(requested)
		if len(rejected) > 0 {
			return nil, &ScopeError{Rejected: rejected}
		}
		g = asked.Narrow(allowed)
		if g.String() == "" {
			return nil, &ScopeError{NoneHeld: true}
		}
	}
	scope := g.String()
	raw, _, err := s.Tokens.Issue(ctx, "client/"+cl.ID, "", "", cl.ID, scope)
	if err != nil {
		return nil, err
	}
	s.audit(ctx, Event{Action: "token", Subject: "client/" + cl.ID, IP: ip, Success: true})
	return &TokenResponse{AccessToken: raw, ExpiresIn: int(TokenLifetime / time.Second), TokenType: "Bearer", Scope: scope}, nil
}

// ScopeError: the request named scopes that do not exist (Rejected), or
// none that the client holds (NoneHeld).
type ScopeError struct {
	Rejected []string
	NoneHeld bool
}

func (e *ScopeError) Error() string {
	if len(e.Rejected) == 0 && e.NoneHeld {
		return "the client holds none of the requested scopes"
	}
	return "unknown scopes: " + strings.Join(e.Rejected, " ")
}

// expireSecrets drops expired secrets from every client, reporting each
// expiry to the audit trail once (the secret leaves the record with it).
func (s *Service) expireSecrets(ctx context.Context) error {
	list, err := s.Clients.List(ctx)
	if err != nil {
		return err
	}
	now := s.now()
	for _, listed := range list {
		cl, err := s.Clients.Get(ctx, listed.ID) // with its version, for the CAS
		if err != nil {
			continue
		}
		kept := cl.Secrets[:0]
		expired := 0
		for _, sec := range cl.Secrets {
			if now.Before(sec.Expires) {
				kept = append(kept, sec)
			} else {
				expired++
			}
		}
		if expired == 0 {
			continue
		}
		cl.Secrets = kept
		if err := s.Clients.put(ctx, cl); err != nil {
			if errors.Is(err, store.ErrConflict) {
				continue // changed meanwhile (a rotation): next round
			}
			return err
		}
		for range expired {
			s.audit(ctx, Event{Action: "client-expire", Subject: "client/" + cl.ID, Success: true})
		}
	}
	return nil
}

// Maintain does the issuer's periodic work: rotating a signing key that
// reached its maximum age (and dropping keys no token needs), and retiring
// expired client secrets. kiln serve runs it every hour.
func (s *Service) Maintain(ctx context.Context) error {
	return errors.Join(s.Keys.Ensure(ctx), s.expireSecrets(ctx))
}
