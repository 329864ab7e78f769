package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/profiles"
)

// Partition is the store namespace a request touches.
type Partition uint8

// The partitions (DESIGN.md "Partitions").
const (
	PartitionClinical Partition = iota + 1
	PartitionWorkforce
	PartitionAudit
)

var partitionNames = [...]string{PartitionClinical: "clinical", PartitionWorkforce: "workforce", PartitionAudit: "audit"}

func (p Partition) String() string {
	if p >= PartitionClinical && p <= PartitionAudit {
		return partitionNames[p]
	}
	return "invalid"
}

// The platform endpoint classes (Request.Endpoint).
const (
	EndpointPatients  = "patients"  // /patients
	EndpointTele      = "tele"      // /v1/tele/*
	EndpointWorkforce = "workforce" // /workforce/*
)

// Request is one thing to authorize. A FHIR interaction is described by
// Partition, Op and Type; a platform endpoint by Partition, Op and Endpoint.
// Bundle entries, _include/_revinclude targets and compartment searches are
// each authorized as a Request of their own (see Interactions).
type Request struct {
	Partition Partition
	// Op holds exactly one of OpCreate, OpRead, OpUpdate, OpDelete, OpSearch.
	Op Op
	// Type is the FHIR resource type; "" for a system-level interaction,
	// which concerns every type and so needs a grant on every type.
	Type string
	// Endpoint is the platform endpoint class (EndpointPatients, …), or ""
	// for a FHIR request. When set, Type is ignored.
	Endpoint string
	// Admin marks an admin-only action ($reindex, managing users, clients
	// or keys).
	Admin bool
	// Role is the caller's role (Principal.Role), for the rules that need
	// a role besides a scope (the erasure of a patient).
	Role string
}

func (r Request) String() string {
	target := r.Type
	switch {
	case r.Admin:
		target = "admin action"
	case r.Endpoint != "":
		target = "/" + r.Endpoint
	case r.Type == "":
		target = "system level"
	}
	return fmt.Sprintf("%s %s in the %s partition", r.Op.words(), target, r.Partition)
}

// Denied is the error Allows returns. Need says which grant would have
// allowed the request, for the 403 response.
type Denied struct {
	Request Request
	Need    string
}

func (d *Denied) Error() string {
	return "forbidden: " + d.Request.String() + " requires " + d.Need
}

// The financial resource types: writing them needs payments:write (or a
// SMART write permission on the type); patients:write does not reach them.
var financialTypes = []string{"Claim", "Coverage", "Invoice", "PaymentNotice", "PaymentReconciliation"}

// The resource types behind /v1/tele: rooms are Encounters, bookings are
// Appointments (with their responses and the Schedules and Slots they are
// booked in), chats are Communications.
var (
	teleReadTypes  = []string{"Appointment", "AppointmentResponse", "Communication", "Encounter", "Schedule", "Slot"}
	teleWriteTypes = []string{"Appointment", "AppointmentResponse", "Communication", "Encounter"}
)

// policyTarget says which requests a rule is about.
type policyTarget uint8

const (
	targetAny          policyTarget = iota + 1 // any resource type, or system level
	targetNonFinancial                         // any resource type except financialTypes
	targetFinancial                            // financialTypes
	targetTeleRead                             // teleReadTypes
	targetTeleWrite                            // teleWriteTypes
	targetEndpoint                             // the platform endpoint rule.endpoint
	targetAdmin                                // Request.Admin
)

// policyNeed says what a rule requires of the grant.
type policyNeed uint8

const (
	needScope        policyNeed = iota + 1 // the platform scope rule.scope
	needSMART                              // a SMART permission on the type (or "*") with the op
	needAdmin                              // Grant.Admin
	needNever                              // nothing allows it
	needScopeAndRole                       // the platform scope rule.scope and one of rule.roles
)

type policyRule struct {
	partitions []Partition
	target     policyTarget
	endpoint   string
	ops        Op
	need       policyNeed
	scope      Platform
	roles      []string // needScopeAndRole: the roles that qualify
	note       string
	// planned: the rule is decided, but what it guards is not served yet
	// (the table says so, so that it lists nothing as if it existed).
	planned bool
}

