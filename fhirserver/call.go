package fhirserver

// The interactions of the FHIR API run through a Call: the REST layer
// (fhirserver/rest) begins one for each request, a Bundle
// (fhirserver/bundle) for each of its entries. A Call knows what its
// request names (the path's type, id and version, the query string); it
// checks and authorizes them, runs one interaction on an input without
// HTTP, and records the interaction's one AuditEvent when it ends. Each
// interaction returns a Response, which the REST layer writes as the HTTP
// answer and a Bundle as the entry's response, so both answer alike.

import (
	"context"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// Request names one interaction as a client asked for it.
type Request struct {
	// Audited is the interaction its AuditEvent names (its Type and ID
	// come from the path).
	Audited Access
	// Type, ID and VID are the path's resource type, id and version.
	Type, ID, VID string
	// CType is the type a compartment search searches; Type and ID then
	// name the compartment.
	CType string
	// Query is the query string as received: a conditional write's
	// criteria, and what the AuditEvent records of a search.
	Query string
}

// Call is one interaction in progress. A Call is used by one goroutine;
// it is a value so that beginning one costs no allocation when nothing is
// audited.
type Call struct {
	s                          *Server
	ctx                        context.Context
	typ, id, vid, ctype, query string
	ev                         *event // nil: not audited
}

// Begin starts the interaction r names, on behalf of the caller behind
// ctx (its auth.Principal).
func (s *Server) Begin(ctx context.Context, r Request) Call {
	c := Call{s: s, ctx: ctx, typ: r.Type, id: r.ID, vid: r.VID, ctype: r.CType, query: r.Query}
	if s.recorded() {
		c.ev = &event{access: r.Audited, vid: r.VID, query: r.Query}
		c.ev.access.Type, c.ev.access.ID = r.Type, r.ID
		if r.CType != "" {
			c.ev.compartment = r.Type + "/" + r.ID
			c.ev.access.Type, c.ev.access.ID = r.CType, ""
		}
	}
	return c
}

// Type is the resource type the path names ("" for the base).
func (c *Call) Type() string { return c.typ }

// Admit checks the path's resource type (404 when unknown) and id (400
// when malformed) and authorizes in on them. in is "" for an interaction
// that authorizes itself once it knows what it touches (a Bundle, an
// operation, a compartment search).
func (c *Call) Admit(in Interaction) error {
	if c.typ != "" && !profiles.IsResourceType(c.typ) {
		return unknownType(c.typ)
	}
	if c.id != "" && !fhirjson.ValidID(c.id) {
		return invalidID(c.id)
	}
	if in == "" {
		return nil
	}
	return c.Authorize(Access{Interaction: in, Type: c.typ, ID: c.id})
}

// Authorize checks a against the caller's grant: the one enforcement
// point of the policy (Server.authorize).
func (c *Call) Authorize(a Access) error { return c.s.authorize(c.ctx, a) }

// AuditAs names the interaction the AuditEvent records, once it is known
// from the body: a Bundle posted to the base is a transaction.
func (c *Call) AuditAs(in Interaction) {
	if c.ev != nil {
		c.ev.access.Interaction = in
	}
}

// Audited reports whether the interaction is recorded when it ends.
func (c *Call) Audited() bool { return c.ev != nil }

// End records the interaction's AuditEvent with the status it was
// answered with; address is the caller's network address, recorded when
// the principal does not carry one.
func (c *Call) End(status int, address string) {
	if c.ev != nil {
		c.s.record(c.ctx, c.ev, status, address)
	}
}

// named records the resource the answer is about in the AuditEvent: the
// resource a create or a conditional write made.
func (c *Call) named(v *store.Version) {
	if c.ev != nil {
		c.ev.ref = v.Type + "/" + v.ID
	}
}

// Response is an interaction's answer, what Bundle.entry.response holds:
// the REST layer sends it as the HTTP answer, a Bundle as the entry's.
type Response struct {
	Status int
	// Version is the version the answer is about: its ETag, and unless it
	// is a tombstone its Last-Modified and the resource the answer names.
	// nil: none.
	Version *store.Version
	// Location is where a created resource, or the one a conditional
	// create matched, is.
	Location string
	// Body is the resource, Bundle or OperationOutcome answered (compact
	// JSON); nil: none.
	Body []byte
}
