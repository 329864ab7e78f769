// Package audit records Kiln's AuditEvents: one for every authentication
// attempt and every FHIR or platform interaction, in the shape of IHE Basic
// Audit Log Patterns (BALP), written to the audit partition: an append-only
// Log of its own (the table audit_log of <data>/audit.db, or the collection
// audit_log of the database <db>_audit), one entry per record keyed by its
// seq. The partition is not served through the FHIR API.
//
// The records form a hash chain. Each AuditEvent carries the extension
// https://kiln.example/fhir/StructureDefinition/audit-chain with three
// sub-extensions, always in this order and always last in the resource:
//
//	seq   valueString: the decimal sequence number, 1, 2, 3 …
//	prev  valueString: the hex SHA-256 "hash" of record seq-1
//	      (64 zeros for seq 1)
//	hash  valueString: hex SHA-256( raw 32 bytes of prev ‖ canonical bytes )
//
// The canonical bytes of a record are its stored JSON with the value of the
// hash sub-extension left empty: the stored body in which the one occurrence
// of {"url":"hash","valueString":"<hash>"} is replaced by
// {"url":"hash","valueString":""}. Any other change to the stored bytes,
// even whitespace or the order of elements, changes the hash. Record ids are
// derived from seq ("ae-" and 12 zero-padded digits, e.g. ae-000000000042),
// so they sort in chain order; meta.versionId is always 1. The partition is
// append-only: entries are only added, or removed oldest first by a
// retention Purge.
//
// A Recorder queues events in memory (bounded; Record waits when the queue
// is full, it never drops) and a single writer group-commits them, one
// Log.Append per batch. Verify walks the partition and reports the oldest
// broken record.
package audit

import (
	"strings"
	"time"
)

// Code is a coding: a code of a code system.
type Code struct {
	System, Code, Display string
}

// IsZero reports whether c is unset.
func (c Code) IsZero() bool { return c.System == "" && c.Code == "" }

// Code systems used by the AuditEvents.
const (
	SystemAuditEventType      = "http://terminology.hl7.org/CodeSystem/audit-event-type"
	SystemDICOM               = "http://dicom.nema.org/resources/ontology/DCM"
	SystemRestfulInteraction  = "http://hl7.org/fhir/restful-interaction"
	SystemAuthSubtype         = "https://kiln.example/fhir/CodeSystem/audit-auth-subtype"
	SystemRole                = "https://kiln.example/fhir/CodeSystem/role"
	SystemSubject             = "https://kiln.example/fhir/sid/subject"
	SystemPlatformPath        = "https://kiln.example/fhir/sid/platform-path"
	SystemPartition           = "https://kiln.example/fhir/CodeSystem/partition"
	SystemAuditSourceType     = "http://terminology.hl7.org/CodeSystem/audit-source-type"
	SystemAuditEntityType     = "http://terminology.hl7.org/CodeSystem/audit-entity-type"
	SystemObjectRole          = "http://terminology.hl7.org/CodeSystem/object-role"
	SystemResourceTypes       = "http://hl7.org/fhir/resource-types"
	SystemBALPEntityType      = "https://profiles.ihe.net/ITI/BALP/CodeSystem/BasicAuditEntityType"
	ChainExtensionURL         = "https://kiln.example/fhir/StructureDefinition/audit-chain"
	systemNetworkType         = "http://hl7.org/fhir/network-type"
	networkTypeIPAddress      = "2"
	auditSourceTypeAppServer  = "4"
	entityTypeSystemObject    = "2"
	objectRoleQuery           = "24"
	agentTypeSourceRoleID     = "110153"
	agentTypeSourceRoleIDName = "Source Role ID"
)

// AuditEvent.type values.
var (
	// TypeREST: a FHIR or platform interaction.
	TypeREST = Code{SystemAuditEventType, "rest", "Restful Operation"}
	// TypeUserAuthentication: login, token, logout, revoke, introspect.
	TypeUserAuthentication = Code{SystemDICOM, "110114", "User Authentication"}
	// TypeSecurityAttributesChanged: a machine client's credentials were
	// issued, rotated or expired, or a user's password was reset.
	TypeSecurityAttributesChanged = Code{SystemDICOM, "110137", "User Security Attributes Changed"}
)

// AuditEvent.subtype values for FHIR interactions (and platform endpoints,
// which map onto them).
var (
	SubtypeRead         = interaction("read")
	SubtypeVRead        = interaction("vread")
	SubtypeUpdate       = interaction("update")
	SubtypePatch        = interaction("patch")
	SubtypeDelete       = interaction("delete")
	SubtypeHistory      = interaction("history")
	SubtypeCreate       = interaction("create")
	SubtypeSearch       = interaction("search")
	SubtypeCapabilities = interaction("capabilities")
	SubtypeTransaction  = interaction("transaction")
	SubtypeBatch        = interaction("batch")
	SubtypeOperation    = interaction("operation")
)

// AuditEvent.subtype values for authentication (type 110114) and for the
// client secret lifecycle (type 110137), from Kiln's code system
// SystemAuthSubtype.
var (
	SubtypeLogin        = authSubtype("login", "Password login (POST /auth/login)")
	SubtypeToken        = authSubtype("token", "Token request (POST /auth/token)")
	SubtypeLogout       = authSubtype("logout", "Logout (POST /auth/logout)")
	SubtypeRevoke       = authSubtype("revoke", "Token revocation (POST /auth/revoke)")
	SubtypeIntrospect   = authSubtype("introspect", "Token introspection (POST /auth/introspect)")
	SubtypeClientIssue  = authSubtype("client-issue", "Client credential issued")
	SubtypeClientRotate = authSubtype("client-rotate", "Client credential rotated")
	SubtypeClientExpire = authSubtype("client-expire", "Client credential expired")
	// SubtypeClientIntrospect: a client became a resource server (or
	// stopped being one), allowed to introspect any token.
	SubtypeClientIntrospect = authSubtype("client-introspect", "Client introspection right changed")
	// SubtypePasswordReset: an administrator reset a user's password
	// (kiln admin user password).
	SubtypePasswordReset = authSubtype("password-reset", "User password reset")
	// SubtypePurge: a retention checkpoint, written before the records it
	// names are purged.
	SubtypePurge = authSubtype("purge", "Audit records past retention purged")
)