var (
	partsAll       = []Partition{PartitionClinical, PartitionWorkforce, PartitionAudit}
	partsClinical  = []Partition{PartitionClinical}
	partsWorkforce = []Partition{PartitionWorkforce}
	partsAudit     = []Partition{PartitionAudit}
)

// policyRules is the authorization table: a request is allowed when at least
// one rule matches it and the grant satisfies that rule. Nothing else grants.
var policyRules = []policyRule{
	{partitions: partsClinical, target: targetAny, ops: OpAll, need: needSMART,
		note: "any context; patient/ scopes are further limited to the launch patient's compartment"},
	{partitions: partsClinical, target: targetAny, ops: OpReadSearch, need: needScope, scope: PatientsRead},
	{partitions: partsClinical, target: targetNonFinancial, ops: OpWrite, need: needScope, scope: PatientsWrite},
	{partitions: partsClinical, target: targetFinancial, ops: OpWrite, need: needScope, scope: PaymentsWrite},
	{partitions: partsClinical, target: targetTeleRead, ops: OpReadSearch, need: needScope, scope: ConsultationsRead},
	{partitions: partsClinical, target: targetTeleWrite, ops: OpCreate | OpUpdate, need: needScope, scope: ConsultationsWrite},
	{partitions: partsClinical, target: targetEndpoint, endpoint: EndpointPatients, ops: OpReadSearch, need: needScope, scope: PatientsRead},
	{partitions: partsClinical, target: targetEndpoint, endpoint: EndpointPatients, ops: OpCreate | OpUpdate, need: needScope, scope: PatientsWrite},
	{partitions: partsClinical, target: targetEndpoint, endpoint: EndpointPatients, ops: OpDelete, need: needScopeAndRole, scope: PatientsWrite,
		roles: []string{RoleAdmin, RolePrivacyOfficer}, note: "DELETE /patients/{id} anonymizes (right to erasure)"},
	{partitions: partsClinical, target: targetEndpoint, endpoint: EndpointTele, ops: OpReadSearch, need: needScope, scope: ConsultationsRead, planned: true},
	{partitions: partsClinical, target: targetEndpoint, endpoint: EndpointTele, ops: OpWrite, need: needScope, scope: ConsultationsWrite, planned: true},
	{partitions: partsWorkforce, target: targetAny, ops: OpReadSearch, need: needScope, scope: WorkforceRead,
		note: "clinical and SMART scopes never reach this partition"},
	{partitions: partsWorkforce, target: targetAny, ops: OpWrite, need: needScope, scope: WorkforceWrite},
	{partitions: partsWorkforce, target: targetEndpoint, endpoint: EndpointWorkforce, ops: OpReadSearch, need: needScope, scope: WorkforceRead},
	{partitions: partsWorkforce, target: targetEndpoint, endpoint: EndpointWorkforce, ops: OpWrite, need: needScope, scope: WorkforceWrite},
	{partitions: partsAudit, target: targetAny, ops: OpReadSearch, need: needAdmin},
	{partitions: partsAudit, target: targetAny, ops: OpWrite, need: needNever,
		note: "the audit recorder appends internally, without authorization"},
	{partitions: partsAll, target: targetAdmin, ops: OpAll, need: needAdmin,
		note: "$reindex, users, clients, keys"},
}

// matches reports whether rule x is about request r.
func (x policyRule) matches(r Request) bool {
	if !slices.Contains(x.partitions, r.Partition) || x.ops&r.Op == 0 {
		return false
	}
	if r.Admin {
		return x.target == targetAdmin
	}
	if r.Endpoint != "" {
		return x.target == targetEndpoint && x.endpoint == r.Endpoint
	}
	switch x.target {
	case targetAny:
		return true
	case targetNonFinancial:
		return r.Type != "" && !slices.Contains(financialTypes, r.Type)
	case targetFinancial:
		return slices.Contains(financialTypes, r.Type)
	case targetTeleRead:
		return slices.Contains(teleReadTypes, r.Type)
	case targetTeleWrite:
		return slices.Contains(teleWriteTypes, r.Type)
	}
	return false
}

