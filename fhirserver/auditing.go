package fhirserver

// Every interaction the service performs is recorded here, once, after its
// outcome is known: the policy decides inside the interaction, so the
// record names what was decided and what followed (allowed and done,
// refused with 403, not found, invalid …), whoever called — a REST request,
// a Bundle entry (each run as the request it names), or an in-process
// call of the platform endpoints (service.go). The entry points are
// Call.End (REST requests and Bundle entries, each run through a Call) and
// the exported in-process methods; nothing below them records, so an
// interaction's reads of the store, the searches behind a conditional
// write and the types a search's chains reach add no records of their own.

import (
	"context"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// Auditor records the AuditEvent of each interaction (an
// audit.Recorder). Record must not drop an event; its error is the
// auditor's to report (the answer is already decided).
type Auditor interface {
	Record(ctx context.Context, e audit.Event) error
}

// event is the AuditEvent of one interaction, filled in as it proceeds.
type event struct {
	access Access
	vid    string // the version of a vread
	// compartment is the compartment ("Patient/<id>") of a compartment
	// search, whose access names the type searched.
	compartment string
	// query is the search's or conditional write's criteria, as received;
	// the recorder keeps only their names and keyed tags of the values.
	query string
	// ref is the resource the answer was about ("Type/id", from
	// call.named): the resource a create or conditional write made.
	ref string
}

// recorded reports whether interactions are audited.
func (s *Server) recorded() bool { return s.cfg.Auditor != nil }

// record writes ev's AuditEvent with the answer's status; address is the
// caller's when the principal does not carry it (a public or
// unauthenticated request).
func (s *Server) record(ctx context.Context, ev *event, status int, address string) {
	a := ev.access
	e := audit.Event{Subtype: subtypeOf(a.Interaction), Status: status, RequestID: httpserver.RequestID(ctx),
		Agent: audit.Agent{Address: address}}
	if p, ok := auth.FromContext(ctx); ok {
		e.Agent.Who, e.Agent.Role, e.Agent.FHIRUser = p.Subject, p.Role, p.FHIRUser
		if p.ClientID != "" {
			e.Agent.Role = "client"
		}
		if p.Address != "" {
			e.Agent.Address = p.Address
		}
	}
	switch {
	case ev.compartment != "":
		e.Entity = audit.Entity{What: ev.compartment, ResourceType: a.Type, Query: ev.query}
	case a.ID != "" && ev.vid != "":
		e.Entity = audit.Entity{What: a.Type + "/" + a.ID + "/_history/" + ev.vid}
	case a.ID != "":
		e.Entity = audit.Entity{What: a.Type + "/" + a.ID}
	case isSearch(a.Interaction):
		e.Entity = audit.Entity{ResourceType: a.Type, Query: ev.query}
	case isWrite(a.Interaction):
		// A create, or a conditional write: the resource it made or
		// changed when the answer names one, else the type; and a
		// conditional write's criteria (a create's If-None-Exist is a
		// header, not recorded).
		e.Entity = audit.Entity{What: ev.ref, Query: ev.query}
		if ev.ref == "" {
			e.Entity.ResourceType = a.Type
		}
		if a.Interaction == Create {
			e.Entity.Query = ""
		}
	case a.Type != "":
		e.Entity = audit.Entity{ResourceType: a.Type}
	}
	// The answer is decided: a recorder that waits for room must not be
	// cut short by the client leaving.
	if err := s.cfg.Auditor.Record(context.WithoutCancel(ctx), e); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "audit record failed", "request_id", e.RequestID, "err", err)
	}
}

func isSearch(in Interaction) bool { return in == SearchType || in == SearchSystem }

func isWrite(in Interaction) bool {
	return in == Create || in == Update || in == Patch || in == Delete
}

// subtypeOf is the restful-interaction code of an interaction.
func subtypeOf(in Interaction) audit.Code {
	switch in {
	case Read:
		return audit.SubtypeRead
	case VRead:
		return audit.SubtypeVRead
	case Update:
		return audit.SubtypeUpdate
	case Patch:
		return audit.SubtypePatch
	case Delete:
		return audit.SubtypeDelete
	case Create:
		return audit.SubtypeCreate
	case HistoryInstance, HistoryType, HistorySystem:
		return audit.SubtypeHistory
	case SearchType, SearchSystem:
		return audit.SubtypeSearch
	case Capabilities:
		return audit.SubtypeCapabilities
	case Transaction:
		return audit.SubtypeTransaction
	case Batch:
		return audit.SubtypeBatch
	}
	return audit.SubtypeOperation
}

// statusOf is the status the REST API answers err with (200 for none:
// an in-process call that succeeded).
func statusOf(err error, ok int) int {
	if err == nil {
		return ok
	}
	if oe, expected := outcome.As(err); expected {
		return oe.Status
	}
	return toOutcome(err).Status
}

// recordCall records an in-process interaction: a service method defers
// it with a pointer to its error, so that it records once the outcome is
// known. ok is the status the REST interaction answers on success.
func (s *Server) recordCall(ctx context.Context, ev *event, ok int, err *error) {
	if s.recorded() {
		s.record(ctx, ev, statusOf(*err, ok), "")
	}
}

// Audited runs fn as one interaction of this service that the caller has
// authorized by its own policy, and records it once with fn's outcome. It
// is for the platform's work that is no REST interaction of the service
// but is one in effect: DELETE /patients/{id}, allowed by the platform
// policy (patients:write and the role), erases Patient/id through
// ErasePatient, and is recorded as the delete of Patient/id. Nothing
// inside fn may be another in-process interaction (it would be recorded
// too).
func (s *Server) Audited(ctx context.Context, a Access, fn func(context.Context) error) (err error) {
	defer s.recordCall(ctx, &event{access: a}, http.StatusOK, &err)
	return fn(ctx)
}
