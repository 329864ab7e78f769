package auth

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updatePolicyDoc = flag.Bool("update-doc", false, "rewrite the generated tables in docs/authorization.md")

func mustParseScopes(t *testing.T, scopes string) Grant {
	t.Helper()
	g, rejected := ParseScopes(scopes)
	if len(rejected) != 0 {
		t.Fatalf("ParseScopes(%q) rejected %q", scopes, rejected)
	}
	return g
}

var (
	policyOps    = []Op{OpCreate, OpRead, OpUpdate, OpDelete, OpSearch}
	policyReads  = []Op{OpRead, OpSearch}
	policyWrites = []Op{OpCreate, OpUpdate, OpDelete}
)

func isReadOp(op Op) bool { return op&OpReadSearch != 0 }

func TestAllowsEndpoints(t *testing.T) {
	endpoints := []struct {
		endpoint  string
		partition Partition
		read      Platform
		write     Platform
	}{
		{EndpointPatients, PartitionClinical, PatientsRead, PatientsWrite},
		{EndpointTele, PartitionClinical, ConsultationsRead, ConsultationsWrite},
		{EndpointWorkforce, PartitionWorkforce, WorkforceRead, WorkforceWrite},
	}
	for _, e := range endpoints {
		for i := range platformNames {
			scope := Platform(1 << i)
			g := Grant{Platform: scope}
			for _, op := range policyOps {
				r := Request{Partition: e.partition, Endpoint: e.endpoint, Op: op, Role: RoleAdmin}
				want := (isReadOp(op) && scope == e.read) || (!isReadOp(op) && scope == e.write)
				if err := g.Allows(r); (err == nil) != want {
					t.Errorf("%s: %v: got %v, want allowed=%v", scope, r, err, want)
				}
			}
		}
		// SMART scopes and admin never open a platform endpoint.
		g := mustParseScopes(t, "system/*.cruds user/*.cruds patient/*.cruds").WithAdmin()
		for _, op := range policyOps {
			if err := g.Allows(Request{Partition: e.partition, Endpoint: e.endpoint, Op: op}); err == nil {
				t.Errorf("SMART scopes allowed %s %v", e.endpoint, op)
			}
		}
		// An endpoint asked for in the wrong partition matches no rule.
		other := PartitionWorkforce
		if e.partition == PartitionWorkforce {
			other = PartitionClinical
		}
		all := AllScopes(ContextSystem).WithAdmin()
		if err := all.Allows(Request{Partition: other, Endpoint: e.endpoint, Op: OpRead}); err == nil {
			t.Errorf("%s allowed in the %s partition", e.endpoint, other)
		}
	}
}

// Erasing a patient (DELETE /patients/{id}) needs patients:write and a
// privacy-capable role; the other writes of /patients need the scope only.
func TestAllowsPatientErasure(t *testing.T) {
	write := Grant{Platform: PatientsWrite}
	for _, tt := range []struct {
		g    Grant
		role string
		op   Op
		want bool
	}{
		{write, RoleAdmin, OpDelete, true},
		{write, RolePrivacyOfficer, OpDelete, true},
		{write, RoleProvider, OpDelete, false},
		{write, RoleWorkforceOfficer, OpDelete, false},
		{write, "", OpDelete, false},
		{Grant{Platform: PatientsRead}, RolePrivacyOfficer, OpDelete, false},
		{AllScopes(ContextUser).WithAdmin(), "", OpDelete, false},
		{write, RoleProvider, OpCreate, true},
		{write, "", OpUpdate, true},
	} {
		r := Request{Partition: PartitionClinical, Endpoint: EndpointPatients, Op: tt.op, Role: tt.role}
		err := tt.g.Allows(r)
		if (err == nil) != tt.want {
			t.Errorf("%v as %q with %s: %v, want allowed=%v", r, tt.role, tt.g, err, tt.want)
		}
		var d *Denied
		if err != nil && tt.op == OpDelete && (!errors.As(err, &d) || !strings.Contains(d.Need, "privacy_officer")) {
			t.Errorf("Denied = %v", err)
		}
	}
}

