package legacyapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
	"github.com/kiln-fhir/kiln/profiles/national"
)

// testTag is a blind tag under a fixed test key.
func testTag(v string) string {
	m := hmac.New(sha256.New, []byte("workforce test index key"))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

var testRequirements = sync.OnceValue(func() *adapters.Requirements {
	r, err := WorkforceRequirements(nil)
	if err != nil {
		panic(err)
	}
	return r
})

var (
	wfWriter   = []string{"X-Scopes", "workforce:write", "X-Role", "provider"}
	wfReader   = []string{"X-Scopes", "workforce:read", "X-Role", "provider"}
	clinicalRW = []string{"X-Scopes", "patients:read patients:write consultations:read consultations:write", "X-Role", "provider"}
	adminOnly  = []string{"X-Scopes", "patients:read", "X-Role", "admin"}
)

func workerBody(emp string) []byte {
	return fmt.Appendf(nil, `{"name":"Kari Nordmann","employee_id":%q,"company":"North Sea Drilling AS","role":"Offshore Drilling Technician","department":"Drilling","contact_phone":"412 34 567"}`, emp)
}

func screeningBody(status, screened, expires string, certs ...string) []byte {
	if certs == nil {
		certs = []string{}
	}
	b, _ := json.Marshal(map[string]any{"medical_status": status, "screening_date": screened, "expiry_date": expires,
		"provider_name": "Stavanger Offshore Health", "certifications": certs})
	return b
}

func (e *testEnv) compliance(emp string) adapters.ComplianceAnswer {
	e.t.Helper()
	r := e.do("GET", "/workforce/"+emp+"/compliance", nil, wfReader...)
	if r.status != http.StatusOK {
		e.t.Fatalf("compliance: %d %s", r.status, r.body)
	}
	e.conforms(schemaWorkerCompliance, r.body)
	var c adapters.ComplianceAnswer
	if err := json.Unmarshal(r.body, &c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *testEnv) mustStatus(r resp, status int) resp {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

// The acceptance walk: register, screen fit with the role's
// certifications (fit-to-work, valid, 100), move the clock past a
// certification's expiry (invalid, lower, due in the past), screen again
// (restored).
func TestWorkforceAcceptanceWalk(t *testing.T) {
	e := newEnv(t)
	r := e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-1042"), wfWriter...), http.StatusCreated)
	e.conforms(schemaWorkerRegistered, r.body)
	if got := r.header.Get("Location"); got != "/workforce/EMP-1042" {
		t.Errorf("Location %q", got)
	}
	if m := r.json(t); m["employee_id"] != "EMP-1042" || m["status"] != "registered" {
		t.Errorf("answer %s", r.body)
	}
	if c := e.compliance("EMP-1042"); c.Status != adapters.WorkerScreeningRequired || c.ComplianceScore != 0 || c.Name != "Kari Nordmann" {
		t.Errorf("before any screening: %+v", c)
	}

	// An older screening holds BOSIET and H2S until 2027-01-31; the latest
	// one (fit) holds the offshore medical until 2028.
	e.mustStatus(e.do("POST", "/workforce/EMP-1042/screening", screeningBody("fit", "2026-01-10", "2027-01-31", "BOSIET", "H2S"), wfWriter...), http.StatusCreated)
	r = e.mustStatus(e.do("POST", "/workforce/EMP-1042/screening", screeningBody("fit", "2026-11-20", "2028-11-19", "OEUK Medical"), wfWriter...), http.StatusCreated)
	e.conforms(schemaScreeningRecorded, r.body)
	rec := r.json(t)
	if rec["employee_id"] != "EMP-1042" || rec["medical_status"] != "fit" || rec["screening_date"] != "2026-11-20" || rec["expiry_date"] != "2028-11-19" {
		t.Errorf("screening answer %s", r.body)
	}
	id, _ := rec["screening_id"].(string)
	if _, err := e.wfStore.Read(t.Context(), "Observation", id); err != nil {
		t.Errorf("the screening_id names no Observation in the workforce store: %v", err)
	}
	c := e.compliance("EMP-1042")
	if c.Status != adapters.WorkerFitToWork || !c.CertificationsValid || c.ComplianceScore != 100 || c.NextScreeningDue != "2027-01-31" {
		t.Errorf("after the screenings: %+v", c)
	}

	e.now.Set(time.Date(2027, 2, 10, 9, 0, 0, 0, time.UTC))
	c = e.compliance("EMP-1042")
	if c.Status != adapters.WorkerFitToWork || c.CertificationsValid || c.ComplianceScore >= 100 || c.NextScreeningDue >= "2027-02-10" {
		t.Errorf("past BOSIET and H2S's expiry: %+v", c)
	}

	e.mustStatus(e.do("POST", "/workforce/EMP-1042/screening", screeningBody("fit", "2027-02-10", "2029-02-09", "BOSIET", "H2S", "OEUK Medical"), wfWriter...), http.StatusCreated)
	if c = e.compliance("EMP-1042"); c.Status != adapters.WorkerFitToWork || !c.CertificationsValid || c.ComplianceScore != 100 || c.NextScreeningDue != "2029-02-09" {
		t.Errorf("after the new screening: %+v", c)
	}
}

// Nothing of a worker is a resource id or a record id: ids are random,
// the EMP id is an identifier only, and the records are named by tags.
func TestWorkforceIDsAreOpaque(t *testing.T) {
	e := newEnv(t)
	e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-77"), wfWriter...), http.StatusCreated)
	e.mustStatus(e.do("POST", "/workforce/EMP-77/screening", screeningBody("fit", "2026-11-20", "2027-11-19", "H2S"), wfWriter...), http.StatusCreated)
	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.WorkforceRead}})
	for _, typ := range []string{"Patient", "Organization", "Observation", "DocumentReference"} {
		vs, err := e.wfFHIR.SearchAll(ctx, typ, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 1 {
			t.Errorf("%d %s, want 1", len(vs), typ)
		}
		for _, v := range vs {
			if !sealed.IsUUID(v.ID) || v.ID[14] != '4' || strings.Contains(strings.ToUpper(v.ID), "EMP") {
				t.Errorf("%s id %q is not an opaque random id", typ, v.ID)
			}
		}
	}
	if _, err := e.wfStore.GetRecord(t.Context(), workerClaimKind, testTag("employee-id|EMP-77")); err != nil {
		t.Errorf("the worker's claim is not under its tag: %v", err)
	}
	// And the clinical partition holds none of it.
	if n := e.patientCount(); n != 0 {
		t.Errorf("%d Patients in the clinical partition", n)
	}
}

// 32 registrations of one employee_id at once create exactly one worker;
// the others get 409.
func TestWorkforceConcurrentRegistrations(t *testing.T) {
	e := newEnv(t)
	const n = 32
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { statuses[i] = e.do("POST", "/workforce", workerBody("EMP-5"), wfWriter...).status })
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("status %d", s)
		}
	}
	if created != 1 {
		t.Errorf("%d registrations succeeded, want 1", created)
	}
	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.WorkforceRead}})
	vs, err := e.wfFHIR.SearchAll(ctx, "Patient", nil, 100)
	if err != nil || len(vs) != 1 {
		t.Errorf("%d Patients stored (%v), want 1", len(vs), err)
	}
	orgs, err := e.wfFHIR.SearchAll(ctx, "Organization", nil, 100)
	if err != nil || len(orgs) != 1 {
		t.Errorf("%d Organizations stored (%v), want 1", len(orgs), err)
	}
}

