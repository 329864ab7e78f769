package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/internal/app"
)

const (
	canaryWorker = `{"name":"Zebulon Quaxworth","employee_id":"EMP-90417","company":"Quaxworth Offshore","role":"Roughneck","contact_phone":"917 55 123"}`
	canaryScreen = `{"medical_status":"fit","screening_date":"2026-01-15","expiry_date":"2099-01-14","provider_name":"Dr Quaxworth Clinic","certifications":["OEUK Medical","BOSIET","H2S"]}`
)

// TestWorkforcePartitionIsolation runs the assembled server with its two
// FHIR services and proves the workforce partition apart from the
// clinical one: its own store file, its own FHIR base and
// CapabilityStatement, scopes that do not cross (clinical and admin-role
// tokens get 403 under /workforce, workforce tokens get 403 on /fhir and
// /patients), and no search, read, history or $everything of one
// partition that reaches a resource of the other. The audit records of
// the workforce calls name opaque ids only.
func TestWorkforcePartitionIsolation(t *testing.T) {
	h := newAuthHarness(t, nil)
	if _, err := os.Stat(filepath.Join(h.app.Config().Storage.DataDir, app.PartitionWorkforce+".db")); err != nil {
		t.Fatalf("the workforce partition has no store of its own: %v", err)
	}
	checkWorkforceIsolation(t, h)
}

// The same on MongoDB (make test-mongo): one database per partition.
func TestWorkforcePartitionIsolationOnMongoDB(t *testing.T) {
	uri := mongotest.URI(t)
	prefix := mongotest.NewName()
	t.Cleanup(func() {
		for _, p := range []string{app.PartitionClinical, app.PartitionWorkforce, app.PartitionAudit} {
			mongotest.Drop(t, prefix+"_"+p)
		}
	})
	h := newAuthHarnessOn(t, app.Storage{DataDir: t.TempDir(), MongoURI: uri, MongoDatabase: prefix, MongoWriteConcern: "majority"}, nil)
	checkWorkforceIsolation(t, h)
}