func TestAllowsPartitionIsolation(t *testing.T) {
	clinicalScopes := mustParseScopes(t, "patients:read patients:write consultations:read consultations:write payments:write system/*.cruds user/*.cruds patient/*.cruds")
	workforceScopes := mustParseScopes(t, "workforce:read workforce:write")
	for _, typ := range []string{"", "Patient", "Observation", "Organization", "Claim"} {
		for _, op := range policyOps {
			if typ == "" && !isReadOp(op) {
				continue
			}
			w := Request{Partition: PartitionWorkforce, Type: typ, Op: op}
			if err := clinicalScopes.Allows(w); err == nil {
				t.Errorf("clinical scopes allowed %v", w)
			}
			if err := workforceScopes.Allows(w); err != nil {
				t.Errorf("workforce scopes refused %v: %v", w, err)
			}
			c := Request{Partition: PartitionClinical, Type: typ, Op: op}
			if err := workforceScopes.Allows(c); err == nil {
				t.Errorf("workforce scopes allowed %v", c)
			}
			if err := clinicalScopes.Allows(c); err != nil {
				t.Errorf("clinical scopes refused %v: %v", c, err)
			}
		}
	}
	// workforce:read does not write, workforce:write does not read.
	r := mustParseScopes(t, "workforce:read")
	w := mustParseScopes(t, "workforce:write")
	for _, op := range policyOps {
		req := Request{Partition: PartitionWorkforce, Type: "Observation", Op: op}
		if (r.Allows(req) == nil) != isReadOp(op) || (w.Allows(req) == nil) == isReadOp(op) {
			t.Errorf("workforce read/write split wrong for %v", req)
		}
	}
}

func TestAllowsClinical(t *testing.T) {
	tests := []struct {
		scopes string
		req    Request
		want   bool
	}{
		// patients:read: read and search on every type, system level too.
		{"patients:read", Request{Type: "Observation", Op: OpRead}, true},
		{"patients:read", Request{Type: "Claim", Op: OpSearch}, true},
		{"patients:read", Request{Type: "", Op: OpSearch}, true},
		{"patients:read", Request{Type: "Patient", Op: OpCreate}, false},
		// patients:write: writes except financial ones; no reads.
		{"patients:write", Request{Type: "Patient", Op: OpCreate}, true},
		{"patients:write", Request{Type: "Condition", Op: OpUpdate}, true},
		{"patients:write", Request{Type: "Patient", Op: OpDelete}, true},
		{"patients:write", Request{Type: "Patient", Op: OpRead}, false},
		{"patients:write", Request{Type: "", Op: OpCreate}, false},
		// Financial writes.
		{"payments:write", Request{Type: "Claim", Op: OpCreate}, true},
		{"payments:write", Request{Type: "PaymentReconciliation", Op: OpDelete}, true},
		{"payments:write", Request{Type: "Claim", Op: OpRead}, false},
		{"payments:write", Request{Type: "Patient", Op: OpCreate}, false},
		{"user/Claim.c", Request{Type: "Claim", Op: OpCreate}, true},
		{"user/*.cud", Request{Type: "Invoice", Op: OpUpdate}, true},
		// consultations.
		{"consultations:read", Request{Type: "Encounter", Op: OpRead}, true},
		{"consultations:read", Request{Type: "Slot", Op: OpSearch}, true},
		{"consultations:read", Request{Type: "Observation", Op: OpRead}, false},
		{"consultations:read", Request{Type: "", Op: OpSearch}, false},
		{"consultations:read", Request{Type: "Encounter", Op: OpUpdate}, false},
		{"consultations:write", Request{Type: "Communication", Op: OpCreate}, true},
		{"consultations:write", Request{Type: "Appointment", Op: OpUpdate}, true},
		{"consultations:write", Request{Type: "Appointment", Op: OpDelete}, false},
		{"consultations:write", Request{Type: "Slot", Op: OpCreate}, false},
		{"consultations:write", Request{Type: "Appointment", Op: OpRead}, false},
		// SMART, by type and op, any context.
		{"patient/Observation.read", Request{Type: "Observation", Op: OpSearch}, true},
		{"patient/Observation.read", Request{Type: "Observation", Op: OpCreate}, false},
		{"patient/Observation.read", Request{Type: "Condition", Op: OpRead}, false},
		{"user/Patient.rs", Request{Type: "Patient", Op: OpRead}, true},
		{"user/Patient.r", Request{Type: "Patient", Op: OpSearch}, false},
		{"system/*.cruds", Request{Type: "Coverage", Op: OpDelete}, true},
		// System level needs a wildcard.
		{"user/Patient.rs user/Observation.rs", Request{Type: "", Op: OpSearch}, false},
		{"user/*.s", Request{Type: "", Op: OpSearch}, true},
		{"user/*.r", Request{Type: "", Op: OpSearch}, false},
		// Invalid requests.
		{"system/*.cruds patients:read", Request{Type: "NotAType", Op: OpRead}, false},
		{"system/*.cruds patients:read", Request{Type: "Patient", Op: OpRead | OpSearch}, false},
		{"system/*.cruds patients:read", Request{Type: "Patient", Op: 0}, false},
		{"system/*.cruds patients:read", Request{Partition: 9, Type: "Patient", Op: OpRead}, false},
		// Platform endpoints ignore Type.
		{"patients:read", Request{Endpoint: EndpointPatients, Type: "NotAType", Op: OpRead}, true},
	}
	for _, tt := range tests {
		g := mustParseScopes(t, tt.scopes)
		if tt.req.Partition == 0 {
			tt.req.Partition = PartitionClinical
		}
		err := g.Allows(tt.req)
		if (err == nil) != tt.want {
			t.Errorf("%q allows %v: got %v, want allowed=%v", tt.scopes, tt.req, err, tt.want)
		}
		var d *Denied
		if err != nil && (!errors.As(err, &d) || d.Need == "" || !strings.Contains(err.Error(), d.Need)) {
			t.Errorf("%q allows %v: error %v is not a *Denied with a need", tt.scopes, tt.req, err)
		}
	}
}

