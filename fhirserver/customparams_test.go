package fhirserver_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
)

const maritalParam = `{"resourceType":"SearchParameter","url":"https://kiln.example/SearchParameter/patient-marital",
"name":"marital","status":"active","description":"Marital status","code":"marital","base":["Patient"],"type":"token",
"expression":"Patient.maritalStatus"}`

func marriedPatient(id string) []byte {
	return []byte(`{"resourceType":"Patient","id":"` + id + `","maritalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-MaritalStatus","code":"M"}]}}`)
}

// A SearchParameter posted to the server indexes resources written after
// it at once, resources written before it after $reindex, is listed in the
// CapabilityStatement, and is used again after a restart.
func TestCustomSearchParameter(t *testing.T) {
	h := newHarness(t)
	if r := h.do("PUT", "/Patient/before", marriedPatient("before")); r.status != http.StatusCreated {
		t.Fatalf("seed: %d %s", r.status, r.body)
	}
	const query = "/Patient?marital=http://terminology.hl7.org/CodeSystem/v3-MaritalStatus|M"
	// Unknown until the parameter exists: a strict search is refused.
	expectOutcome(t, h.do("GET", query, nil, "Prefer", "handling=strict"), http.StatusBadRequest, "marital")

	if r := h.do("POST", "/SearchParameter", []byte(maritalParam)); r.status != http.StatusCreated {
		t.Fatalf("create SearchParameter: %d %s", r.status, r.body)
	}
	if r := h.do("PUT", "/Patient/after", marriedPatient("after")); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if got := strings.Join(sorted(h.search(t, query).matches), " "); got != "after" {
		t.Errorf("before reindex: found %q, want only the patient written after the parameter", got)
	}
	if r := h.do("POST", "/Patient/$reindex", nil); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"reindexed"`)) {
		t.Fatalf("$reindex: %d %s", r.status, r.body)
	}
	if got := strings.Join(sorted(h.search(t, query).matches), " "); got != "after before" {
		t.Errorf("after reindex: found %q, want both patients", got)
	}
	if r := h.do("GET", "/metadata", nil); !bytes.Contains(r.body, []byte(`"name":"marital"`)) {
		t.Error("the CapabilityStatement does not list the custom parameter")
	}

	// A new server over the same store registers it again.
	fs, err := fhirserver.New(h.cfg, h.store)
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter().SkipClean(true)
	fs.Register(r, "/fhir")
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/fhir"+query, nil).WithContext(t.Context()))
	if rec.Code != http.StatusOK || bytes.Count(rec.Body.Bytes(), []byte(`"mode":"match"`)) != 2 {
		t.Errorf("after restart: %d %s", rec.Code, rec.Body.Bytes())
	}
}

// A SearchParameter that cannot work is refused rather than stored.
func TestCustomSearchParameterRefused(t *testing.T) {
	h := newHarness(t)
	bad := bytes.Replace([]byte(maritalParam), []byte(`"code":"marital"`), []byte(`"code":"family"`), 1)
	expectOutcome(t, h.do("POST", "/SearchParameter", bad), http.StatusUnprocessableEntity, "family")
	broken := bytes.Replace([]byte(maritalParam), []byte(`Patient.maritalStatus`), []byte(`Patient.(`), 1)
	expectOutcome(t, h.do("POST", "/SearchParameter", broken), http.StatusUnprocessableEntity, "")
}

func sorted(ids []string) []string { return slices.Sorted(slices.Values(ids)) }
