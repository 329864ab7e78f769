package auth

import (
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/profiles"
)

// Op is a set of FHIR interaction kinds. SMART v1 and v2 permissions and the
// platform scopes are all mapped onto these bits.
type Op uint8

// The interaction kinds, in SMART v2 letter order (c r u d s).
const (
	OpCreate Op = 1 << iota // c
	OpRead                  // r: read, vread, history of one resource
	OpUpdate                // u: update, patch
	OpDelete                // d
	OpSearch                // s: search, history of a type or the system

	// OpAll is every interaction kind (SMART v1 ".*", v2 ".cruds").
	OpAll = OpCreate | OpRead | OpUpdate | OpDelete | OpSearch
	// OpReadSearch is what SMART v1 ".read" means (v2 ".rs").
	OpReadSearch = OpRead | OpSearch
	// OpWrite is what SMART v1 ".write" means (v2 ".cud").
	OpWrite = OpCreate | OpUpdate | OpDelete
)

const opLetters = "cruds"

// String renders the set as SMART v2 letters in canonical order, e.g. "rs".
func (o Op) String() string {
	var b strings.Builder
	for i := range len(opLetters) {
		if o&(1<<i) != 0 {
			b.WriteByte(opLetters[i])
		}
	}
	return b.String()
}

// words renders the set for humans, e.g. "read, search".
func (o Op) words() string {
	names := [...]string{"create", "read", "update", "delete", "search"}
	var out []string
	for i, n := range names {
		if o&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// single reports whether o holds exactly one interaction kind.
func (o Op) single() bool { return o != 0 && o&OpAll == o && o&(o-1) == 0 }

// Context is the SMART context of a permission. The order matters: a patient
// context is narrower than a user context, which is narrower than a system
// context (Narrow takes the narrower of two).
type Context uint8

// SMART contexts.
const (
	ContextPatient Context = iota + 1 // patient/…: the launch patient's compartment
	ContextUser                       // user/…: what the signed-in user may see
	ContextSystem                     // system/…: backend services, no user
)

var contextNames = [...]string{ContextPatient: "patient", ContextUser: "user", ContextSystem: "system"}

func (c Context) String() string {
	if c >= ContextPatient && c <= ContextSystem {
		return contextNames[c]
	}
	return "invalid"
}

// Permission is one SMART permission: interactions Ops on resources of Type
// ("*" for every type) in a Context.
type Permission struct {
	Context Context
	Type    string // "*" or an R4 resource type
	Ops     Op
}

// String renders p as a SMART v2 scope, e.g. "user/Patient.rs".
func (p Permission) String() string {
	return p.Context.String() + "/" + p.Type + "." + p.Ops.String()
}

// covers reports whether q grants at least the context and type of p.
func (q Permission) covers(p Permission) bool {
	return q.Context >= p.Context && (q.Type == "*" || q.Type == p.Type)
}

// Platform is a set of the platform's own (non-SMART) scopes.
type Platform uint8

// The platform scopes. ConsultationsWrite and WorkforceWrite are Kiln's
// additions; the others come from the platform specification.
const (
	PatientsRead       Platform = 1 << iota // patients:read: view patient records and history
	PatientsWrite                           // patients:write: create or update patient folders
	ConsultationsRead                       // consultations:read: telemedicine session details
	ConsultationsWrite                      // consultations:write: create/update telemedicine rooms, bookings, chats
	PaymentsWrite                           // payments:write: initiate health-financing payments
	WorkforceRead                           // workforce:read: workforce compliance status
	WorkforceWrite                          // workforce:write: record workforce screenings and certifications

	AllPlatform = PatientsRead | PatientsWrite | ConsultationsRead | ConsultationsWrite |
		PaymentsWrite | WorkforceRead | WorkforceWrite
)

var platformNames = [...]string{
	"patients:read", "patients:write", "consultations:read", "consultations:write",
	"payments:write", "workforce:read", "workforce:write",
}

// String renders the set as space-separated scope names in bit order.
func (p Platform) String() string {
	var out []string
	for i, n := range platformNames {
		if p&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, " ")
}

// Meta is a set of scopes that are accepted and recorded but grant no data
// access (OpenID Connect and SMART launch scopes).
type Meta uint8

// The accepted non-data scopes.
const (
	MetaOpenID          Meta = 1 << iota // openid
	MetaProfile                          // profile
	MetaFHIRUser                         // fhirUser
	MetaOfflineAccess                    // offline_access: a refresh token may be issued
	MetaOnlineAccess                     // online_access
	MetaLaunch                           // launch
	MetaLaunchPatient                    // launch/patient
	MetaLaunchEncounter                  // launch/encounter

	AllMeta = MetaOpenID | MetaProfile | MetaFHIRUser | MetaOfflineAccess |
		MetaOnlineAccess | MetaLaunch | MetaLaunchPatient | MetaLaunchEncounter
)

var metaNames = [...]string{
	"openid", "profile", "fhirUser", "offline_access", "online_access",
	"launch", "launch/patient", "launch/encounter",
}

// Grant is the single internal model of what a token allows. Platform
// scopes, SMART v1 and SMART v2 scopes all parse into it.
//
// The zero Grant allows nothing. Values returned by ParseScopes, Narrow and
// AllScopes are normalized: FHIR holds at most one Permission per (Context,
// Type), sorted, with no Ops that a broader Permission already grants. Grants
// built by hand are normalized by String, Narrow and Equal.
type Grant struct {
	Platform Platform
	FHIR     []Permission
	Meta     Meta
	// Admin is not a scope: the caller sets it when the token's role is
	// "admin". It is needed for admin-only actions and for reading the audit
	// partition. It grants no clinical or workforce data by itself.
	Admin bool
}

// OfflineAccess reports whether the grant holds offline_access (a refresh
// token may be issued).
func (g Grant) OfflineAccess() bool { return g.Meta&MetaOfflineAccess != 0 }

// Has reports whether the grant holds every platform scope in p.
func (g Grant) Has(p Platform) bool { return g.Platform&p == p }

// AllScopes returns a grant of every scope: all platform scopes, all
// non-data scopes and "<c>/*.cruds" in context c (ContextUser for people,
// ContextSystem for machine clients). Admin is not set.
func AllScopes(c Context) Grant {
	if c < ContextPatient || c > ContextSystem {
		c = ContextUser
	}
	return Grant{
		Platform: AllPlatform,
		Meta:     AllMeta,
		FHIR:     []Permission{{Context: c, Type: "*", Ops: OpAll}},
	}
}

// ParseScopes parses a space-separated scope string (RFC 6749 §3.3). It
// returns the grant and the scopes it did not accept, deduplicated, in the
// order they first appear. A scope is rejected when it is unknown or
// malformed, names a type that is not an R4 resource type, or is a SMART v2
// scope with a "?" search restriction (not supported: granting it fully
// would grant too much). ParseScopes never panics; the empty string gives
// the zero grant.
func ParseScopes(s string) (Grant, []string) {
	var g Grant
	var rejected []string
	for _, tok := range strings.Fields(s) {
		if !parseScope(&g, tok) && !slices.Contains(rejected, tok) {
			rejected = append(rejected, tok)
		}
	}
	return g.normalize(), rejected
}

// parseScope adds one scope to g and reports whether it was accepted.
func parseScope(g *Grant, tok string) bool {
	if i := slices.Index(platformNames[:], tok); i >= 0 {
		g.Platform |= 1 << i
		return true
	}
	if i := slices.Index(metaNames[:], tok); i >= 0 {
		g.Meta |= 1 << i
		return true
	}
	p, ok := parsePermission(tok)
	if ok {
		g.FHIR = append(g.FHIR, p)
	}
	return ok
}

// parsePermission parses a SMART v1 or v2 resource scope.
func parsePermission(tok string) (Permission, bool) {
	var p Permission
	ctx, rest, ok := strings.Cut(tok, "/")
	if !ok {
		return p, false
	}
	switch ctx {
	case "patient":
		p.Context = ContextPatient
	case "user":
		p.Context = ContextUser
	case "system":
		p.Context = ContextSystem
	default:
		return p, false
	}
	typ, ops, ok := strings.Cut(rest, ".")
	if !ok || (typ != "*" && !profiles.IsResourceType(typ)) {
		return p, false
	}
	p.Type = typ
	switch ops {
	case "read": // SMART v1
		p.Ops = OpReadSearch
	case "write":
		p.Ops = OpWrite
	case "*":
		p.Ops = OpAll
	default: // SMART v2: a non-empty subset of c r u d s, in that order
		next := 0
		for i := range len(ops) {
			j := strings.IndexByte(opLetters[next:], ops[i])
			if j < 0 {
				return p, false // unknown letter, wrong order, repeat or "?"
			}
			next += j + 1
			p.Ops |= 1 << (next - 1)
		}
		if p.Ops == 0 {
			return p, false
		}
	}
	return p, true
}

// normalize returns g with FHIR merged, pruned and sorted (a fresh slice).
func (g Grant) normalize() Grant {
	g.Platform &= AllPlatform
	g.Meta &= AllMeta
	var merged []Permission
	for _, p := range g.FHIR {
		p.Ops &= OpAll
		if p.Ops == 0 || p.Context < ContextPatient || p.Context > ContextSystem ||
			(p.Type != "*" && !profiles.IsResourceType(p.Type)) {
			continue
		}
		i := slices.IndexFunc(merged, func(q Permission) bool {
			return q.Context == p.Context && q.Type == p.Type
		})
		if i >= 0 {
			merged[i].Ops |= p.Ops
		} else {
			merged = append(merged, p)
		}
	}
	// Drop the ops a broader permission already grants. Covering is a
	// partial order and merged has one entry per (Context, Type), so the
	// result does not depend on the order of removal.
	var out []Permission
	for i, p := range merged {
		var covered Op
		for j, q := range merged {
			if i != j && q.covers(p) {
				covered |= q.Ops
			}
		}
		if p.Ops &^= covered; p.Ops != 0 {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Permission) int {
		if a.Context != b.Context {
			return int(a.Context) - int(b.Context)
		}
		return strings.Compare(a.Type, b.Type)
	})
	g.FHIR = out
	return g
}

// String returns the canonical scope string of g: every scope once,
// space-separated, sorted. SMART permissions are written in v2 form (v1
// ".read" comes back as ".rs"). Admin is not a scope and is not written.
// ParseScopes(g.String()) equals g apart from Admin.
func (g Grant) String() string {
	g = g.normalize()
	var out []string
	for i, n := range platformNames {
		if g.Platform&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	for i, n := range metaNames {
		if g.Meta&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	for _, p := range g.FHIR {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Equal reports whether g and o grant the same (after normalization).
func (g Grant) Equal(o Grant) bool {
	g, o = g.normalize(), o.normalize()
	return g.Platform == o.Platform && g.Meta == o.Meta && g.Admin == o.Admin &&
		slices.Equal(g.FHIR, o.FHIR)
}

// Narrow returns the part of g that allowed also grants: what a client gets
// out of what it asked for (g) given what it may have (allowed). Platform
// and non-data scopes are intersected, so allowed must list openid or
// offline_access for them to survive. A SMART permission survives with the
// narrower context, the more specific type and the common ops of a
// requested and an allowed permission: asking for user/*.rs while allowed
// patient/Observation.cruds gives patient/Observation.rs. Admin survives
// only if both have it.
func (g Grant) Narrow(allowed Grant) Grant {
	out := Grant{
		Platform: g.Platform & allowed.Platform,
		Meta:     g.Meta & allowed.Meta,
		Admin:    g.Admin && allowed.Admin,
	}
	for _, p := range g.FHIR {
		for _, a := range allowed.FHIR {
			typ := p.Type
			switch {
			case p.Type == a.Type, a.Type == "*":
			case p.Type == "*":
				typ = a.Type
			default:
				continue
			}
			out.FHIR = append(out.FHIR, Permission{
				Context: min(p.Context, a.Context),
				Type:    typ,
				Ops:     p.Ops & a.Ops,
			})
		}
	}
	return out.normalize()
}

// withoutContext returns g without the SMART permissions of context c.
func (g Grant) withoutContext(c Context) Grant {
	g.FHIR = slices.DeleteFunc(slices.Clone(g.FHIR), func(p Permission) bool { return p.Context == c })
	return g
}

// WithAdmin returns g with Admin set (for a token whose role is "admin").
func (g Grant) WithAdmin() Grant {
	g.Admin = true
	return g
}