// 32 screenings of one worker at once are all stored, and compliance
// reads all of them.
func TestWorkforceConcurrentScreenings(t *testing.T) {
	e := newEnv(t)
	e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-9"), wfWriter...), http.StatusCreated)
	const n = 32
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		day := fmt.Sprintf("2026-10-%02d", i%28+1)
		wg.Go(func() {
			statuses[i] = e.do("POST", "/workforce/EMP-9/screening", screeningBody("fit", day, "2027-12-31", "OEUK Medical", "BOSIET", "H2S"), wfWriter...).status
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusCreated {
			t.Errorf("screening %d: status %d", i, s)
		}
	}
	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.WorkforceRead}})
	obs, err := e.wfFHIR.SearchAll(ctx, "Observation", nil, 1000)
	if err != nil || len(obs) != n {
		t.Errorf("%d Observations (%v), want %d", len(obs), err, n)
	}
	if c := e.compliance("EMP-9"); c.Status != adapters.WorkerFitToWork || !c.CertificationsValid || c.ComplianceScore != 100 || c.NextScreeningDue != "2027-12-31" {
		t.Errorf("compliance %+v", c)
	}
}

// Each bad input of the table gets its status and the platform
// error body, and stores nothing.
func TestWorkforceBadInput(t *testing.T) {
	e := newEnv(t)
	e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-1"), wfWriter...), http.StatusCreated)
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("Cert %d", i)
	}
	cases := []struct {
		name, method, path string
		body               []byte
		headers            []string
		status             int
		code, field        string
	}{
		{"employee_id not EMP-digits", "POST", "/workforce", workerBody("EMP-12a"), nil, 400, "invalid_body", "employee_id"},
		{"employee_id lower case", "POST", "/workforce", workerBody("emp-12"), nil, 400, "invalid_body", "employee_id"},
		{"unknown field", "POST", "/workforce", []byte(`{"name":"A B","employee_id":"EMP-2","company":"C","role":"R","salary":1}`), nil, 400, "invalid_body", "salary"},
		{"missing role", "POST", "/workforce", []byte(`{"name":"A B","employee_id":"EMP-2","company":"C"}`), nil, 400, "invalid_body", "role"},
		{"blank company", "POST", "/workforce", []byte(`{"name":"A B","employee_id":"EMP-2","company":"   ","role":"R"}`), nil, 400, "invalid_body", "company"},
		{"not JSON", "POST", "/workforce", []byte(`name=x`), []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
		{"broken JSON", "POST", "/workforce", []byte(`{"name":`), nil, 400, "invalid_json", ""},
		{"too large", "POST", "/workforce", bytes.Repeat([]byte(" "), maxWorkerBytes+1), nil, 413, "too_large", ""},
		{"duplicate", "POST", "/workforce", workerBody("EMP-1"), nil, 409, "conflict", ""},
		{"unknown worker", "POST", "/workforce/EMP-404/screening", screeningBody("fit", "2026-11-20", "2027-11-19"), nil, 404, "not_found", ""},
		{"malformed worker id", "GET", "/workforce/PT-1/compliance", nil, nil, 404, "not_found", ""},
		{"unknown worker compliance", "GET", "/workforce/EMP-404/compliance", nil, nil, 404, "not_found", ""},
		{"bad medical_status", "POST", "/workforce/EMP-1/screening", screeningBody("healthy", "2026-11-20", "2027-11-19"), nil, 400, "invalid_body", "medical_status"},
		{"invalid date", "POST", "/workforce/EMP-1/screening", screeningBody("fit", "2026-02-30", "2027-11-19"), nil, 400, "invalid_body", "screening_date"},
		{"screening in the future", "POST", "/workforce/EMP-1/screening", screeningBody("fit", "2026-11-23", "2027-11-19"), nil, 400, "invalid_body", "screening_date"},
		{"expiry before screening", "POST", "/workforce/EMP-1/screening", screeningBody("fit", "2026-11-20", "2026-11-19"), nil, 400, "invalid_body", "expiry_date"},
		{"101 certifications", "POST", "/workforce/EMP-1/screening", screeningBody("fit", "2026-11-20", "2027-11-19", many...), nil, 400, "invalid_body", "certifications"},
		{"a name over 200 characters", "POST", "/workforce/EMP-1/screening", screeningBody("fit", "2026-11-20", "2027-11-19", strings.Repeat("é", 201)), nil, 400, "invalid_body", "certifications[0]"},
		{"too large screening", "POST", "/workforce/EMP-1/screening", bytes.Repeat([]byte(" "), maxScreeningBytes+1), nil, 413, "too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.workforceCount()
			h := c.headers
			if h == nil {
				h = wfWriter
				if c.method == "GET" {
					h = wfReader
				}
			} else {
				h = append(append([]string{}, wfWriter...), h...)
			}
			r := e.do(c.method, c.path, c.body, h...)
			e.expectError(r, c.status, c.code, c.field)
			if after := e.workforceCount(); after != before {
				t.Errorf("%d resources stored", after-before)
			}
		})
	}
	// The error lists the allowed outcomes.
	r := e.do("POST", "/workforce/EMP-1/screening", screeningBody("healthy", "2026-11-20", "2027-11-19"), wfWriter...)
	for _, s := range adapters.MedicalStatuses {
		if !bytes.Contains(r.body, []byte(s)) {
			t.Errorf("the error does not list %q: %s", s, r.body)
		}
	}
}

