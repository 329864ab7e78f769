package app_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/internal/app"
)

// auditRecord is what the count tests read back of one AuditEvent.
type auditRecord struct {
	summary   string // "<subtype> <entity> <outcome>"
	who       string
	address   string
	requestID string
}

// auditTrailSince flushes the recorder and returns the records after seq,
// in chain order.
func auditTrailSince(t *testing.T, a *app.App, seq int64) []auditRecord {
	t.Helper()
	ctx := t.Context()
	if err := a.Recorder.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := a.AuditLog.Newest(ctx, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []auditRecord
	for _, e := range slices.Backward(entries) {
		if e.Seq <= seq {
			continue
		}
		var doc struct {
			Subtype []struct{ Code string } `json:"subtype"`
			Outcome string                  `json:"outcome"`
			Agent   []struct {
				Who *struct {
					Identifier *struct{ Value string } `json:"identifier"`
				} `json:"who"`
				Network *struct{ Address string } `json:"network"`
			} `json:"agent"`
			Entity []struct {
				What *struct {
					Reference  string `json:"reference"`
					Identifier *struct {
						System, Value string
					} `json:"identifier"`
				} `json:"what"`
				Type *struct{ System, Code string } `json:"type"`
			} `json:"entity"`
		}
		if err := json.Unmarshal(e.Body, &doc); err != nil {
			t.Fatalf("record %d: %v", e.Seq, err)
		}
		var r auditRecord
		sub := "?"
		if len(doc.Subtype) == 1 {
			sub = doc.Subtype[0].Code
		}
		entity := "-"
		for _, ent := range doc.Entity {
			switch {
			case ent.Type != nil && ent.Type.Code == "XrequestId":
				r.requestID = ent.What.Identifier.Value
			case ent.What != nil && ent.What.Reference != "":
				entity = ent.What.Reference
			case ent.What != nil && ent.What.Identifier != nil:
				entity = ent.What.Identifier.Value // a platform path
			case ent.Type != nil && ent.Type.System == audit.SystemResourceTypes:
				entity = ent.Type.Code
			}
		}
		r.summary = sub + " " + entity + " " + doc.Outcome
		if len(doc.Agent) == 1 {
			if w := doc.Agent[0].Who; w != nil && w.Identifier != nil {
				r.who = w.Identifier.Value
			}
			if n := doc.Agent[0].Network; n != nil {
				r.address = n.Address
			}
		}
		out = append(out, r)
	}
	return out
}

func summaries(rs []auditRecord) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.summary)
	}
	slices.Sort(out)
	return out
}

var createdRef = regexp.MustCompile(`(Patient|Observation)/([A-Za-z0-9\-.]+)/_history/`)

