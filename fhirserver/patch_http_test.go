package fhirserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// The patch interaction (https://hl7.org/fhir/R4/http.html#patch) with
// JSON Patch (RFC 6902, Content-Type application/json-patch+json) and
// FHIRPath Patch (a Parameters resource, https://hl7.org/fhir/R4/fhirpatch.html).
//
// Status codes follow RFC 5789 §2.2, which FHIR's patch builds on: a patch
// document that is malformed is 400; a well-formed patch that cannot be
// applied to the resource, or whose result would be an invalid resource
// (a failing "test", a wrong datatype, an unknown element), is
// 422 Unprocessable Entity; an unsupported patch format is 415.

const mimeJSONPatch = "application/json-patch+json"

// jsonPatch sends a JSON Patch to path.
func (h *harness) jsonPatch(path, patch string, headers ...string) response {
	h.t.Helper()
	return h.do("PATCH", path, []byte(patch), append([]string{"Content-Type", mimeJSONPatch}, headers...)...)
}

// fhirPathPatch builds a FHIRPath Patch Parameters resource of one
// operation from its parts (each a JSON object text).
func fhirPathPatch(parts ...string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Parameters","parameter":[{"name":"operation","part":[`)
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
	}
	b.WriteString(`]}]}`)
	return b.Bytes()
}

// sameContent compares a resource with an expected one, ignoring id and
// meta (set by the server).
func sameContent(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("expected fixture is not JSON: %v", err)
	}
	for _, m := range []map[string]any{g, w} {
		delete(m, "id")
		delete(m, "meta")
	}
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.MarshalIndent(g, "", "  ")
		wb, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("patched resource differs from the expected one\n got: %s\nwant: %s", gb, wb)
	}
}

func TestJSONPatchAllOperations(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	r := h.do("PATCH", "/Patient/"+id, fixture(t, "patch/jsonpatch-all-ops.json"), "Content-Type", mimeJSONPatch)
	if r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if r.header.Get("ETag") != `W/"2"` {
		t.Errorf("ETag %q, want W/\"2\"", r.header.Get("ETag"))
	}
	want := fixture(t, "patch/jsonpatch-all-ops.expected.json")
	sameContent(t, r.body, want)
	read := h.do("GET", "/Patient/"+id, nil)
	m := read.json(t)
	if vid, _ := meta(t, m); vid != "2" || m["id"] != id {
		t.Errorf("after the patch: id %v version %s", m["id"], vid)
	}
	sameContent(t, read.body, want)
	// The version before the patch is kept.
	sameContent(t, h.do("GET", "/Patient/"+id+"/_history/1", nil).body, fixture(t, "patient.json"))
	// A media type parameter does not change the format.
	r = h.jsonPatch("/Patient/"+id, `[{"op":"replace","path":"/gender","value":"male"}]`, "Content-Type", mimeJSONPatch+"; charset=utf-8")
	if r.status != http.StatusOK || r.json(t)["gender"] != "male" {
		t.Errorf("patch with charset: %d %s", r.status, r.body)
	}
}

