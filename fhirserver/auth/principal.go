package auth

import (
	"context"
	"sync"
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
	// SessionID is a user token's refresh-token family ("" for clients).
	SessionID string
	// Address is the network address the token was presented from
	// (ClientIP of the request), which audit records name.
	Address string
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
	return &Principal{Subject: c.Subject, Role: c.Role, ClientID: c.ClientID, FHIRUser: c.FHIRUser, Grant: grantOf(c.Scope, c.Role),
		TokenID: c.ID, Expiry: c.Expiry.Time(), SessionID: c.SessionID}
}

// grants memoizes the grant of a (scope, role) pair: every request of a
// token needs it, and a server sees few distinct pairs. Grants are never
// modified once made, so they are shared.
var grants struct {
	sync.Mutex
	m map[[2]string]Grant
}

const maxGrantsKept = 1024

func grantOf(scope, role string) Grant {
	key := [2]string{scope, role}
	grants.Lock()
	defer grants.Unlock()
	if g, ok := grants.m[key]; ok {
		return g
	}
	g, _ := ParseScopes(scope) // unknown scopes grant nothing
	if role == RoleAdmin {
		g = g.WithAdmin()
	}
	if grants.m == nil || len(grants.m) >= maxGrantsKept {
		grants.m = map[[2]string]Grant{}
	}
	grants.m[key] = g
	return g
}