// TestAuditCountsOneEventPerInteraction runs a mixed workload through the
// assembled server — REST reads and writes (one refused by the policy,
// one not found), a transaction of 10 entries, and the /patients
// endpoints (create, read, erase, an update the platform does not offer,
// a refused create, an invalid body) — and finds exactly one AuditEvent
// per FHIR interaction, with its restful-interaction subtype, entity and
// outcome: none for what is no interaction, one for the platform's
// refusal that never reached the FHIR service.
func TestAuditCountsOneEventPerInteraction(t *testing.T) {
	h := newAuthHarness(t, nil)
	admin := h.admin()
	nurse := h.issue("", "patient/Observation.read")
	start, _ := h.app.Recorder.Head()
	var want []string
	expect := func(s ...string) { want = append(want, s...) }

	// REST: create, read, update, search, vread, a read of nothing, a
	// refused create, delete, and the public CapabilityStatement.
	pid := h.create(admin, "Patient", string(fixture(t, "patient.json")))
	expect("create Patient/" + pid + " 0")
	steps := []struct {
		method, path, token string
		body                []byte
		status              int
		want                string
	}{
		{"GET", "/fhir/Patient/" + pid, admin, nil, 200, "read Patient/" + pid + " 0"},
		{"PUT", "/fhir/Patient/" + pid, admin, []byte(strings.Replace(string(fixture(t, "patient.json")), "{", `{"id":"`+pid+`",`, 1)), 200, "update Patient/" + pid + " 0"},
		{"GET", "/fhir/Patient?family=Okafor", admin, nil, 200, "search Patient 0"},
		{"GET", "/fhir/Patient/" + pid + "/_history/1", admin, nil, 200, "vread Patient/" + pid + "/_history/1 0"},
		{"GET", "/fhir/Patient/nobody", admin, nil, 404, "read Patient/nobody 4"},
		{"POST", "/fhir/Patient", nurse, fixture(t, "patient.json"), 403, "create Patient 4"},
		{"GET", "/fhir/metadata", "", nil, 200, "capabilities - 0"},
		// Not interactions: an unknown route, a method the path lacks.
		{"GET", "/fhir/Patient/" + pid + "/nothing/here", admin, nil, 404, ""},
		{"DELETE", "/fhir/metadata", admin, nil, 405, ""},
	}
	for _, s := range steps {
		if r := h.do(s.method, s.path, s.token, s.body); r.status != s.status {
			t.Fatalf("%s %s: %d, want %d: %s", s.method, s.path, r.status, s.status, r.body)
		}
		if s.want != "" {
			expect(s.want)
		}
	}

	// A transaction of 10 entries: six creates (one referred to by an
	// Observation's urn), two updates that create, the Observation, and
	// a read. The transaction is an interaction, and so is each entry.
	var entries []string
	patient := string(fixture(t, "patient.json"))
	first := "urn:uuid:" + randUUID(t)
	for i := range 6 {
		full := "urn:uuid:" + randUUID(t)
		if i == 0 {
			full = first
		}
		entries = append(entries, `{"fullUrl":"`+full+`","resource":`+patient+`,"request":{"method":"POST","url":"Patient"}}`)
	}
	for _, id := range []string{"tx-a", "tx-b"} {
		entries = append(entries, `{"resource":`+strings.Replace(patient, "{", `{"id":"`+id+`",`, 1)+`,"request":{"method":"PUT","url":"Patient/`+id+`"}}`)
		expect("update Patient/" + id + " 0")
	}
	obs := strings.Replace(string(fixture(t, "observation.json")), "Patient/example", first, 1)
	entries = append(entries, `{"fullUrl":"urn:uuid:`+randUUID(t)+`","resource":`+obs+`,"request":{"method":"POST","url":"Observation"}}`)
	entries = append(entries, `{"request":{"method":"GET","url":"Patient/`+pid+`"}}`)
	expect("read Patient/"+pid+" 0", "transaction - 0")
	r := h.do("POST", "/fhir", admin, []byte(`{"resourceType":"Bundle","type":"transaction","entry":[`+strings.Join(entries, ",")+`]}`))
	if r.status != http.StatusOK {
		t.Fatalf("transaction: %d %s", r.status, r.body)
	}
	created := createdRef.FindAllStringSubmatch(string(r.body), -1)
	var creates int
	for _, m := range created {
		if m[2] == "tx-a" || m[2] == "tx-b" || m[2] == pid {
			continue
		}
		creates++
		expect("create " + m[1] + "/" + m[2] + " 0")
	}
	if creates != 7 {
		t.Fatalf("the transaction answered %d creates, want 7: %s", creates, r.body)
	}

	// /patients: each endpoint is recorded as the FHIR interactions its
	// adapter performs, in-process.
	r = h.do("POST", "/patients", admin, []byte(`{"first_name":"Amina","last_name":"Haddad","date_of_birth":"1987-04-12"}`), "Content-Type", "application/json")
	if r.status != http.StatusCreated {
		t.Fatalf("POST /patients: %d %s", r.status, r.body)
	}
	pt, _ := r.json(t)["patient_id"].(string)
	expect("create Patient/" + pt + " 0")
	if r := h.do("GET", "/patients/"+pt, admin, nil); r.status != http.StatusOK {
		t.Fatalf("GET /patients: %d %s", r.status, r.body)
	}
	expect("read Patient/"+pt+" 0", "search Condition 0", "search Observation 0")
	if r := h.do("DELETE", "/patients/"+pt, admin, nil); r.status != http.StatusOK {
		t.Fatalf("DELETE /patients: %d %s", r.status, r.body)
	}
	expect("delete Patient/" + pt + " 0")
	// The platform has no update of a patient: a 405, no interaction.
	if r := h.do("PUT", "/patients/"+pt, admin, []byte(`{}`), "Content-Type", "application/json"); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /patients: %d %s", r.status, r.body)
	}
	// An invalid body never reaches the FHIR service: no interaction.
	if r := h.do("POST", "/patients", admin, []byte(`{"first_name":"A"}`), "Content-Type", "application/json"); r.status != http.StatusBadRequest {
		t.Fatalf("POST /patients without the required fields: %d %s", r.status, r.body)
	}
	// Refused by the platform's policy before any interaction: recorded
	// at the HTTP layer, once.
	if r := h.do("POST", "/patients", nurse, []byte(`{"first_name":"A","last_name":"B","date_of_birth":"1990-01-01"}`), "Content-Type", "application/json"); r.status != http.StatusForbidden {
		t.Fatalf("POST /patients without patients:write: %d %s", r.status, r.body)
	}
	expect("create /patients 4")

	got := auditTrailSince(t, h.app, start)
	slices.Sort(want)
	if g := summaries(got); !slices.Equal(g, want) {
		t.Errorf("%d AuditEvents, want %d (one per interaction):\n got  %q\n want %q", len(g), len(want), g, want)
	}
	for _, rec := range got {
		if rec.requestID == "" || rec.address != "127.0.0.1" {
			t.Errorf("%s: request id %q, address %q; want both", rec.summary, rec.requestID, rec.address)
		}
		if rec.summary != "capabilities - 0" && !strings.HasPrefix(rec.who, "user/test-") {
			t.Errorf("%s: agent %q, want the token's subject", rec.summary, rec.who)
		}
	}
}

// TestAuditRecordsEveryFHIRService: each mounted FHIR service records its
// own interactions, the same way.
func TestAuditRecordsEveryFHIRService(t *testing.T) {
	other := app.Mount{Partition: "other", Base: "/other-fhir", Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionClinical}}
	h := newAuthHarness(t, nil, app.Clinical(), other)
	admin := h.admin()
	start, _ := h.app.Recorder.Head()
	var want []string
	for _, base := range []string{"/fhir", "/other-fhir"} {
		for _, s := range []struct{ path, want string }{
			{"/metadata", "capabilities - 0"},
			{"/Patient/p1", "read Patient/p1 4"},
			{"/Observation?code=x", "search Observation 0"},
		} {
			h.do("GET", base+s.path, admin, nil)
			want = append(want, s.want)
		}
	}
	slices.Sort(want)
	if got := summaries(auditTrailSince(t, h.app, start)); !slices.Equal(got, want) {
		t.Errorf("recorded %q, want %q", got, want)
	}
}