func TestDeniedNeed(t *testing.T) {
	err := mustParseScopes(t, "patients:read").Allows(Request{Partition: PartitionClinical, Type: "Patient", Op: OpCreate})
	var d *Denied
	if !errors.As(err, &d) || !strings.Contains(d.Need, "patients:write") || !strings.Contains(d.Need, "user/Patient.c") {
		t.Errorf("Denied = %v", err)
	}
	err = Grant{}.Allows(Request{Partition: PartitionClinical, Type: "Claim", Op: OpUpdate})
	if !errors.As(err, &d) || !strings.Contains(d.Need, "payments:write") || strings.Contains(d.Need, "patients:write") {
		t.Errorf("Denied = %v", err)
	}
	err = Grant{}.Allows(Request{Partition: PartitionWorkforce, Endpoint: EndpointWorkforce, Op: OpRead})
	if !errors.As(err, &d) || d.Need != "workforce:read" {
		t.Errorf("Denied = %v", err)
	}
}

func TestAllowsAuditAndAdmin(t *testing.T) {
	all := AllScopes(ContextSystem)
	admin := Grant{}.WithAdmin()
	for _, op := range policyOps {
		r := Request{Partition: PartitionAudit, Type: "AuditEvent", Op: op}
		if err := all.Allows(r); err == nil {
			t.Errorf("every scope without admin allowed %v", r)
		}
		if err := admin.Allows(r); (err == nil) != isReadOp(op) {
			t.Errorf("admin: %v: %v", r, err)
		}
		if err := all.WithAdmin().Allows(Request{Partition: PartitionAudit, Op: op, Admin: true}); err != nil {
			t.Errorf("admin action refused: %v", err)
		}
	}
	for _, p := range []Partition{PartitionClinical, PartitionWorkforce, PartitionAudit} {
		r := Request{Partition: p, Op: OpUpdate, Admin: true}
		if err := all.Allows(r); err == nil {
			t.Errorf("admin action allowed without admin: %v", r)
		}
		if err := admin.Allows(r); err != nil {
			t.Errorf("admin action refused: %v: %v", r, err)
		}
	}
	// Admin alone reads no clinical or workforce data.
	for _, p := range []Partition{PartitionClinical, PartitionWorkforce} {
		if err := admin.Allows(Request{Partition: p, Type: "Patient", Op: OpRead}); err == nil {
			t.Errorf("admin alone read the %s partition", p)
		}
	}
	for _, op := range policyWrites {
		if err := all.WithAdmin().Allows(Request{Partition: PartitionAudit, Type: "AuditEvent", Op: op}); err == nil {
			t.Errorf("audit %v allowed", op)
		}
	}
	for _, op := range policyReads {
		if err := all.Allows(Request{Partition: PartitionAudit, Op: op}); err == nil {
			t.Error("audit search without admin")
		}
	}
}