func TestFHIRPathPatchAllOperations(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	r := h.do("PATCH", "/Patient/"+id, fixture(t, "patch/fhirpath-all-ops.json"))
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"2"` {
		t.Fatalf("patch: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	want := fixture(t, "patch/fhirpath-all-ops.expected.json")
	sameContent(t, r.body, want)
	sameContent(t, h.do("GET", "/Patient/"+id, nil).body, want)
	// application/json is a FHIR JSON media type too.
	body := fhirPathPatch(`{"name":"type","valueCode":"replace"}`, `{"name":"path","valueString":"Patient.birthDate"}`, `{"name":"value","valueDate":"1988-05-13"}`)
	r = h.do("PATCH", "/Patient/"+id, body, "Content-Type", "application/json")
	if r.status != http.StatusOK || r.json(t)["birthDate"] != "1988-05-13" {
		t.Errorf("FHIRPath Patch as application/json: %d %s", r.status, r.body)
	}
}

func TestPatchVersioning(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	path := "/Patient/" + id

	// If-Match with the current version: applied, version 2.
	r := h.jsonPatch(path, `[{"op":"replace","path":"/gender","value":"male"}]`, "If-Match", `W/"1"`)
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"2"` {
		t.Fatalf("If-Match current: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	if vid, _ := meta(t, r.json(t)); vid != "2" {
		t.Errorf("meta.versionId %s, want 2", vid)
	}

	// If-Match with a stale version: 412, nothing written.
	expectOutcome(t, h.jsonPatch(path, `[{"op":"replace","path":"/gender","value":"female"}]`, "If-Match", `W/"1"`), http.StatusPreconditionFailed, "")
	if got := h.do("GET", path, nil); got.header.Get("ETag") != `W/"2"` || got.json(t)["gender"] != "male" {
		t.Errorf("the stale patch was applied: %s %s", got.header.Get("ETag"), got.body)
	}

	// FHIRPath Patch with If-Match: version 3.
	fp := fhirPathPatch(`{"name":"type","valueCode":"replace"}`, `{"name":"path","valueString":"Patient.gender"}`, `{"name":"value","valueCode":"female"}`)
	r = h.do("PATCH", path, fp, "If-Match", `W/"2"`)
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"3"` {
		t.Fatalf("FHIRPath Patch with If-Match: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	expectOutcome(t, h.do("PATCH", path, fp, "If-Match", `W/"2"`), http.StatusPreconditionFailed, "")

	// The server, not the patch, sets meta.versionId and meta.lastUpdated.
	r = h.jsonPatch(path, `[{"op":"replace","path":"/meta/versionId","value":"99"},{"op":"replace","path":"/meta/lastUpdated","value":"2001-01-01T00:00:00Z"}]`)
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"4"` {
		t.Fatalf("patch of meta: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	if vid, lu := meta(t, r.json(t)); vid != "4" || strings.HasPrefix(lu, "2001") {
		t.Errorf("after a patch of meta: versionId %s lastUpdated %s, want 4 and now", vid, lu)
	}

	// Every patch is a version in the history.
	if got := entryVersions(t, h.do("GET", path+"/_history", nil)); len(got) != 4 {
		t.Errorf("history versions %v, want 4", got)
	}
}

func TestPatchErrors(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	path := "/Patient/" + id
	fp := func(parts ...string) string { return string(fhirPathPatch(parts...)) }
	typ := func(op string) string { return `{"name":"type","valueCode":"` + op + `"}` }
	at := func(p string) string { return `{"name":"path","valueString":"` + p + `"}` }

	tests := []struct {
		name        string
		contentType string
		body        string
		status      []int // acceptable statuses
	}{
		// Malformed JSON Patch documents: 400.
		{"json patch: not JSON", mimeJSONPatch, `[{"op":`, []int{400}},
		{"json patch: an object, not an array", mimeJSONPatch, `{"op":"replace","path":"/gender","value":"male"}`, []int{400}},
		{"json patch: unknown op", mimeJSONPatch, `[{"op":"frobnicate","path":"/gender","value":"male"}]`, []int{400}},
		{"json patch: no op", mimeJSONPatch, `[{"path":"/gender","value":"male"}]`, []int{400}},
		{"json patch: no path", mimeJSONPatch, `[{"op":"replace","value":"male"}]`, []int{400}},
		{"json patch: no value", mimeJSONPatch, `[{"op":"add","path":"/gender"}]`, []int{400}},
		{"json patch: move without from", mimeJSONPatch, `[{"op":"move","path":"/gender"}]`, []int{400}},
		{"json patch: path not a pointer", mimeJSONPatch, `[{"op":"replace","path":"gender","value":"male"}]`, []int{400}},
		// Well formed, but not applicable, or the result is not valid R4: 422.
		{"json patch: failing test", mimeJSONPatch, `[{"op":"test","path":"/gender","value":"male"},{"op":"replace","path":"/active","value":false}]`, []int{422}},
		{"json patch: gender 42", mimeJSONPatch, `[{"op":"replace","path":"/gender","value":42}]`, []int{422}},
		{"json patch: unknown element", mimeJSONPatch, `[{"op":"add","path":"/favouriteColour","value":"blue"}]`, []int{422}},
		{"json patch: invalid date", mimeJSONPatch, `[{"op":"replace","path":"/birthDate","value":"12 April 1987"}]`, []int{422}},
		{"json patch: remove a missing element", mimeJSONPatch, `[{"op":"remove","path":"/deceasedBoolean"}]`, []int{409, 422}},
		{"json patch: index past the end", mimeJSONPatch, `[{"op":"add","path":"/name/5","value":{"family":"X"}}]`, []int{409, 422}},
		{"json patch: change resourceType", mimeJSONPatch, `[{"op":"replace","path":"/resourceType","value":"Group"}]`, []int{400, 422}},
		{"json patch: change id", mimeJSONPatch, `[{"op":"replace","path":"/id","value":"other-id"}]`, []int{400, 422}},
		{"json patch: empty body", mimeJSONPatch, ``, []int{400}},
		// FHIRPath Patch.
		{"fhirpath: empty body", "application/fhir+json", ``, []int{400}},
		{"fhirpath: a JSON Patch sent as FHIR JSON", "application/fhir+json", `[{"op":"replace","path":"/gender","value":"male"}]`, []int{400}},
		{"fhirpath: not a Parameters", "application/fhir+json", string(fixture(t, "patient.json")), []int{400}},
		{"fhirpath: invalid Parameters", "application/fhir+json", `{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"replace"}],"value":1}]}`, []int{400}},
		{"fhirpath: parameter not an operation", "application/fhir+json", `{"resourceType":"Parameters","parameter":[{"name":"frobnicate","valueString":"x"}]}`, []int{400}},
		{"fhirpath: unknown type", "application/fhir+json", fp(typ("frobnicate"), at("Patient.gender")), []int{400}},
		{"fhirpath: no path", "application/fhir+json", fp(typ("delete")), []int{400}},
		{"fhirpath: replace without value", "application/fhir+json", fp(typ("replace"), at("Patient.gender")), []int{400}},
		{"fhirpath: invalid expression", "application/fhir+json", fp(typ("delete"), at("Patient.name[")), []int{400}},
		{"fhirpath: gender 42", "application/fhir+json", fp(typ("replace"), at("Patient.gender"), `{"name":"value","valueInteger":42}`), []int{422}},
		{"fhirpath: unknown element", "application/fhir+json", fp(typ("add"), at("Patient"), `{"name":"name","valueString":"favouriteColour"}`, `{"name":"value","valueString":"blue"}`), []int{422}},
		{"fhirpath: move past the end", "application/fhir+json", fp(typ("move"), at("Patient.name[0].given"), `{"name":"source","valueInteger":7}`, `{"name":"destination","valueInteger":0}`), []int{422}},
		// Unsupported patch formats: 415.
		{"text/plain", "text/plain", `[{"op":"replace","path":"/gender","value":"male"}]`, []int{415}},
		{"merge patch", "application/merge-patch+json", `{"gender":"male"}`, []int{415}},
		{"xml", "application/fhir+xml", `<Parameters xmlns="http://hl7.org/fhir"/>`, []int{415}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			r := h.do("PATCH", path, []byte(tc.body), "Content-Type", tc.contentType)
			ok := false
			for _, s := range tc.status {
				ok = ok || r.status == s
			}
			if !ok {
				t.Fatalf("status %d, want one of %v; %s", r.status, tc.status, r.body)
			}
			expectOutcome(t, r, r.status, "")
		})
	}
	h.t = t
	// None of them wrote anything.
	if r := h.do("GET", path, nil); r.header.Get("ETag") != `W/"1"` {
		t.Errorf("a refused patch was written: ETag %s %s", r.header.Get("ETag"), r.body)
	}
	sameContent(t, h.do("GET", path, nil).body, fixture(t, "patient.json"))
}

func TestPatchTargets(t *testing.T) {
	h := newHarness(t)
	valid := `[{"op":"replace","path":"/gender","value":"male"}]`

	// A deleted resource: 410.
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	h.do("DELETE", "/Patient/"+id, nil)
	expectOutcome(t, h.jsonPatch("/Patient/"+id, valid), http.StatusGone, "")
	// Patch does not bring it back.
	expectOutcome(t, h.do("GET", "/Patient/"+id, nil), http.StatusGone, "")

	// An unknown resource: 404, and nothing is created.
	expectOutcome(t, h.jsonPatch("/Patient/never-was", valid), http.StatusNotFound, "")
	expectOutcome(t, h.do("GET", "/Patient/never-was", nil), http.StatusNotFound, "")
	fp := fhirPathPatch(`{"name":"type","valueCode":"replace"}`, `{"name":"path","valueString":"Patient.gender"}`, `{"name":"value","valueCode":"male"}`)
	expectOutcome(t, h.do("PATCH", "/Patient/never-was", fp), http.StatusNotFound, "")

	// The result is validated as the resource's own type: gender is a
	// Patient element, not an Observation one.
	obs := h.create(t, "Observation", fixture(t, "observation.json"))
	r := h.jsonPatch("/Observation/"+obs, `[{"op":"add","path":"/gender","value":"male"}]`)
	if r.status != http.StatusUnprocessableEntity {
		t.Errorf("gender on an Observation: %d, want 422; %s", r.status, r.body)
	}
	if r := h.do("GET", "/Observation/"+obs, nil); r.header.Get("ETag") != `W/"1"` {
		t.Errorf("the refused patch changed the Observation: %s", r.header.Get("ETag"))
	}
}

func TestConditionalPatch(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", patientWith("cp-1", "One"))
	r := h.jsonPatch("/Patient?"+identQuery("cp-1"), `[{"op":"replace","path":"/gender","value":"female"}]`)
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"2"` {
		t.Fatalf("conditional JSON Patch, one match: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	if m := r.json(t); m["id"] != id || m["gender"] != "female" {
		t.Errorf("conditional patch result: %s", r.body)
	}
	fp := fhirPathPatch(`{"name":"type","valueCode":"replace"}`, `{"name":"path","valueString":"Patient.name[0].family"}`, `{"name":"value","valueString":"Patched"}`)
	r = h.do("PATCH", "/Patient?"+identQuery("cp-1"), fp, "If-Match", `W/"2"`)
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"3"` {
		t.Fatalf("conditional FHIRPath Patch, one match: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	if got := h.do("GET", "/Patient/"+id, nil); !bytes.Contains(got.body, []byte(`"Patched"`)) {
		t.Errorf("conditional FHIRPath Patch not applied: %s", got.body)
	}
	expectOutcome(t, h.do("PATCH", "/Patient?"+identQuery("cp-1"), fp, "If-Match", `W/"2"`), http.StatusPreconditionFailed, "")

	// No match: nothing to patch (404); patch never creates.
	expectOutcome(t, h.jsonPatch("/Patient?"+identQuery("cp-none"), `[{"op":"replace","path":"/gender","value":"male"}]`), http.StatusNotFound, "")
	// Multiple matches: 412, neither is patched.
	a := h.create(t, "Patient", patientWith("cp-dup", "A"))
	b := h.create(t, "Patient", patientWith("cp-dup", "B"))
	expectOutcome(t, h.jsonPatch("/Patient?"+identQuery("cp-dup"), `[{"op":"replace","path":"/gender","value":"male"}]`), http.StatusPreconditionFailed, "")
	for _, id := range []string{a, b} {
		if r := h.do("GET", "/Patient/"+id, nil); r.header.Get("ETag") != `W/"1"` {
			t.Errorf("Patient/%s changed by the refused patch: %s", id, r.header.Get("ETag"))
		}
	}
	// No criteria: 400.
	expectOutcome(t, h.jsonPatch("/Patient", `[{"op":"replace","path":"/gender","value":"male"}]`), http.StatusBadRequest, "")
}
