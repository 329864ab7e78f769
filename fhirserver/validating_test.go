package fhirserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/profiles/validate"
)

// fakeProfiles stands in for profiles/validate: the server's part is which
// profiles it asks for and what it does with the answer.
//   - every resource: active=false is an error (as a base invariant);
//   - profile testPatient: a Patient needs a birthDate.
type fakeProfiles struct{}

const testPatient = "https://profiles.test/StructureDefinition/Patient"

func (fakeProfiles) Validate(_ context.Context, res map[string]any, urls ...string) (validate.Result, error) {
	var r validate.Result
	if res["active"] == false {
		r.Issues = append(r.Issues, validate.Issue{Severity: "error", Code: "invariant", Expression: "Patient.active",
			Rule: "test-1", Message: "a test patient must not be inactive"})
	}
	if slices.Contains(urls, testPatient) && res["birthDate"] == nil {
		r.Issues = append(r.Issues, validate.Issue{Severity: "error", Code: "required", Expression: "Patient.birthDate",
			Rule: "cardinality", Profile: testPatient, Message: "minimum required = 1, but only found 0"})
	}
	return r, nil
}

func withValidation(mode validation.Mode, unknown string, bound bool) func(*fhirserver.Config) {
	return func(c *fhirserver.Config) {
		c.Validation = validation.Config{
			Mode: mode, Validator: fakeProfiles{}, UnknownProfile: unknown,
			Known: func(url string) bool { return url == testPatient },
		}
		if bound {
			c.Validation.TypeProfiles = map[string][]string{"Patient": {testPatient}}
		}
	}
}

const (
	patientNoBirthDate = `{"resourceType":"Patient","name":[{"family":"Adeyemi"}]}`
	patientBogus       = `{"resourceType":"Patient","active":false,"birthDate":"1980-02-03"}`
	patientValid       = `{"resourceType":"Patient","birthDate":"1980-02-03"}`
)