func (e *testEnv) workforceCount() int {
	e.t.Helper()
	ctx := auth.WithPrincipal(e.t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.WorkforceRead}})
	n := 0
	for _, typ := range []string{"Patient", "Organization", "Observation", "DocumentReference"} {
		vs, err := e.wfFHIR.SearchAll(ctx, typ, nil, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		n += len(vs)
	}
	return n
}

// Scopes: clinical scopes and the admin role reach nothing under
// /workforce; a workforce token reaches neither /patients nor the
// clinical FHIR service; read is not write.
func TestWorkforceScopes(t *testing.T) {
	e := newEnv(t)
	e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-3"), wfWriter...), http.StatusCreated)
	for _, c := range []struct {
		name, method, path string
		body               []byte
		headers            []string
		status             int
	}{
		{"clinical token registers", "POST", "/workforce", workerBody("EMP-4"), clinicalRW, 403},
		{"clinical token screens", "POST", "/workforce/EMP-3/screening", screeningBody("fit", "2026-11-20", "2027-11-19"), clinicalRW, 403},
		{"clinical token reads compliance", "GET", "/workforce/EMP-3/compliance", nil, clinicalRW, 403},
		{"admin role without workforce scopes", "GET", "/workforce/EMP-3/compliance", nil, adminOnly, 403},
		{"read scope writes", "POST", "/workforce", workerBody("EMP-4"), wfReader, 403},
		{"write scope reads", "GET", "/workforce/EMP-3/compliance", nil, wfWriter, 403},
		{"no token", "GET", "/workforce/EMP-3/compliance", nil, nil, 401},
		{"workforce token on /patients", "POST", "/patients", []byte(amina), []string{"X-Scopes", "workforce:read workforce:write"}, 403},
		{"workforce token reads a patient", "GET", "/patients/PT-1", nil, []string{"X-Scopes", "workforce:read workforce:write"}, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, c.body, c.headers...)
			if r.status != c.status {
				t.Errorf("status %d, want %d: %s", r.status, c.status, r.body)
			}
		})
	}
	// The clinical FHIR service refuses a workforce token in process too.
	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.WorkforceRead | auth.WorkforceWrite}})
	if _, err := e.fhir.SearchAll(ctx, "Patient", nil, 10); err == nil {
		t.Error("the clinical service answered a workforce-only token")
	}
}

