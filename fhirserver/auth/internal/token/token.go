// Package token issues and verifies Kiln's access tokens (RS256 JWTs,
// typ at+jwt): the signing keys and their rotation, the full check of a
// token before any claim is read, the cache of tokens already verified,
// the jti deny list and the per-subject not-before time.
package token

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Lifetime is the platform's access token lifetime.
const Lifetime = 3600 * time.Second

// accessTokenType is the JOSE typ of access tokens (RFC 9068); an ID
// token or any other JWT signed by the same keys is not accepted as one.
const accessTokenType = "at+jwt"

// ClockSkew is the leeway on exp, iat and nbf (of client assertions too).
const ClockSkew = 30 * time.Second

// Claims are the claims of a Kiln access token.
type Claims struct {
	Issuer   string           `json:"iss"`
	Subject  string           `json:"sub"`
	Audience jwt.Audience     `json:"aud"`
	Expiry   *jwt.NumericDate `json:"exp"`
	IssuedAt *jwt.NumericDate `json:"iat"`
	ID       string           `json:"jti"`
	Scope    string           `json:"scope"`
	Role     string           `json:"role,omitempty"`
	FHIRUser string           `json:"fhirUser,omitempty"`
	ClientID string           `json:"client_id,omitempty"`
	// SessionID names the refresh-token family a user's token belongs to
	// (logout ends the family); IssuedAtMilli is iat to the millisecond,
	// compared with the subject's not-before time (see NotBefore).
	SessionID     string `json:"sid,omitempty"`
	IssuedAtMilli int64  `json:"iat_ms,omitempty"`
}

// TokenError is a token that must not be accepted; Reason is safe to
// show the client (it never echoes the token).
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return "invalid token: " + e.Reason }

func invalid(format string, a ...any) error { return &TokenError{Reason: fmt.Sprintf(format, a...)} }

const revokedKind = "revoked-jti"

// Tokens issues and verifies access tokens.
type Tokens struct {
	Keys     *Keys
	Issuer   string // iss, the server's base URL
	Audience string // aud, the FHIR base URL
	records  store.Records
	now      func() time.Time

	// verified remembers tokens that passed Verify, so that a client's
	// next requests skip the signature and the parsing. Revocation is
	// checked again once an entry is recheckRevoked old (a revocation on
	// this instance applies at once: see Revoke). The age is measured on
	// t.now, the clock every other check uses, so it lives in the entry
	// rather than in a cache TTL; the cache bounds the count, least
	// recently used out first.
	verified *lru.Cache[string, verifiedToken]
}

type verifiedToken struct {
	claims  Claims
	checked time.Time
}

const (
	recheckRevoked  = 5 * time.Second
	maxVerifiedKept = 10_000
)

// New returns the token service of issuer for audience.
func New(keys *Keys, records store.Records, issuer, audience string, now func() time.Time) *Tokens {
	verified, err := lru.New[string, verifiedToken](maxVerifiedKept)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Tokens{Keys: keys, Issuer: issuer, Audience: audience, records: records, now: now, verified: verified}
}

// Issue signs an access token for sub with the given scope; role, fhirUser
// and clientID are optional.
func (t *Tokens) Issue(ctx context.Context, sub, role, fhirUser, clientID, scope string) (string, Claims, error) {
	return Sign(ctx, t, Claims{Subject: sub, Role: role, FHIRUser: fhirUser, ClientID: clientID, Scope: scope})
}

// Sign signs c with t's current key, with the issuer, audience, times and
// id filled in: Issue, and the issuer's own tokens that carry more (a
// user's session).
func Sign(ctx context.Context, t *Tokens, c Claims) (string, Claims, error) {
	key, err := t.Keys.signer(ctx)
	if err != nil {
		return "", Claims{}, err
	}
	now := t.now()
	c.Issuer, c.Audience, c.ID = t.Issuer, jwt.Audience{t.Audience}, RandomID()
	c.Expiry, c.IssuedAt, c.IssuedAtMilli = jwt.NewNumericDate(now.Add(Lifetime)), jwt.NewNumericDate(now), now.UnixMilli()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key.priv},
		(&jose.SignerOptions{}).WithType(accessTokenType).WithHeader(jose.HeaderKey("kid"), key.KID))
	if err != nil {
		return "", Claims{}, fmt.Errorf("auth: signer: %w", err)
	}
	raw, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		return "", Claims{}, fmt.Errorf("auth: sign token: %w", err)
	}
	return raw, c, nil
}

// MaxBytes bounds what Verify parses (and a client assertion's length).
const MaxBytes = 8 << 10

// Verify checks a token completely before reading any claim from it: the
// RS256 signature by a published key, typ at+jwt, iss, aud, a required exp
// (and iat not in the future), a jti that is not revoked. Any failure is a
// *TokenError.
func (t *Tokens) Verify(ctx context.Context, raw string) (*Claims, error) {
	if len(raw) > MaxBytes {
		return nil, invalid("too long")
	}
	now := t.now()
	if v, ok := t.verified.Get(raw); ok {
		if now.After(v.claims.Expiry.Time().Add(ClockSkew)) {
			t.forget(raw)
			return nil, invalid("expired")
		}
		if now.Sub(v.checked) < recheckRevoked {
			c := v.claims
			return &c, nil
		}
	}
	c, err := t.verify(ctx, raw, now)
	if err != nil {
		t.forget(raw)
		return nil, err
	}
	t.verified.Add(raw, verifiedToken{claims: *c, checked: now})
	return c, nil
}