func TestWritesAreValidatedPerMode(t *testing.T) {
	unknownProfile := `{"resourceType":"Patient","meta":{"profile":["https://elsewhere.test/Unknown"]},"birthDate":"1980-02-03"}`
	knownProfile := `{"resourceType":"Patient","meta":{"profile":["` + testPatient + `"]}}`
	tests := []struct {
		name    string
		mode    validation.Mode
		unknown string
		bound   bool
		body    string
		status  int
		mention string
	}{
		{"profiles: the type's bound profile applies", validation.Profiles, "warn", true, patientNoBirthDate, 422, "Patient.birthDate"},
		{"profiles: a valid resource passes", validation.Profiles, "warn", true, patientValid, 201, ""},
		{"profiles: base errors refuse the write", validation.Profiles, "warn", false, patientBogus, 422, "test-1"},
		{"profiles: a known meta.profile applies", validation.Profiles, "warn", false, knownProfile, 422, "cardinality (" + testPatient + ")"},
		{"profiles: an unknown meta.profile warns only", validation.Profiles, "warn", false, unknownProfile, 201, ""},
		{"profiles: an unknown meta.profile can be refused", validation.Profiles, "error", false, unknownProfile, 422, "https://elsewhere.test/Unknown"},
		{"base: bound profiles do not apply", validation.Base, "warn", true, patientNoBirthDate, 201, ""},
		{"base: base errors refuse the write", validation.Base, "warn", true, patientBogus, 422, "Patient.active"},
		{"off: structure only", validation.Off, "warn", true, patientBogus, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withValidation(tt.mode, tt.unknown, tt.bound))
			r := h.do("POST", "/Patient", []byte(tt.body))
			if tt.status != 201 {
				expectOutcome(t, r, tt.status, tt.mention)
				return
			}
			if r.status != 201 {
				t.Fatalf("status %d, want 201: %s", r.status, r.body)
			}
			// Updates and patches pass the same check.
			loc := r.header.Get("Location")
			id := strings.Split(strings.TrimPrefix(loc, h.base+"/Patient/"), "/")[0]
			if tt.mode == validation.Profiles && tt.bound {
				up := h.do("PUT", "/Patient/"+id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`))
				expectOutcome(t, up, 422, "Patient.birthDate")
				p := h.do("PATCH", "/Patient/"+id, []byte(`[{"op":"remove","path":"/birthDate"}]`), "Content-Type", "application/json-patch+json")
				expectOutcome(t, p, 422, "Patient.birthDate")
			}
		})
	}
}

// One invalid entry refuses a whole transaction with the entry's outcome.
func TestTransactionEntriesAreValidated(t *testing.T) {
	h := newHarness(t, withValidation(validation.Profiles, "warn", true))
	needsTransactions(t, h)
	bundle := `{"resourceType":"Bundle","type":"transaction","entry":[
	 {"fullUrl":"urn:uuid:9d1a4a52-0000-4000-8000-000000000001","resource":` + patientValid + `,"request":{"method":"POST","url":"Patient"}},
	 {"fullUrl":"urn:uuid:9d1a4a52-0000-4000-8000-000000000002","resource":` + patientNoBirthDate + `,"request":{"method":"POST","url":"Patient"}}]}`
	r := h.do("POST", "", []byte(bundle))
	expectOutcome(t, r, 422, "Patient.birthDate")
	if s := h.do("GET", "/Patient?_total=accurate", nil); !strings.Contains(string(s.body), `"total":0`) {
		t.Errorf("the transaction wrote something: %s", s.body)
	}
}

func TestValidateOperation(t *testing.T) {
	h := newHarness(t, withValidation(validation.Off, "warn", true))
	stored := h.do("PUT", "/Patient/p1", []byte(`{"resourceType":"Patient","id":"p1"}`)) // accepted: writes are not validated
	if stored.status != 201 {
		t.Fatalf("seed: %d %s", stored.status, stored.body)
	}
	params := func(resource, extra string) string {
		return `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":` + resource + `}` + extra + `]}`
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		mention                  string
	}{
		{"invalid resource: 200 with the errors", "POST", "/Patient/$validate", patientNoBirthDate, 200, "Patient.birthDate"},
		{"valid resource", "POST", "/Patient/$validate", patientValid, 200, "the resource is valid"},
		{"structure errors are reported, not refused", "POST", "/Patient/$validate", `{"resourceType":"Patient","colour":"blue"}`, 200, "colour"},
		{"Parameters body", "POST", "/Patient/$validate", params(patientBogus, ""), 200, "Patient.active"},
		{"nominated profile", "POST", "/Patient/$validate", params(`{"resourceType":"Patient"}`, `,{"name":"profile","valueCanonical":"`+testPatient+`"}`), 200, "cardinality"},
		{"unknown nominated profile", "POST", "/Patient/$validate?profile=https://elsewhere.test/X", patientValid, 200, "is not known to this server"},
		{"another type than the URL's", "POST", "/Observation/$validate", patientValid, 200, "not a Observation"},
		{"a stored resource", "GET", "/Patient/p1/$validate", "", 200, "Patient.birthDate"},
		{"a stored resource that does not exist", "GET", "/Patient/nope/$validate", "", 404, "nope"},
		{"an update of a stored resource", "POST", "/Patient/p1/$validate", `{"resourceType":"Patient","id":"p2","birthDate":"1980-01-01"}`, 200, "not the id of the URL"},
		{"mode delete", "POST", "/Patient/p1/$validate?mode=delete", params(`{"resourceType":"Patient"}`, ""), 200, "no rule of this server prevents deleting"},
		{"unknown mode", "POST", "/Patient/$validate?mode=bogus", patientValid, 400, "bogus"},
		{"Parameters without a resource", "POST", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[]}`, 400, "resource"},
		{"not JSON", "POST", "/Patient/$validate", `{"resourceType":`, 400, "not a FHIR JSON resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			expectOutcome(t, h.do(tt.method, tt.path, body), tt.status, tt.mention)
		})
	}
	if r := h.do("GET", "/Patient/p1", nil); r.status != 200 {
		t.Errorf("$validate changed the store: %d", r.status)
	}
}

func TestValidateWithoutValidatorIs501(t *testing.T) {
	h := newHarness(t)
	expectOutcome(t, h.do("POST", "/Patient/$validate", []byte(patientValid)), http.StatusNotImplemented, "structure only")
	if r := h.do("GET", "/metadata", nil); strings.Contains(string(r.body), `"validate"`) {
		t.Errorf("the CapabilityStatement claims $validate without a validator")
	}
}

func TestCapabilityListsValidateAndProfiles(t *testing.T) {
	h := newHarness(t, withValidation(validation.Profiles, "warn", true))
	body := string(h.do("GET", "/metadata", nil).body)
	for _, want := range []string{`"name":"validate"`, `"supportedProfile":["` + testPatient + `"]`} {
		if !strings.Contains(body, want) {
			t.Errorf("CapabilityStatement lacks %s", want)
		}
	}
}