func TestNeedsPatientCompartment(t *testing.T) {
	r := Request{Partition: PartitionClinical, Type: "Observation", Op: OpSearch}
	for _, tt := range []struct {
		scopes string
		want   bool
	}{
		{"patient/Observation.rs", true},
		{"patient/*.rs", true},
		{"patient/Observation.rs user/Observation.s", false},
		{"patient/*.rs patients:read", false},
		{"user/Observation.rs", false},
		{"patient/Condition.rs", false}, // not allowed at all
	} {
		if got := mustParseScopes(t, tt.scopes).NeedsPatientCompartment(r); got != tt.want {
			t.Errorf("%q: NeedsPatientCompartment = %v, want %v", tt.scopes, got, tt.want)
		}
	}
}

func TestLookupInteraction(t *testing.T) {
	for name, want := range map[string]Op{"patch": OpUpdate, "history-instance": OpRead, "vread": OpRead, "$everything": OpRead, "history-type": OpSearch} {
		x, ok := LookupInteraction(name)
		if !ok || x.Op != want || x.Admin {
			t.Errorf("LookupInteraction(%q) = %+v, %v", name, x, ok)
		}
	}
	if x, ok := LookupInteraction("$reindex"); !ok || !x.Admin {
		t.Errorf("$reindex = %+v, %v", x, ok)
	}
	if _, ok := LookupInteraction("$unknown"); ok {
		t.Error("unknown operation found")
	}
}

// TestPolicyDoc checks that docs/authorization.md holds the generated
// tables. Run `go test ./fhirserver/auth -run TestPolicyDoc -update-doc` to
// rewrite them after changing the policy.
func TestPolicyDoc(t *testing.T) {
	// docs/authorization.md holds both tables; README.md the policy table.
	checkGeneratedDoc(t, filepath.Join("..", "..", "docs", "authorization.md"), "policy", "interactions")
	checkGeneratedDoc(t, filepath.Join("..", "..", "README.md"), "policy")
}

func checkGeneratedDoc(t *testing.T, path string, names ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	tables := map[string]string{"policy": PolicyTable(), "interactions": InteractionTable()}
	for _, name := range names {
		s := struct{ name, table string }{name, tables[name]}
		begin := "<!-- BEGIN GENERATED " + s.name + " -->\n"
		end := "<!-- END GENERATED " + s.name + " -->"
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s: markers %q and %q not found", path, begin, end)
		}
		if got := doc[i+len(begin) : j]; got != s.table {
			if !*updatePolicyDoc {
				t.Errorf("%s: the %s table is out of date; run go test -run TestPolicyDoc -update-doc\ngot:\n%s\nwant:\n%s", path, s.name, got, s.table)
				continue
			}
			doc = doc[:i+len(begin)] + s.table + doc[j:]
		}
	}
	if *updatePolicyDoc && doc != string(data) {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPolicyTableShape checks that the table mentions what the contract
// requires.
func TestPolicyTableShape(t *testing.T) {
	table := PolicyTable()
	for _, want := range []string{"`patients:read`", "`patients:write`", "`consultations:read`", "`consultations:write`",
		"`payments:write`", "`workforce:read`", "`workforce:write`", "role `admin`", "never",
		"`/patients`", "`/v1/tele/*`", "`/workforce/*`", "Claim", "PaymentNotice", "PaymentReconciliation", "Invoice", "Coverage"} {
		if !strings.Contains(table, want) {
			t.Errorf("PolicyTable lacks %q", want)
		}
	}
	if n := strings.Count(table, "\n"); n != len(policyRules)+2 {
		t.Errorf("PolicyTable has %d lines, want %d", n, len(policyRules)+2)
	}
}