func (t *Tokens) forget(raw string) {
	t.verified.Remove(raw)
}

// verify is the full check of Verify.
func (t *Tokens) verify(ctx context.Context, raw string, now time.Time) (*Claims, error) {
	if !canonicalCompact(raw) {
		return nil, invalid("not a compact JWS in canonical base64url")
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, invalid("not an RS256-signed JWT")
	}
	if len(tok.Headers) != 1 {
		return nil, invalid("one signature expected")
	}
	h := tok.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(typ, accessTokenType) && !strings.EqualFold(typ, "application/"+accessTokenType) {
		return nil, invalid("not an access token (typ %q)", typ)
	}
	if h.KeyID == "" {
		return nil, invalid("no key id")
	}
	pub, err := t.Keys.verificationKey(ctx, h.KeyID)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) || strings.HasPrefix(err.Error(), "unknown key id") {
			return nil, invalid("unknown signing key")
		}
		return nil, err
	}
	var c Claims
	if err := tok.Claims(pub, &c); err != nil {
		return nil, invalid("bad signature")
	}
	// Claims are read only now, after the signature checked out.
	switch {
	case c.Expiry == nil:
		return nil, invalid("no exp")
	case c.ID == "":
		return nil, invalid("no jti")
	case c.Subject == "":
		return nil, invalid("no sub")
	}
	if now.After(c.Expiry.Time().Add(ClockSkew)) {
		return nil, invalid("expired")
	}
	if c.IssuedAt != nil && c.IssuedAt.Time().After(now.Add(ClockSkew)) {
		return nil, invalid("issued in the future")
	}
	if c.Issuer != t.Issuer {
		return nil, invalid("wrong issuer")
	}
	if !c.Audience.Contains(t.Audience) {
		return nil, invalid("wrong audience")
	}
	revoked, err := t.Revoked(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	if revoked {
		return nil, invalid("revoked")
	}
	nb, err := t.notBefore(ctx, c.Subject)
	if err != nil {
		return nil, err
	}
	// Issued in the same millisecond as the change is not after it: refused.
	if !nb.IsZero() && !c.issuedAt().After(nb) {
		return nil, invalid("revoked: the account changed after the token was issued")
	}
	return &c, nil
}

// issuedAt is when c was issued, to the millisecond where it says.
func (c *Claims) issuedAt() time.Time {
	switch {
	case c.IssuedAtMilli > 0:
		return time.UnixMilli(c.IssuedAtMilli)
	case c.IssuedAt != nil:
		return c.IssuedAt.Time()
	}
	return time.Time{}
}

// notBeforeKind: per subject, the time before which its tokens are
// refused (an account disabled, its password reset or its scopes changed).
const notBeforeKind = "not-before"

// NotBefore refuses every token of sub issued before now, on every
// instance sharing the store within recheckRevoked (the verify cache's
// window), at once on this one. The record lasts as long as a token can.
func (t *Tokens) NotBefore(ctx context.Context, sub string) error {
	now := t.now()
	t.forgetWhere(func(c *Claims) bool { return c.Subject == sub })
	v, _ := now.UTC().MarshalText()
	for {
		prev, err := t.records.GetRecord(ctx, notBeforeKind, sub)
		rec := store.Record{Kind: notBeforeKind, ID: sub, Version: 1, Value: v, Expires: now.Add(Lifetime + ClockSkew)}
		switch {
		case err == nil:
			rec.Version = prev.Version + 1
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		err = t.records.PutRecord(ctx, rec)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// notBefore is sub's not-before time (zero: none).
func (t *Tokens) notBefore(ctx context.Context, sub string) (time.Time, error) {
	rec, err := t.records.GetRecord(ctx, notBeforeKind, sub)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("auth: not-before: %w", err)
	}
	var nb time.Time
	if err := nb.UnmarshalText(rec.Value); err != nil {
		return time.Time{}, fmt.Errorf("auth: not-before of %s: %w", sub, err)
	}
	return nb, nil
}

// forgetWhere drops the verified tokens whose claims match from the
// cache, so that this instance checks them again at once.
func (t *Tokens) forgetWhere(match func(*Claims) bool) {
	for _, raw := range t.verified.Keys() {
		if v, ok := t.verified.Peek(raw); ok && match(&v.claims) {
			t.verified.Remove(raw)
		}
	}
}

// Revoke denies the token id jti until exp (when the token would have
// expired anyway, so the list stays small).
func (t *Tokens) Revoke(ctx context.Context, jti string, exp time.Time) error {
	t.forgetWhere(func(c *Claims) bool { return c.ID == jti })
	err := t.records.PutRecord(ctx, store.Record{Kind: revokedKind, ID: jti, Version: 1, Value: []byte{1}, Expires: exp.Add(ClockSkew)})
	if errors.Is(err, store.ErrConflict) {
		return nil // already revoked
	}
	return err
}

// Revoked reports whether jti is on the deny list.
func (t *Tokens) Revoked(ctx context.Context, jti string) (bool, error) {
	_, err := t.records.GetRecord(ctx, revokedKind, jti)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("auth: revocation list: %w", err)
}

// RandomID is 128 random bits in hex: a token's jti, and the issuer's
// ids and secrets.
func RandomID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// canonicalCompact: three base64url segments without padding, each the
// only encoding of its bytes (no stray trailing bits), so one token has one
// spelling.
func canonicalCompact(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := base64.RawURLEncoding.Strict().DecodeString(p); err != nil {
			return false
		}
	}
	return true
}