func checkWorkforceIsolation(t *testing.T, h *authHarness) {
	seq := auditSeq(t, h)
	wf := h.issue("", "workforce:read workforce:write")
	clinical := h.issue("provider", "patients:read patients:write consultations:read consultations:write")
	adminNoWF := h.issue("admin", "patients:read patients:write")
	all := h.admin()

	if r := h.do("POST", "/workforce", wf, []byte(canaryWorker), "Content-Type", "application/json"); r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/workforce/EMP-90417/screening", wf, []byte(canaryScreen), "Content-Type", "application/json"); r.status != http.StatusCreated {
		t.Fatalf("screening: %d %s", r.status, r.body)
	}
	r := h.do("GET", "/workforce/EMP-90417/compliance", wf, nil)
	if r.status != http.StatusOK || r.json(t)["compliance_score"] != 100.0 {
		t.Fatalf("compliance: %d %s", r.status, r.body)
	}

	// The worker is a Patient of /workforce/fhir, found by its identifier.
	r = h.do("GET", "/workforce/fhir/Patient?identifier="+url.QueryEscape("EMP-90417"), wf, nil)
	wfPatient := onlyID(t, r)
	clinicalPatient := h.create(all, "Patient", string(fixture(t, "patient.json")))

	for _, c := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"workforce metadata is public", "GET", "/workforce/fhir/metadata", "", http.StatusOK},
		{"clinical token on /workforce/fhir", "GET", "/workforce/fhir/Patient", clinical, http.StatusForbidden},
		{"clinical token on compliance", "GET", "/workforce/EMP-90417/compliance", clinical, http.StatusForbidden},
		{"admin role without workforce scopes", "GET", "/workforce/fhir/Patient/" + wfPatient, adminNoWF, http.StatusForbidden},
		{"admin role without workforce scopes on compliance", "GET", "/workforce/EMP-90417/compliance", adminNoWF, http.StatusForbidden},
		{"workforce token on /fhir", "GET", "/fhir/Patient", wf, http.StatusForbidden},
		{"workforce token on /patients", "GET", "/patients/PT-1", wf, http.StatusForbidden},
		{"the workforce Patient on /fhir", "GET", "/fhir/Patient/" + wfPatient, all, http.StatusNotFound},
		{"the workforce Patient's $everything on /fhir", "GET", "/fhir/Patient/" + wfPatient + "/$everything", all, http.StatusNotFound},
		{"the workforce Patient's history on /fhir", "GET", "/fhir/Patient/" + wfPatient + "/_history", all, http.StatusNotFound},
		{"the clinical Patient on /workforce/fhir", "GET", "/workforce/fhir/Patient/" + clinicalPatient, all, http.StatusNotFound},
		{"the clinical Patient's $everything on /workforce/fhir", "GET", "/workforce/fhir/Patient/" + clinicalPatient + "/$everything", all, http.StatusNotFound},
	} {
		if r := h.do(c.method, c.path, c.token, nil); r.status != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
	}
	// Searches, includes, chains, _has and histories see their own
	// partition only.
	for _, c := range []struct{ base, query, absent string }{
		{"/fhir", "Patient?identifier=EMP-90417", wfPatient},
		{"/fhir", "Observation?subject=Patient/" + wfPatient, wfPatient},
		{"/fhir", "DocumentReference?subject:Patient.identifier=EMP-90417", wfPatient},
		{"/fhir", "Patient?_has:Observation:subject:status=final", wfPatient},
		{"/fhir", "Patient?_revinclude=Observation:subject&_id=" + wfPatient, wfPatient},
		{"/fhir", "_history", wfPatient},
		{"/fhir", "Organization?name=Quaxworth", "Quaxworth"},
		{"/workforce/fhir", "Patient?_id=" + clinicalPatient, clinicalPatient},
		{"/workforce/fhir", "_history", clinicalPatient},
	} {
		r := h.do("GET", c.base+"/"+c.query, all, nil)
		if r.status != http.StatusOK {
			t.Errorf("%s/%s: %d %s", c.base, c.query, r.status, r.body)
			continue
		}
		if bytes.Contains(entries(t, r), []byte(c.absent)) {
			t.Errorf("%s/%s reaches the other partition: %s", c.base, c.query, r.body)
		}
	}
	r = h.do("GET", "/workforce/fhir/metadata", "", nil)
	if impl, _ := r.json(t)["implementation"].(map[string]any); impl["url"] != h.base+"/workforce/fhir" {
		t.Errorf("the workforce CapabilityStatement names %v", impl["url"])
	}

	// The workforce calls were audited, by opaque ids, never by name or
	// EMP id.
	trail := auditTrailSince(t, h.app, seq)
	found := false
	for _, rec := range trail {
		found = found || strings.Contains(rec.summary, "Patient/"+wfPatient)
	}
	if !found {
		t.Errorf("no audit record names the worker's Patient: %v", summaries(trail))
	}
	raw := rawAuditSince(t, h, seq)
	for _, canary := range []string{"EMP-90417", "Quaxworth", "Zebulon", "917 55 123"} {
		if bytes.Contains(bytes.ToLower(raw), bytes.ToLower([]byte(canary))) {
			t.Errorf("an audit record holds %q", canary)
		}
	}
}

// entries is the resources of a Bundle answer, as JSON.
func entries(t *testing.T, r response) []byte {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("not a Bundle: %s", r.body)
	}
	var out []byte
	for _, e := range b.Entry {
		out = append(out, e.Resource...)
	}
	return out
}

// onlyID returns the id of the one resource of a search answer.
func onlyID(t *testing.T, r response) string {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource struct{ ID string } `json:"resource"`
		} `json:"entry"`
	}
	if r.status != http.StatusOK {
		t.Fatalf("search: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &b); err != nil || len(b.Entry) != 1 {
		t.Fatalf("want one entry (%v): %s", err, r.body)
	}
	return b.Entry[0].Resource.ID
}

func auditSeq(t *testing.T, h *authHarness) int64 {
	t.Helper()
	if err := h.app.Recorder.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	es, err := h.app.AuditLog.Newest(t.Context(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) == 0 {
		return 0
	}
	return es[0].Seq
}

// rawAuditSince is the bodies of the audit records after seq, as stored.
func rawAuditSince(t *testing.T, h *authHarness, seq int64) []byte {
	t.Helper()
	if err := h.app.Recorder.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	es, err := h.app.AuditLog.Newest(t.Context(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, e := range es {
		if e.Seq > seq {
			out = append(append(out, e.Body...), '\n')
		}
	}
	return out
}
