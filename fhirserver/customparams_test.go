package fhirserver_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/rest"
	"github.com/kiln-fhir/kiln/internal/syncbuf"
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
	rest.Register(r, "/fhir", fs)
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

// Retiring or deleting a SearchParameter takes its parameter out of
// search (and the CapabilityStatement); moving it to another base moves
// the parameter.
func TestCustomSearchParameterWithdrawn(t *testing.T) {
	h := newHarness(t)
	const query = "/Patient?marital=http://terminology.hl7.org/CodeSystem/v3-MaritalStatus|M"
	put := func(body string) {
		t.Helper()
		if r := h.do("PUT", "/SearchParameter/marital", []byte(body)); r.status >= 300 {
			t.Fatalf("PUT SearchParameter: %d %s", r.status, r.body)
		}
	}
	known := func(query string) bool {
		t.Helper()
		return h.do("GET", query, nil, "Prefer", "handling=strict").status == http.StatusOK
	}
	withID := strings.Replace(maritalParam, `"resourceType":"SearchParameter",`, `"resourceType":"SearchParameter","id":"marital",`, 1)
	put(withID)
	if !known(query) {
		t.Fatal("the active parameter is not known")
	}
	put(strings.Replace(withID, `"status":"active"`, `"status":"retired"`, 1))
	if known(query) {
		t.Error("a retired parameter is still searched")
	}
	if r := h.do("GET", "/metadata", nil); bytes.Contains(r.body, []byte(`"name":"marital"`)) {
		t.Error("the CapabilityStatement still lists the retired parameter")
	}
	put(withID)
	put(strings.Replace(withID, `"base":["Patient"]`, `"base":["Person"]`, 1))
	if known(query) || !known("/Person?marital=M") {
		t.Error("the parameter did not move from Patient to Person")
	}
	if r := h.do("DELETE", "/SearchParameter/marital", nil); r.status >= 300 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if known("/Person?marital=M") {
		t.Error("a deleted parameter is still searched")
	}
}

// A custom parameter whose expression fails on some resources at run time
// (here: subtracting two dates) leaves those resources out of its index;
// it does not refuse their writes, nor a reindex.
//
// The log is told once, without the resource's data.
func TestCustomSearchParameterFailingExpression(t *testing.T) {
	var logged syncbuf.Buffer
	h := newHarness(t, func(c *fhirserver.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logged, nil)) })
	sp := `{"resourceType":"SearchParameter","url":"https://kiln.example/SearchParameter/age-ish","name":"ageish","status":"active",
"description":"d","code":"ageish","base":["Patient"],"type":"number","expression":"(Patient.birthDate - @1900-01-01)"}`
	if r := h.do("POST", "/SearchParameter", []byte(sp)); r.status != http.StatusCreated {
		t.Fatalf("create SearchParameter: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/Patient", []byte(`{"resourceType":"Patient","birthDate":"1970-01-01"}`)); r.status != http.StatusCreated {
		t.Errorf("a Patient on which the parameter fails: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/Patient", []byte(`{"resourceType":"Patient","birthDate":"1981-02-03"}`)); r.status != http.StatusCreated {
		t.Errorf("another: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/Patient/$reindex", nil); r.status != http.StatusOK {
		t.Errorf("$reindex: %d %s", r.status, r.body)
	}
	if n := strings.Count(logged.String(), "custom search parameter fails"); n != 1 || strings.Contains(logged.String(), "1981") {
		t.Errorf("told the log %d times (want once, without resource data):\n%s", n, logged.String())
	}
	if got := h.search(t, "/Patient?ageish=gt0").matches; len(got) != 0 {
		t.Errorf("found %v by a parameter that could not be evaluated", got)
	}
}

// The registry follows the stored SearchParameters through a transaction
// that fails (nothing it registered or withdrew stays), an active url
// taken twice (refused), a url change, and the deletion of a composite's
// component (the composite goes too, as after a restart).
func TestCustomSearchParameterRegistryFollowsTheStore(t *testing.T) {
	h := newHarness(t)
	sp := func(id, url, code, typ, expression, extra string) string {
		return `{"resourceType":"SearchParameter","id":"` + id + `","url":"` + url + `","name":"` + code + `","status":"active","description":"d",` +
			`"code":"` + code + `","base":["Observation"],"type":"` + typ + `","expression":"` + expression + `"` + extra + `}`
	}
	known := func(query string) bool {
		t.Helper()
		return h.do("GET", query, nil, "Prefer", "handling=strict").status == http.StatusOK
	}
	put := func(body string, want int) {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		if r := h.do("PUT", "/SearchParameter/"+m["id"].(string), []byte(body)); r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", m["id"], r.status, r.body, want)
		}
	}
	put(sp("oc", "https://kiln.example/sp/oc", "ocode", "token", "Observation.code", ""), http.StatusCreated)

	// A transaction that fails after its entries changed the parameters.
	failing := func(entry string) []byte {
		return bundleOf("transaction", entry,
			`{"resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/no-id-in-body"}}`)
	}
	if r := h.do("POST", "", failing(`{"resource":`+sp("tx1", "https://kiln.example/sp/tx1", "txcode", "token", "Observation.status", "")+
		`,"request":{"method":"PUT","url":"SearchParameter/tx1"}}`)); r.status < 400 {
		t.Fatalf("the failing transaction: %d %s", r.status, r.body)
	}
	if known("/Observation?txcode=x") {
		t.Error("a parameter from a failed transaction is searchable")
	}
	if r := h.do("POST", "", failing(`{"request":{"method":"DELETE","url":"SearchParameter/oc"}}`)); r.status < 400 {
		t.Fatalf("the failing transaction: %d %s", r.status, r.body)
	}
	if !known("/Observation?ocode=x") {
		t.Error("a parameter deleted by a failed transaction is gone")
	}

	// Two active SearchParameters with one url.
	put(sp("oc2", "https://kiln.example/sp/oc", "ocode2", "token", "Observation.code", ""), http.StatusUnprocessableEntity)
	if !known("/Observation?ocode=x") || known("/Observation?ocode2=x") {
		t.Error("the refused duplicate url changed the parameters")
	}

	// A url change of an active one.
	put(sp("oc", "https://kiln.example/sp/oc-new", "ocode", "token", "Observation.code", ""), http.StatusOK)
	if !known("/Observation?ocode=x") {
		t.Error("the parameter whose url changed is gone")
	}

	// A composite on two custom parameters loses its component.
	put(sp("ov", "https://kiln.example/sp/ov", "ovalue", "quantity", "Observation.value", ""), http.StatusCreated)
	put(sp("ocv", "https://kiln.example/sp/ocv", "ocodevalue", "composite", "Observation",
		`,"component":[{"definition":"https://kiln.example/sp/oc-new","expression":"code"},{"definition":"https://kiln.example/sp/ov","expression":"value"}]`), http.StatusCreated)
	if !known("/Observation?ocodevalue=x$gt5") {
		t.Fatal("the composite is not searchable")
	}
	if r := h.do("DELETE", "/SearchParameter/ov", nil); r.status >= 300 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if known("/Observation?ocodevalue=x$gt5") {
		t.Error("a composite whose component was deleted is still searchable")
	}
}
