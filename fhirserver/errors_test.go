package fhirserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Every rejected request answers an OperationOutcome with the status the
// FHIR specification gives, naming what was wrong.
func TestRejectedRequests(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	patient := withID(fixture(t, "patient.json"), id)
	big := []byte(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">` +
		strings.Repeat("x", 6<<20) + `</div>"}}`)
	tests := []struct {
		name    string
		method  string
		path    string
		body    []byte
		headers []string
		status  int
		mention string
	}{
		{"unknown resource type", "GET", "/Patientx/1", nil, nil, 404, "Patientx"},
		{"unknown type on create", "POST", "/Nope", []byte(`{"resourceType":"Nope"}`), nil, 404, "Nope"},
		{"read of unknown id", "GET", "/Patient/nobody", nil, nil, 404, "Patient/nobody"},
		{"invalid id", "GET", "/Patient/bad_id!", nil, nil, 400, "invalid resource id"},
		{"vread of unknown version", "GET", "/Patient/" + id + "/_history/9", nil, nil, 404, "no version 9"},
		{"vread of non-numeric version", "GET", "/Patient/" + id + "/_history/x", nil, nil, 404, "no version"},
		{"malformed JSON", "POST", "/Patient", []byte(`{"resourceType":"Patient",`), nil, 400, ""},
		{"unknown element", "POST", "/Patient", []byte(`{"resourceType":"Patient","foo":1}`), nil, 400, "foo"},
		{"duplicate key", "POST", "/Patient", []byte(`{"resourceType":"Patient","gender":"male","gender":"female"}`), nil, 400, "gender"},
		{"null value", "POST", "/Patient", []byte(`{"resourceType":"Patient","gender":null}`), nil, 400, "gender"},
		{"bad date", "POST", "/Patient", []byte(`{"resourceType":"Patient","birthDate":"2020-13-01"}`), nil, 400, "birthDate"},
		{"wrong type", "POST", "/Patient", []byte(`{"resourceType":"Patient","active":"yes"}`), nil, 400, "active"},
		{"script in narrative", "POST", "/Patient", []byte(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><script>alert(1)</script></div>"}}`), nil, 400, "Patient.text.div"},
		{"event handler in narrative", "POST", "/Patient", []byte(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p onclick=\"x()\">hi</p></div>"}}`), nil, 400, "onclick"},
		{"body type differs from URL", "POST", "/Observation", patient, nil, 400, "Observation"},
		{"update without id", "PUT", "/Patient/" + id, fixture(t, "patient.json"), nil, 400, "Patient.id"},
		{"update with another id", "PUT", "/Patient/" + id, withID(patient, "other"), nil, 400, "other"},
		{"malformed If-Match", "PUT", "/Patient/" + id, patient, []string{"If-Match", "v1"}, 400, "If-Match"},
		{"oversize body", "POST", "/Patient", big, nil, 413, ""},
		{"XML body", "POST", "/Patient", []byte(`<Patient xmlns="http://hl7.org/fhir"/>`), []string{"Content-Type", "application/fhir+xml"}, 415, "xml"},
		{"XML wanted", "GET", "/Patient/" + id, nil, []string{"Accept", "application/fhir+xml"}, 406, "JSON"},
		{"search with a malformed date", "GET", "/Patient?birthdate=xx2000", nil, nil, 400, "birthdate"},
		{"patch of an unsupported media type", "PATCH", "/Patient/" + id, []byte(`x`), []string{"Content-Type", "text/plain"}, 415, "PATCH"},
		{"Bundle of a type the base does not take", "POST", "", []byte(`{"resourceType":"Bundle","type":"collection"}`), nil, 400, "batch or transaction"},
		{"conditional create with unknown criteria", "POST", "/Patient", patient, []string{"If-None-Exist", "nonsense=x"}, 400, "nonsense"},
		{"method not allowed", "DELETE", "/Patient/" + id + "/_history", nil, nil, 405, "allowed: GET"},
		{"method not allowed at system level", "DELETE", "/metadata", nil, nil, 405, "DELETE"},
		{"bad _count", "GET", "/Patient/" + id + "/_history?_count=-1", nil, nil, 400, "_count"},
		{"bad _since", "GET", "/_history?_since=yesterday", nil, nil, 400, "_since"},
		{"bad _at", "GET", "/Patient/_history?_at=2024-02-30", nil, nil, 400, "_at"},
		{"bad cursor", "GET", "/_history?_cursor=garbage", nil, nil, 400, "cursor"},
		{"history of unknown resource", "GET", "/Patient/nobody/_history", nil, nil, 404, "Patient/nobody"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			expectOutcome(t, h.do(tc.method, tc.path, tc.body, tc.headers...), tc.status, tc.mention)
		})
	}
	// None of the rejected writes changed the resource.
	h.t = t
	if r := h.do("GET", "/Patient/"+id, nil); r.header.Get("ETag") != `W/"1"` {
		t.Errorf("a rejected write created a version: ETag %s", r.header.Get("ETag"))
	}
}

// Element errors name the element with a FHIRPath expression.
func TestUnknownElementNamesPath(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "/Patient", []byte(`{"resourceType":"Patient","foo":1}`))
	expectOutcome(t, r, http.StatusBadRequest, `"Patient.foo"`)
}

func TestResponsesCarrySecurityHeaders(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/metadata", nil, "X-Request-Id", "abc-123")
	if !strings.Contains(r.header.Get("Strict-Transport-Security"), "max-age=") {
		t.Errorf("no HSTS: %v", r.header)
	}
	if vary := strings.Join(r.header.Values("Vary"), ", "); r.header.Get("Cache-Control") != "no-store" || !strings.Contains(vary, "Accept") {
		t.Errorf("caching headers: Cache-Control %q, Vary %q", r.header.Get("Cache-Control"), vary)
	}
	if r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("X-Request-Id not echoed: %q", r.header.Get("X-Request-Id"))
	}
	r = h.do("GET", "/metadata", nil, "X-Request-Id", "bad id;<script>")
	if got := r.header.Get("X-Request-Id"); got == "" || strings.ContainsAny(got, " \n") {
		t.Errorf("unsafe request id not replaced: %q", got)
	}
}

func TestCapabilityStatementClaimsOnlyWhatWorks(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/metadata", nil)
	if r.status != http.StatusOK {
		t.Fatalf("metadata: %d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["resourceType"] != "CapabilityStatement" || m["fhirVersion"] != "4.0.1" || m["kind"] != "instance" {
		t.Fatalf("unexpected CapabilityStatement header: %s", r.body[:200])
	}
	rest := m["rest"].([]any)[0].(map[string]any)
	resources := rest["resource"].([]any)
	if len(resources) != 146 {
		t.Errorf("%d resource types, want the 146 of R4", len(resources))
	}
	var system []string
	for _, in := range rest["interaction"].([]any) {
		system = append(system, in.(map[string]any)["code"].(string))
	}
	want := "batch history-system search-system"
	if hasTransactions(t, h) {
		want += " transaction"
	}
	if got := strings.Join(slices.Sorted(slices.Values(system)), " "); got != want {
		t.Errorf("system interactions %q, want %q", got, want)
	}
	// Every claimed type-level interaction answers on a real resource type.
	var patient map[string]any
	for _, res := range resources {
		if res.(map[string]any)["type"] == "Patient" {
			patient = res.(map[string]any)
		}
	}
	var codes []string
	for _, in := range patient["interaction"].([]any) {
		codes = append(codes, in.(map[string]any)["code"].(string))
	}
	want = "create delete history-instance history-type patch read search-type update vread"
	if got := strings.Join(slices.Sorted(slices.Values(codes)), " "); got != want {
		t.Errorf("Patient interactions %q, want %q", got, want)
	}
}
