package auth

import (
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/token"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Access tokens and the keys that sign them live in internal/token; these
// are their names in the issuer's API.
type (
	// Tokens issues and verifies access tokens.
	Tokens = token.Tokens
	// Claims are the claims of a Kiln access token.
	Claims = token.Claims
	// TokenError is a token that must not be accepted; Reason is safe to
	// show the client (it never echoes the token).
	TokenError = token.TokenError
	// Keys are the issuer's RS256 signing keys, sealed at rest.
	Keys = token.Keys
	// Sealer encrypts values at rest (crypt.Keyring).
	Sealer = token.Sealer
)

// TokenLifetime is the platform's access token lifetime.
const TokenLifetime = token.Lifetime

// NewTokens returns the token service of issuer for audience.
func NewTokens(keys *Keys, records store.Records, issuer, audience string, now func() time.Time) *Tokens {
	return token.New(keys, records, issuer, audience, now)
}

// NewKeys returns the key set; Ensure creates the first key.
func NewKeys(records store.Records, sealer Sealer, now func() time.Time) *Keys {
	return token.NewKeys(records, sealer, now)
}