func interaction(code string) Code { return Code{System: SystemRestfulInteraction, Code: code} }

func authSubtype(code, display string) Code {
	return Code{System: SystemAuthSubtype, Code: code, Display: display}
}

// Action is AuditEvent.action.
type Action string

const (
	ActionCreate  Action = "C"
	ActionRead    Action = "R"
	ActionUpdate  Action = "U"
	ActionDelete  Action = "D"
	ActionExecute Action = "E"
)

// Outcome is AuditEvent.outcome.
type Outcome string

const (
	OutcomeSuccess Outcome = "0"
	OutcomeMinor   Outcome = "4" // the request failed, e.g. any 4xx
	OutcomeSerious Outcome = "8" // the server failed, e.g. any 5xx
)

// Event is what the server reports for one authentication attempt or one
// interaction. It must never hold an email address, a password, a secret or
// a token: subjects are ids ("user/<id>", "client/<id>").
type Event struct {
	// Time of the interaction (AuditEvent.recorded); zero: when Record is
	// called.
	Time time.Time
	// Type is AuditEvent.type; zero: derived from Subtype (TypeREST for
	// restful-interaction codes, TypeUserAuthentication for login, token,
	// logout, revoke, introspect, TypeSecurityAttributesChanged for the
	// client-* codes).
	Type Code
	// Subtype is the interaction, one of the Subtype* values.
	Subtype Code
	// Action; empty: derived from Subtype (create C; read, vread, history,
	// capabilities R; update, patch U; delete D; search, transaction,
	// batch, operation and the authentication codes E as in BALP;
	// client-issue C, client-rotate U, client-expire D).
	Action Action
	// Status is the HTTP status of the response (0: none, e.g. a
	// background expiry).
	Status int
	// Outcome; empty: derived from Status (< 400: 0, 4xx: 4, >= 500: 8).
	Outcome Outcome
	// Agent is who made the request.
	Agent Agent
	// Entity is what the request was about.
	Entity Entity
	// RequestID is the request's X-Request-Id, recorded as a BALP
	// XrequestId entity.
	RequestID string
	// Partition is the partition whose FHIR service recorded the event
	// ("clinical", "workforce"; empty for the issuer's events), a
	// source.type coding of SystemPartition: audit exports select by it.
	Partition string
	// Purged, on a retention checkpoint (SubtypePurge), names the newest
	// record the purge removes and its hash: Verify then accepts a chain
	// that starts right after it.
	Purged *Checkpoint
}

// Checkpoint is the last record a retention purge removed.
type Checkpoint struct {
	Seq  int64
	Hash string
}

// Agent is the requestor.
type Agent struct {
	// Who is the subject: "user/<id>", "client/<id>", or "" when unknown
	// (e.g. a failed login with an unknown email: the email is never
	// recorded). A value containing '@' is replaced by "redacted".
	Who string
	// Role is the user's role (admin, provider, …) or "client".
	Role string
	// FHIRUser is the subject's fhirUser reference, e.g. Practitioner/7.
	FHIRUser string
	// Address is the client IP.
	Address string
}

// Entity is the object of the interaction.
type Entity struct {
	// What is a FHIR reference: "Patient/123", "Patient/123/_history/2".
	What string
	// ResourceType is the type of a type-level interaction (search,
	// create, history of a type) when What is empty.
	ResourceType string
	// Path is the platform endpoint's path template, e.g.
	// "/v1/tele/sessions/{id}", for interactions outside /fhir.
	Path string
	// Query is the raw query string of a search. The Recorder records it
	// keyed (KeyedQuery: names kept, each value replaced by its HMAC tag),
	// base64-encoded in entity.query as FHIR requires.
	Query string
}

// normalize fills the derived fields.
func (e Event) normalize() Event {
	if e.Type.IsZero() {
		e.Type = typeOf(e.Subtype)
	}
	if e.Action == "" {
		e.Action = actionOf(e.Subtype)
	}
	if e.Outcome == "" {
		switch {
		case e.Status >= 500:
			e.Outcome = OutcomeSerious
		case e.Status >= 400:
			e.Outcome = OutcomeMinor
		default:
			e.Outcome = OutcomeSuccess
		}
	}
	if strings.Contains(e.Agent.Who, "@") {
		e.Agent.Who = "redacted"
	}
	return e
}

func typeOf(sub Code) Code {
	switch sub.System {
	case SystemRestfulInteraction:
		return TypeREST
	case SystemAuthSubtype:
		if strings.HasPrefix(sub.Code, "client-") || sub.Code == "password-reset" {
			return TypeSecurityAttributesChanged
		}
		return TypeUserAuthentication
	}
	return TypeREST
}

func actionOf(sub Code) Action {
	switch sub.Code {
	case "create", "client-issue":
		return ActionCreate
	case "read", "vread", "history", "capabilities":
		return ActionRead
	case "update", "patch", "client-rotate", "client-introspect", "password-reset":
		return ActionUpdate
	case "delete", "client-expire":
		return ActionDelete
	}
	return ActionExecute
}