// satisfied reports whether g meets rule x for request r.
func (x policyRule) satisfied(g Grant, r Request) bool {
	switch x.need {
	case needScope:
		return g.Platform&x.scope != 0
	case needScopeAndRole:
		return g.Platform&x.scope != 0 && slices.Contains(x.roles, r.Role)
	case needAdmin:
		return g.Admin
	case needSMART:
		for _, p := range g.FHIR {
			if p.Ops&r.Op != 0 && (p.Type == "*" || (r.Type != "" && p.Type == r.Type)) {
				return true
			}
		}
	}
	return false
}

// needFor describes what rule x requires for request r.
func (x policyRule) needFor(r Request) string {
	switch x.need {
	case needScope:
		return x.scope.String()
	case needScopeAndRole:
		return x.scope.String() + " and the role " + strings.Join(x.roles, " or ")
	case needAdmin:
		return "the admin role"
	case needSMART:
		if r.Type == "" {
			return "a SMART scope on all types, e.g. user/*." + r.Op.String()
		}
		return fmt.Sprintf("a SMART scope such as user/%s.%s or user/*.%s", r.Type, r.Op, r.Op)
	}
	return ""
}

// Allows reports whether g allows r: nil, or a *Denied that says which
// grant was needed. It is the single decision point: every interaction,
// every Bundle entry and every _include/_revinclude target goes through it.
// SMART contexts are not checked here; see NeedsPatientCompartment.
func (g Grant) Allows(r Request) error {
	if !r.Op.single() {
		return &Denied{Request: r, Need: "a single interaction kind (invalid request)"}
	}
	if r.Partition < PartitionClinical || r.Partition > PartitionAudit {
		return &Denied{Request: r, Need: "a known partition (invalid request)"}
	}
	if !r.Admin && r.Endpoint == "" && r.Type != "" && !profiles.IsResourceType(r.Type) {
		return &Denied{Request: r, Need: "a known resource type (invalid request)"}
	}
	var needs []string
	for _, x := range policyRules {
		if !x.matches(r) {
			continue
		}
		if x.satisfied(g, r) {
			return nil
		}
		if n := x.needFor(r); n != "" && !slices.Contains(needs, n) {
			needs = append(needs, n)
		}
	}
	if len(needs) == 0 {
		return &Denied{Request: r, Need: "a grant that does not exist: this is never allowed"}
	}
	return &Denied{Request: r, Need: strings.Join(needs, " or ")}
}

// NeedsPatientCompartment reports whether g allows r only through patient/
// SMART permissions. The caller must then restrict r to the compartment of
// the token's launch patient (and refuse it when there is none).
func (g Grant) NeedsPatientCompartment(r Request) bool {
	return g.Allows(r) == nil && g.withoutContext(ContextPatient).Allows(r) != nil
}

// Interaction says how one kind of FHIR interaction or operation is
// authorized: as which Op on which type, or as an admin-only action.
type Interaction struct {
	Name  string // e.g. "history-instance" or "$everything"
	Op    Op     // the Op of the main Request; 0 when not authorized as one (see How)
	Also  Op     // another Op the interaction needs on the same type (0: none)
	Admin bool
	How   string // what the caller authorizes, for the documentation
}

