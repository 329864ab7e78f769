package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/kiln-fhir/kiln/internal/canarytest"
)

// A canary worker: values that occur nowhere else.
type canaryWorker struct {
	Name, EmpID, Phone, Company, Certification, Provider, Department string
}

func (c canaryWorker) values() canarytest.Values {
	return canarytest.Values{
		"name": c.Name, "employee id": c.EmpID, "phone": c.Phone, "phone digits": digitsOf(c.Phone),
		"company": c.Company, "certification": c.Certification, "provider": c.Provider, "department": c.Department,
	}
}

func newCanaryWorker(t testing.TB) canaryWorker {
	return canaryWorker{
		Name:          "Zq" + randomLetters(t, 8) + " Xv" + randomLetters(t, 9),
		EmpID:         "EMP-" + randomDigits(t, 9),
		Phone:         "9" + randomDigits(t, 2) + " " + randomDigits(t, 3) + " " + randomDigits(t, 3),
		Company:       "Kw" + randomLetters(t, 10) + " Offshore",
		Certification: "Cert " + randomLetters(t, 10),
		Provider:      "Dr " + randomLetters(t, 10),
		Department:    "Dept " + randomLetters(t, 10),
	}
}

// workforceFlow registers the canary worker, screens them twice (once
// with the canary certification), reads their compliance, and reads and
// searches them through /workforce/fhir every way the blind index
// answers: by identifier, by the certification's exact name, by a chain.
func workforceFlow(t *testing.T, client *http.Client, base, token string, c canaryWorker) {
	t.Helper()
	req := func(method, path, ctype string, body []byte, want int) map[string]any {
		t.Helper()
		status, m, _ := send(t, client, method, base+path, token, ctype, body)
		if status != want {
			t.Fatalf("%s %s: %d, want %d: %v", method, path, status, want, m)
		}
		return m
	}
	worker, _ := json.Marshal(map[string]string{"name": c.Name, "employee_id": c.EmpID, "company": c.Company, "role": "Roughneck",
		"department": c.Department, "contact_phone": c.Phone})
	req("POST", "/workforce", "application/json", worker, http.StatusCreated)
	for _, certs := range [][]string{{"OEUK Medical", "BOSIET"}, {"H2S", c.Certification}} {
		body, _ := json.Marshal(map[string]any{"medical_status": "fit", "screening_date": "2026-01-15", "expiry_date": "2099-01-14",
			"provider_name": c.Provider, "certifications": certs})
		req("POST", "/workforce/"+c.EmpID+"/screening", "application/json", body, http.StatusCreated)
	}
	m := req("GET", "/workforce/"+c.EmpID+"/compliance", "", nil, http.StatusOK)
	if m["compliance_score"] != 100.0 || m["name"] != c.Name {
		t.Fatalf("compliance %v", m)
	}
	found := req("GET", "/workforce/fhir/Patient?identifier="+url.QueryEscape(c.EmpID), "", nil, http.StatusOK)
	entries, _ := found["entry"].([]any)
	if len(entries) != 1 {
		t.Fatalf("search by identifier: %v", found)
	}
	id := entries[0].(map[string]any)["resource"].(map[string]any)["id"].(string)
	req("GET", "/workforce/fhir/Patient/"+id, "", nil, http.StatusOK)
	req("GET", "/workforce/fhir/Patient/"+id+"/_history", "", nil, http.StatusOK)
	docs := req("GET", "/workforce/fhir/DocumentReference?subject:Patient.identifier="+url.QueryEscape(c.EmpID), "", nil, http.StatusOK)
	if n := len(docs["entry"].([]any)); n != 4 {
		t.Fatalf("chained search: %d certifications, want 4", n)
	}
	// A search the blind index cannot answer is refused, not answered
	// from anything in the clear.
	req("GET", "/workforce/fhir/Patient?name="+url.QueryEscape(c.Name[:4]), "", nil, http.StatusBadRequest)
	// The clinical partition knows nothing of the worker.
	m = req("GET", "/fhir/Patient?identifier="+url.QueryEscape(c.EmpID), "", nil, http.StatusOK)
	if m["entry"] != nil {
		t.Fatalf("the clinical partition answers the worker's identifier: %v", m)
	}
}

// No plaintext of a worker reaches the disk: every byte of every file in
// the data folder (each partition's database, WAL and shared memory, the
// audit log, the keys) and every line the server logged at debug level
// are free of the canary worker's name, EMP id, phone, company,
// certification, provider and department, in any of their forms, while
// it runs and after it stops.
func TestWorkforceLeavesNoPlaintextOnDisk(t *testing.T) {
	data := t.TempDir()
	addr, client, out, stop := startServe(t, "--data", data, "--log-level", "debug")
	base := "https://" + addr
	token := adminLogin(t, client, base, out.String())
	c := newCanaryWorker(t)
	workforceFlow(t, client, base, token, c)
	for _, h := range canarytest.SweepFolder(t, data, c.values()) {
		t.Errorf("while running: %s", h)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, h := range append(canarytest.SweepFolder(t, data, c.values()), canarytest.Hits("log", []byte(out.String()), c.values())...) {
		t.Errorf("after a stop: %s", h)
	}
}

// The same on MongoDB (make test-mongo): every document of the three
// databases, and the log.
func TestWorkforceLeavesNoPlaintextOnMongoDB(t *testing.T) {
	m := serveOnMongo(t, "--log-level", "debug")
	uri, prefix, data, client, out, stop, base, token := m.uri, m.prefix, m.data, m.client, m.out, m.stop, m.base, m.token
	c := newCanaryWorker(t)
	workforceFlow(t, client, base, token, c)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	hits := canarytest.SweepMongo(t, uri, c.values(), 10, prefix+"_clinical", prefix+"_workforce", prefix+"_audit")
	for _, h := range append(append(hits, canarytest.Hits("log", []byte(out.String()), c.values())...), canarytest.SweepFolder(t, data, c.values())...) {
		t.Error(h)
	}
}
