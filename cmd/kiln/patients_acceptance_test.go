package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestPatientsAcceptance is issue 8's walk as a new user would take it,
// against `kiln serve` with the default national profiles: log in, register
// a patient, read the summary, add a Condition and an Observation through
// /fhir, and find both in the platform and FHIR views of the patient.
func TestPatientsAcceptance(t *testing.T) {
	addr, client, out, stop := startServe(t)
	base := "https://" + addr
	creds := regexp.MustCompile(`email:\s+(\S+)\s+password:\s+(\S+)`).FindStringSubmatch(out.String())
	if creds == nil {
		t.Fatalf("no admin credentials printed:\n%s", out.String())
	}
	admin := login(t, client, base, creds[1], creds[2])

	// The API description is public and lists the routes.
	status, doc, _ := send(t, client, "GET", base+"/openapi.json", "", "", nil)
	if status != http.StatusOK || doc["openapi"] != "3.1.0" {
		t.Fatalf("GET /openapi.json: %d %v", status, doc["openapi"])
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, p := range []string{"/auth/login", "/patients", "/patients/{id}", "/openapi.json"} {
		if paths[p] == nil {
			t.Errorf("the OpenAPI document lacks %s", p)
		}
	}

	status, created, hdr := postJSON(t, client, base+"/patients", admin, map[string]string{
		"first_name": "Amina", "last_name": "Haddad", "phone": "0412 345 678", "date_of_birth": "1987-04-12",
		"email": "amina.haddad@example.org", "address": "12 Harbour Street, 4006 Stavanger",
	})
	id, _ := created["patient_id"].(string)
	if status != http.StatusCreated || !regexp.MustCompile(`^PT-[0-9]+$`).MatchString(id) || created["status"] != "active" || created["created_at"] == nil {
		t.Fatalf("POST /patients: %d %v", status, created)
	}
	if hdr.Get("Location") != "/patients/"+id {
		t.Errorf("Location %q", hdr.Get("Location"))
	}
	// Errors have the platform's shape.
	status, bad, _ := postJSON(t, client, base+"/patients", admin, map[string]string{"first_name": "A", "nickname": "x"})
	if e, _ := bad["error"].(map[string]any); status != http.StatusBadRequest || e == nil || e["details"] == nil {
		t.Errorf("a bad body: %d %v", status, bad)
	}
	if status, _, _ := postJSON(t, client, base+"/patients", "", map[string]string{}); status != http.StatusUnauthorized {
		t.Errorf("no token: %d", status)
	}

	status, summary, _ := send(t, client, "GET", base+"/patients/"+id, admin, "", nil)
	if status != http.StatusOK || summary["patient_id"] != id || summary["first_name"] != "Amina" || summary["last_name"] != "Haddad" ||
		summary["date_of_birth"] != "1987-04-12" || summary["phone"] != "0412 345 678" || summary["compliance_status"] != "unknown" {
		t.Fatalf("GET /patients/%s: %d %v", id, status, summary)
	}

	// A Condition through /fhir appears in medical_history, mapped.
	cond := `{"resourceType":"Condition","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"remission"}]},` +
		`"code":{"coding":[{"system":"http://snomed.info/sct","code":"195967001","display":"Asthma"}]},` +
		`"subject":{"reference":"Patient/` + id + `"},"onsetDateTime":"1995-03-10T14:00:00+01:00"}`
	if status, body, _ := send(t, client, "POST", base+"/fhir/Condition", admin, "application/fhir+json", []byte(cond)); status != http.StatusCreated {
		t.Fatalf("POST /fhir/Condition: %d %v", status, body)
	}
	_, summary, _ = send(t, client, "GET", base+"/patients/"+id, admin, "", nil)
	hist, _ := json.Marshal(summary["medical_history"])
	if string(hist) != `[{"condition":"Asthma","diagnosed_date":"1995-03-10","status":"resolved"}]` {
		t.Errorf("medical_history %s", hist)
	}

	// The FHIR view of the same patient, with the national profile.
	status, patient, _ := send(t, client, "GET", base+"/fhir/Patient/"+id, admin, "", nil)
	meta, _ := patient["meta"].(map[string]any)
	prof, _ := json.Marshal(meta["profile"])
	if status != http.StatusOK || !strings.Contains(string(prof), `"`+defaultProfileURL+`/Patient"`) {
		t.Errorf("GET /fhir/Patient/%s: %d meta.profile %s", id, status, prof)
	}

	// An Observation of the national profile, found by patient.
	obs := `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body weight"}]},"subject":{"reference":"Patient/` + id + `"},` +
		`"effectiveDateTime":"2026-03-02T09:10:00+01:00","valueQuantity":{"value":68.5,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`
	status, created, _ = send(t, client, "POST", base+"/fhir/Observation", admin, "application/fhir+json", []byte(obs))
	if status != http.StatusCreated {
		t.Fatalf("POST /fhir/Observation: %d %v", status, created)
	}
	status, bundle, _ := send(t, client, "GET", base+"/fhir/Observation?patient="+id, admin, "", nil)
	entries, _ := bundle["entry"].([]any)
	if status != http.StatusOK || len(entries) != 1 {
		t.Fatalf("GET /fhir/Observation?patient=%s: %d %v", id, status, bundle)
	}
	if got := entries[0].(map[string]any)["resource"].(map[string]any)["id"]; got != created["id"] {
		t.Errorf("found %v, want %v", got, created["id"])
	}

	// Idempotency-Key: a retry returns the first answer.
	body := []byte(`{"first_name":"Chidi","last_name":"Okafor","date_of_birth":"2019-07-30"}`)
	var first []byte
	for i := range 2 {
		req, _ := http.NewRequest("POST", base+"/patients", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Idempotency-Key", "acceptance-1")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated || i == 1 && !bytes.Equal(buf.Bytes(), first) {
			t.Errorf("try %d: %d %s (first %s)", i, res.StatusCode, buf.Bytes(), first)
		}
		first = buf.Bytes()
	}

	// Erasure needs a privacy-capable role: a provider with patients:write
	// is refused by the policy.
	data := dataDirOf(t, out.String())
	var cliOut bytes.Buffer
	if err := run(context.Background(), []string{"admin", "user", "add", "--data", data, "--email", "nurse@example.org",
		"--role", "provider", "--scopes", "patients:read patients:write", "--password-stdin"}, strings.NewReader("a long carer passphrase\n"), &cliOut, &cliOut); err != nil {
		t.Fatalf("user add: %v\n%s", err, cliOut.String())
	}
	nurse := login(t, client, base, "nurse@example.org", "a long carer passphrase")
	if status, body, _ := send(t, client, "DELETE", base+"/patients/"+id, nurse, "", nil); status != http.StatusForbidden || body["error"] == nil {
		t.Errorf("DELETE as a provider: %d %v", status, body)
	}
	status, erased, _ := send(t, client, "DELETE", base+"/patients/"+id, admin, "", nil)
	if status != http.StatusOK || erased["status"] != "anonymized" || erased["patient_id"] != id || erased["anonymized_at"] == nil {
		t.Fatalf("DELETE as admin: %d %v", status, erased)
	}
	if status, again, _ := send(t, client, "DELETE", base+"/patients/"+id, admin, "", nil); status != http.StatusOK || again["anonymized_at"] != erased["anonymized_at"] {
		t.Errorf("a second DELETE: %d %v", status, again)
	}
	if status, body, _ := send(t, client, "GET", base+"/patients/"+id, admin, "", nil); status != http.StatusOK || len(body) != 3 || body["status"] != "anonymized" {
		t.Errorf("GET after erasure: %d %v", status, body)
	}
	for _, q := range []string{"Patient?name=Haddad", "Patient?phone=0412%20345%20678", "Patient?email=amina.haddad@example.org", "Patient?family=haddad"} {
		if status, found, _ := send(t, client, "GET", base+"/fhir/"+q, admin, "", nil); status != http.StatusOK || found["entry"] != nil {
			t.Errorf("%s after erasure: %d %v", q, status, found)
		}
	}
	req, _ := http.NewRequest("GET", base+"/fhir/Patient/"+id+"/_history", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var history bytes.Buffer
	_, _ = history.ReadFrom(res.Body)
	res.Body.Close()
	for _, s := range []string{"Haddad", "Amina", "0412 345 678", "amina.haddad@example.org", "Harbour Street"} {
		if strings.Contains(history.String(), s) {
			t.Errorf("the Patient's history still holds %q", s)
		}
	}
	if status, _, _ := send(t, client, "GET", base+"/fhir/Condition?subject=Patient/"+id, admin, "", nil); status != http.StatusOK {
		t.Errorf("Conditions after erasure: %d", status)
	}
	_, summary, _ = send(t, client, "GET", base+"/fhir/Condition?subject=Patient/"+id, admin, "", nil)
	if entries, _ := summary["entry"].([]any); len(entries) != 1 {
		t.Errorf("the Condition was not kept: %v", summary)
	}

	// The erasure is audited: who, when, which patient; no erased data.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	erasures := 0
	for _, body := range auditBodies(t, data) {
		if bytes.Contains(body, []byte(`"Patient/`+id+`"`)) && bytes.Contains(body, []byte(`"action":"D"`)) && bytes.Contains(body, []byte(`"outcome":"0"`)) {
			erasures++
		}
		for _, s := range []string{"Haddad", "Amina", "0412 345 678", "amina.haddad@example.org"} {
			if bytes.Contains(body, []byte(s)) {
				t.Errorf("an audit record holds %q", s)
			}
		}
	}
	if erasures != 2 { // the erasure and its idempotent repeat
		t.Errorf("%d successful erasure records of Patient/%s, want 2", erasures, id)
	}
}