// interactions lists every FHIR interaction and the operations Kiln
// implements. Operations not listed are refused (LookupInteraction reports
// false).
var policyInteractions = []Interaction{
	{Name: "read", Op: OpRead, How: "read on the type"},
	{Name: "vread", Op: OpRead, How: "read on the type"},
	{Name: "history-instance", Op: OpRead, How: "read on the type"},
	{Name: "history-type", Op: OpSearch, How: "search on the type"},
	{Name: "history-system", Op: OpSearch, How: "search at system level (`Type == \"\"`)"},
	{Name: "search-type", Op: OpSearch, How: "search on the type, and search on each `_include`/`_revinclude` target type"},
	{Name: "search-system", Op: OpSearch, How: "search at system level (`Type == \"\"`), or search on each type listed in `_type`"},
	{Name: "search-compartment", Op: OpSearch, How: "read on the compartment resource (e.g. Patient) and search on each type searched"},
	{Name: "create", Op: OpCreate, How: "create on the type; a conditional create also needs search on the type"},
	{Name: "update", Op: OpUpdate, How: "update on the type; create too when the update creates; conditional: also search"},
	{Name: "patch", Op: OpUpdate, Also: OpRead, How: "update and read on the type (the answer holds the resource, and a JSON Patch `test` would reveal its values)"},
	{Name: "delete", Op: OpDelete, How: "delete on the type; conditional: also search"},
	{Name: "batch", Op: 0, How: "each entry as its own interaction; refused entries fail alone"},
	{Name: "transaction", Op: 0, How: "each entry as its own interaction; one refused entry refuses the whole transaction"},
	{Name: "capabilities", Op: 0, How: "public (`GET /fhir/metadata` needs no token)"},
	{Name: "$everything", Op: OpRead, How: "read on Patient, and search on each type returned"},
	{Name: "$export", Op: OpSearch, How: "search at system level, on Patient (patient-level) or per `_type`"},
	{Name: "$validate", Op: OpRead, How: "read on the type (nothing is stored)"},
	{Name: "$meta", Op: OpRead, How: "read on the type"},
	{Name: "$expand", Op: OpRead, How: "read on ValueSet"},
	{Name: "$lookup", Op: OpRead, How: "read on CodeSystem"},
	{Name: "$validate-code", Op: OpRead, How: "read on ValueSet or CodeSystem"},
	{Name: "$reindex", Admin: true, Op: OpUpdate, How: "admin-only action"},
}

// LookupInteraction returns how the interaction or operation name (e.g.
// "patch", "$everything") is authorized; false for one Kiln does not know,
// which must be refused.
func LookupInteraction(name string) (Interaction, bool) {
	i := slices.IndexFunc(policyInteractions, func(x Interaction) bool { return x.Name == name })
	if i < 0 {
		return Interaction{}, false
	}
	return policyInteractions[i], true
}

func (x policyRule) targetText() string {
	switch x.target {
	case targetAny:
		return "any resource type, or system level"
	case targetNonFinancial:
		return "any resource type except the financial ones"
	case targetFinancial:
		return "financial: " + strings.Join(financialTypes, ", ")
	case targetTeleRead:
		return strings.Join(teleReadTypes, ", ")
	case targetTeleWrite:
		return strings.Join(teleWriteTypes, ", ")
	case targetEndpoint:
		switch x.endpoint {
		case EndpointPatients:
			return "endpoint `/patients`"
		case EndpointTele:
			return "endpoint `/v1/tele/*`"
		case EndpointWorkforce:
			return "endpoint `/workforce/*`"
		}
	case targetAdmin:
		return "admin-only action"
	}
	return "?"
}

func (x policyRule) needText() string {
	switch x.need {
	case needScope:
		return "`" + x.scope.String() + "`"
	case needSMART:
		return "SMART `<context>/<Type>.<op>` or `<context>/*.<op>` (v1 or v2); system level needs `*`"
	case needScopeAndRole:
		return "`" + x.scope.String() + "` and role `" + strings.Join(x.roles, "` or `") + "`"
	case needAdmin:
		return "role `admin`"
	case needNever:
		return "never"
	}
	return "?"
}

// PolicyTable renders the authorization table as Markdown: one row per rule.
// A request is allowed when any row matching it is satisfied.
func PolicyTable() string {
	var b strings.Builder
	b.WriteString("| Partition | Target | Interactions | Grant needed | Note |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, x := range policyRules {
		var parts []string
		for _, p := range x.partitions {
			parts = append(parts, p.String())
		}
		ops := x.ops.words()
		if x.ops == OpAll {
			ops = "all"
		}
		note := x.note
		if x.planned {
			note = strings.TrimPrefix(note+"; planned: not served yet", "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n",
			strings.Join(parts, ", "), x.targetText(), ops, x.needText(), note)
	}
	return b.String()
}

// InteractionTable renders, as Markdown, how each FHIR interaction and
// operation is turned into Requests.
func InteractionTable() string {
	var b strings.Builder
	b.WriteString("| Interaction | Authorized as |\n")
	b.WriteString("|---|---|\n")
	for _, x := range policyInteractions {
		fmt.Fprintf(&b, "| `%s` | %s |\n", x.Name, x.How)
	}
	return b.String()
}
