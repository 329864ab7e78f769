package auth

import (
	"context"
	"time"
)

// Principal is the verified caller of a request.
type Principal struct {
	// Subject is "user/<id>" or "client/<id>": what audit records name
	// (never an email address).
	Subject  string
	Role     string
	ClientID string
	FHIRUser string
	Grant    Grant
	TokenID  string
	Expiry   time.Time
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the request's principal, if it was authenticated.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// principalOf turns verified claims into a principal.
func principalOf(c *Claims) *Principal {
	g, _ := ParseScopes(c.Scope) // unknown scopes grant nothing
	if c.Role == RoleAdmin {
		g = g.WithAdmin()
	}
	return &Principal{Subject: c.Subject, Role: c.Role, ClientID: c.ClientID, FHIRUser: c.FHIRUser, Grant: g,
		TokenID: c.ID, Expiry: c.Expiry.Time()}
}
