package fhirserver

import "context"

// Interaction names a FHIR RESTful interaction, with the codes the
// CapabilityStatement uses.
type Interaction string

// Interactions implemented by the server. Routes are registered from this
// list, and the CapabilityStatement is generated from the same routes, so it
// can never claim one that does not work.
const (
	Read            Interaction = "read"
	VRead           Interaction = "vread"
	Update          Interaction = "update"
	Delete          Interaction = "delete"
	HistoryInstance Interaction = "history-instance"
	HistoryType     Interaction = "history-type"
	Create          Interaction = "create"
	HistorySystem   Interaction = "history-system"
	Capabilities    Interaction = "capabilities"
	SearchType      Interaction = "search-type"
	SearchSystem    Interaction = "search-system"
	Patch           Interaction = "patch"
	Transaction     Interaction = "transaction"
	Batch           Interaction = "batch"
	// Operation is an extended operation; Access.Operation names it.
	Operation Interaction = "operation"
)

// Access describes one interaction a caller attempts, for authorization.
type Access struct {
	Interaction Interaction
	Type        string // resource type; "" for system-level interactions
	ID          string // "" unless the interaction names one resource
	Operation   string // the operation's name, e.g. "$everything"
}

// Authorizer decides whether the caller behind ctx may perform an
// interaction. It is the single enforcement point of scopes: every
// interaction the server performs passes through Server.authorize, which
// calls it. A nil Authorizer allows everything (no authentication configured).
type Authorizer interface {
	Authorize(ctx context.Context, a Access) error
}