// Idempotency-Key on POST /workforce: a retry gets the first answer and
// creates nothing; the key's record lives in the workforce partition.
func TestWorkforceIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	h := append(append([]string{}, wfWriter...), "Idempotency-Key", "reg-1")
	first := e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-8"), h...), http.StatusCreated)
	again := e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-8"), h...), http.StatusCreated)
	if !bytes.Equal(first.body, again.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay %s (%q), first %s", again.body, again.header.Get("Idempotent-Replayed"), first.body)
	}
	if n := e.workforceCount(); n != 2 { // the Patient and its Organization
		t.Errorf("%d resources, want 2", n)
	}
	e.expectError(e.do("POST", "/workforce", workerBody("EMP-9"), h...), 422, "idempotency_key_reused", "")
}

// --workforce-requirements replaces the table; a bad file is refused with
// the place of the error.
func TestWorkforceRequirementsFile(t *testing.T) {
	file := []byte(`{"roles":[{"names":["welder"],"requires":[["H2S"]]}]}`)
	r, err := WorkforceRequirements(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Required("Welder"); len(got) != 1 {
		t.Errorf("welder requires %v", got)
	}
	if got := r.Required("Offshore Drilling Technician"); len(got) != 0 {
		t.Errorf("the default table is still used: %v", got)
	}
	if _, err := WorkforceRequirements([]byte(`{"roles":[{"names":[],"requires":[]}]}`)); err == nil {
		t.Error("an empty role was accepted")
	}
	example, err := os.ReadFile(filepath.Join("..", "docs", "workforce-requirements.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WorkforceRequirements(example); err != nil {
		t.Errorf("the documented example: %v", err)
	}
}

// A fit-with-restrictions screening names its work restrictions (the
// national profile's nat-ffw-1): stored as components, scored with F =
// 0.5; without any, or with a code the national CodeSystem lacks, a 400.
func TestWorkforceRestrictions(t *testing.T) {
	e := newEnv(t)
	e.mustStatus(e.do("POST", "/workforce", workerBody("EMP-21"), wfWriter...), http.StatusCreated)
	restricted := func(codes ...string) []byte {
		b, _ := json.Marshal(map[string]any{"medical_status": "fit-with-restrictions", "screening_date": "2026-11-20", "expiry_date": "2099-01-01",
			"provider_name": "Clinic", "certifications": []string{"OEUK Medical", "BOSIET", "H2S"}, "restrictions": codes})
		return b
	}
	e.expectError(e.do("POST", "/workforce/EMP-21/screening", screeningBody("fit-with-restrictions", "2026-11-20", "2027-11-19"), wfWriter...), 400, "invalid_body", "restrictions")
	e.expectError(e.do("POST", "/workforce/EMP-21/screening", restricted("no-swimming"), wfWriter...), 400, "invalid_body", "restrictions[0]")
	e.mustStatus(e.do("POST", "/workforce/EMP-21/screening", restricted("no-work-at-height", "day-shift-only"), wfWriter...), http.StatusCreated)
	if c := e.compliance("EMP-21"); c.Status != adapters.WorkerFitWithRestrictions || !c.CertificationsValid || c.ComplianceScore != 75 {
		t.Errorf("compliance %+v", c)
	}
}

// The schema's restriction codes are the national CodeSystem's.
func TestRestrictionCodesAreTheNationalOnes(t *testing.T) {
	cs, err := national.Files.ReadFile("CodeSystem-work-restriction.json")
	if err != nil {
		t.Fatal(err)
	}
	concepts, err := adapters.ConceptsOf(cs)
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, c := range concepts {
		want = append(want, c.Code)
	}
	sch, err := loadSchemas(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	got := sch.docs[schemaScreeningCreate]["properties"].(map[string]any)["restrictions"].(map[string]any)["items"].(map[string]any)["enum"]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("schema enum %v, CodeSystem %v", got, want)
	}
}
