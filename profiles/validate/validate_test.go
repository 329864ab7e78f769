package validate

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	testPatientURL = "http://example.org/fhir/StructureDefinition/test-patient"
	testObsURL     = "http://example.org/fhir/StructureDefinition/test-observation"
	testBundleURL  = "http://example.org/fhir/StructureDefinition/test-bundle"
)

const validPatient = `{
 "resourceType": "Patient", "id": "p1",
 "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Jane Doe</div>"},
 "extension": [
  {"url": "http://example.org/fhir/StructureDefinition/birth-place", "valueString": "Oslo"},
  {"url": "http://example.org/fhir/StructureDefinition/ethnicity", "extension": [
    {"url": "category", "valueCoding": {"system": "http://example.org/fhir/CodeSystem/colors", "code": "crimson"}},
    {"url": "text", "valueString": "dark red"}]}
 ],
 "identifier": [
  {"system": "urn:oid:2.16.999.1", "value": "123456789"},
  {"system": "https://platform.example/patients", "value": "PT-1"}
 ],
 "active": true,
 "name": [{"family": "Doe", "given": ["Jane"]}],
 "telecom": [{"system": "phone", "value": "+47 1234"}, {"system": "email", "value": "jane@example.org"}],
 "gender": "female",
 "birthDate": "1980-01-02",
 "_birthDate": {"extension": [{"url": "http://example.org/fhir/StructureDefinition/birth-place", "valueString": "Oslo"}]},
 "maritalStatus": {"coding": [{"system": "http://example.org/fhir/CodeSystem/colors", "code": "blue"}]},
 "generalPractitioner": [{"reference": "Practitioner/1"}],
 "communication": [{"language": {"coding": [{"system": "urn:ietf:bcp:47", "code": "nb"}]}}]
}`

type ruleCase struct {
	name string
	edit func(m map[string]any)
	want *want // nil: no error or warning
}

func runCases(t *testing.T, v *Validator, base string, url string, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := base
			if c.edit != nil {
				body = edit(t, base, c.edit)
			}
			var res Result
			if url == "" {
				res = validate(t, v, body)
			} else {
				res = validate(t, v, body, url)
			}
			checkWant(t, res, c.want)
		})
	}
}

func arr(m map[string]any, k string) []any { a, _ := m[k].([]any); return a }
func obj(x any) map[string]any             { m, _ := x.(map[string]any); return m }

func TestPatientProfile(t *testing.T) {
	v := testValidator(t, Options{})
	runCases(t, v, validPatient, testPatientURL, []ruleCase{
		{name: "valid", want: nil},
		// cardinality
		{"required missing", func(m map[string]any) { delete(m, "birthDate"); delete(m, "_birthDate") }, &want{"cardinality", "error", "Patient.birthDate"}},
		{"max exceeded", func(m map[string]any) { obj(arr(m, "name")[0])["given"] = []any{"a", "b", "c"} }, &want{"cardinality", "error", "Patient.name[0].given"}},
		{"prohibited", func(m map[string]any) { m["contact"] = []any{map[string]any{"name": map[string]any{"family": "X"}}} }, &want{"cardinality", "error", "Patient.contact"}},
		{"nested required", func(m map[string]any) {
			m["identifier"] = append(arr(m, "identifier"), map[string]any{"value": "x"})
		}, &want{"cardinality", "error", "Patient.identifier[2].system"}},
		// fixed
		{"fixed", func(m map[string]any) { m["active"] = false }, &want{"fixed", "error", "Patient.active"}},
		// choice types
		{"choice type not allowed", func(m map[string]any) { m["deceasedDateTime"] = "2020-01-01" }, &want{"type", "error", "Patient.deceasedDateTime"}},
		{"choice type allowed", func(m map[string]any) { m["deceasedBoolean"] = false }, nil},
		// references
		{"reference target", func(m map[string]any) {
			m["generalPractitioner"] = []any{map[string]any{"reference": "Organization/1"}}
		}, &want{"reference", "error", "Patient.generalPractitioner[0]"}},
		{"reference absolute URL", func(m map[string]any) {
			m["generalPractitioner"] = []any{map[string]any{"reference": "https://example.org/fhir/Organization/1/_history/2"}}
		}, &want{"reference", "error", "Patient.generalPractitioner[0]"}},
		{"reference contained ok", func(m map[string]any) {
			m["contained"] = []any{map[string]any{"resourceType": "Practitioner", "id": "pr"}}
			m["generalPractitioner"] = []any{map[string]any{"reference": "#pr"}}
		}, nil},
		{"reference contained wrong type", func(m map[string]any) {
			m["contained"] = []any{map[string]any{"resourceType": "Organization", "id": "org", "name": "X"}}
			m["generalPractitioner"] = []any{map[string]any{"reference": "#org"}}
		}, &want{"reference", "error", "Patient.generalPractitioner[0]"}},
		{"reference contained missing (ref-1)", func(m map[string]any) {
			m["generalPractitioner"] = []any{map[string]any{"reference": "#nothere"}}
		}, &want{"ref-1", "error", "Patient.generalPractitioner[0]"}},
		// slicing
		{"slice missing", func(m map[string]any) { m["identifier"] = arr(m, "identifier")[1:] }, &want{"cardinality", "error", "Patient.identifier"}},
		{"slice too many", func(m map[string]any) {
			m["identifier"] = append(arr(m, "identifier"), map[string]any{"system": "urn:oid:2.16.999.1", "value": "987654321"})
		}, &want{"cardinality", "error", "Patient.identifier"}},
		{"slice child invariant", func(m map[string]any) { obj(arr(m, "identifier")[0])["value"] = "12" }, &want{"nid-1", "error", "Patient.identifier[0].value"}},
		{"open slicing extra item", func(m map[string]any) {
			m["identifier"] = append(arr(m, "identifier"), map[string]any{"system": "urn:other", "value": "1"})
		}, nil},
		{"pattern slice missing", func(m map[string]any) { m["telecom"] = arr(m, "telecom")[1:] }, &want{"cardinality", "error", "Patient.telecom"}},
		{"openAtEnd", func(m map[string]any) {
			m["telecom"] = []any{map[string]any{"system": "fax", "value": "1"}, map[string]any{"system": "phone", "value": "2"}}
		}, &want{"slicing", "error", "Patient.telecom[1]"}},
		{"ordered", func(m map[string]any) {
			m["telecom"] = []any{map[string]any{"system": "email", "value": "a@b"}, map[string]any{"system": "phone", "value": "2"}}
		}, &want{"slicing", "error", "Patient.telecom[1]"}},
		// bindings
		{"required binding", func(m map[string]any) { m["gender"] = "other" }, &want{"binding", "error", "Patient.gender"}},
		{"extensible binding", func(m map[string]any) {
			m["maritalStatus"] = map[string]any{"coding": []any{map[string]any{"system": "http://example.org/fhir/CodeSystem/colors", "code": "red"}}}
		}, &want{"binding", "warning", "Patient.maritalStatus"}},
		{"extensible binding via grey", func(m map[string]any) {
			m["maritalStatus"] = map[string]any{"coding": []any{map[string]any{"system": "http://example.org/fhir/CodeSystem/colors", "code": "grey"}}}
		}, nil},
		{"binding not checked", nil, &want{"binding", "information", "Patient.communication[0].language"}},
		// extensions
		{"extension value type", func(m map[string]any) {
			arr(m, "extension")[0] = map[string]any{"url": "http://example.org/fhir/StructureDefinition/birth-place", "valueBoolean": true}
		}, &want{"type", "error", "Patient.extension[0].valueBoolean"}},
		{"extension value missing", func(m map[string]any) {
			arr(m, "extension")[0] = map[string]any{"url": "http://example.org/fhir/StructureDefinition/birth-place", "extension": []any{map[string]any{"url": "x", "valueString": "y"}}}
		}, &want{"cardinality", "error", "Patient.extension[0].value"}},
		{"complex extension binding", func(m map[string]any) {
			obj(arr(obj(arr(m, "extension")[1]), "extension")[0])["valueCoding"] = map[string]any{"system": "http://example.org/fhir/CodeSystem/colors", "code": "blue"}
		}, &want{"binding", "error", "Patient.extension[1].extension[0].valueCoding"}},
		{"complex extension excluded code", func(m map[string]any) {
			obj(arr(obj(arr(m, "extension")[1]), "extension")[0])["valueCoding"] = map[string]any{"system": "http://example.org/fhir/CodeSystem/colors", "code": "orange"}
		}, &want{"binding", "error", "Patient.extension[1].extension[0].valueCoding"}},
		{"complex extension closed", func(m map[string]any) {
			e := obj(arr(m, "extension")[1])
			e["extension"] = append(arr(e, "extension"), map[string]any{"url": "other", "valueString": "x"})
		}, &want{"slicing", "error", "Patient.extension[1].extension[2]"}},
		{"complex extension missing part", func(m map[string]any) {
			e := obj(arr(m, "extension")[1])
			e["extension"] = arr(e, "extension")[1:]
		}, &want{"cardinality", "error", "Patient.extension[1].extension"}},
		{"complex extension with a value", func(m map[string]any) {
			obj(arr(m, "extension")[1])["valueString"] = "x"
		}, &want{"cardinality", "error", "Patient.extension[1].value"}},
		{"ext-1", func(m map[string]any) {
			arr(m, "extension")[0] = map[string]any{"url": "http://example.org/fhir/StructureDefinition/birth-place", "valueString": "x", "extension": []any{map[string]any{"url": "x", "valueString": "y"}}}
		}, &want{"ext-1", "error", "Patient.extension[0]"}},
		{"extension context", func(m map[string]any) {
			obj(arr(m, "name")[0])["extension"] = []any{arr(m, "extension")[1]}
		}, &want{"extension", "error", "Patient.name[0].extension[0]"}},
		{"unknown extension", func(m map[string]any) {
			m["extension"] = append(arr(m, "extension"), map[string]any{"url": "http://example.org/unknown", "valueString": "x"})
		}, &want{"extension", "warning", "Patient.extension[2]"}},
		{"unknown modifier extension", func(m map[string]any) {
			m["modifierExtension"] = []any{map[string]any{"url": "http://example.org/unknown", "valueString": "x"}}
		}, &want{"extension", "error", "Patient.modifierExtension[0]"}},
		// invariants
		{"invariant error", func(m map[string]any) { m["name"] = []any{map[string]any{"given": []any{"Jane"}}} }, &want{"tp-1", "error", "Patient"}},
		{"invariant warning", func(m map[string]any) { delete(m, "active") }, &want{"tp-2", "warning", "Patient"}},
		{"core invariant on a backbone (pat-1)", func(m map[string]any) {
			m["link"] = []any{map[string]any{"other": map[string]any{"reference": "Patient/2"}, "type": "seealso"}}
			m["contact"] = nil
			delete(m, "contact")
		}, nil},
		// base structure (every profile starts with the base definition)
		{"unknown element", func(m map[string]any) { m["foo"] = "bar" }, &want{"structure", "error", "Patient.foo"}},
		{"primitive format", func(m map[string]any) { m["birthDate"] = "1980-13-01" }, &want{"type", "error", "Patient.birthDate"}},
		{"primitive JSON type", func(m map[string]any) { m["active"] = "true" }, &want{"type", "error", "Patient.active"}},
		{"array expected", func(m map[string]any) { m["name"] = map[string]any{"family": "Doe"} }, &want{"structure", "error", "Patient.name"}},
		{"ele-1", func(m map[string]any) { m["name"] = []any{map[string]any{"family": "Doe"}, map[string]any{}} }, &want{"ele-1", "error", "Patient.name[1]"}},
		{"contained validated", func(m map[string]any) {
			m["contained"] = []any{map[string]any{"resourceType": "Practitioner", "id": "pr", "foo": 1}}
			m["generalPractitioner"] = []any{map[string]any{"reference": "#pr"}}
		}, &want{"structure", "error", "Patient.contained[0].foo"}},
		{"contained invariant dom-3", func(m map[string]any) {
			m["contained"] = []any{map[string]any{"resourceType": "Practitioner", "id": "pr"}}
		}, &want{"dom-3", "error", "Patient"}},
	})
}

func TestUnknownExtensionPolicy(t *testing.T) {
	body := edit(t, validPatient, func(m map[string]any) {
		m["extension"] = append(arr(m, "extension"), map[string]any{"url": "http://example.org/unknown", "valueString": "x"})
	})
	for policy, sev := range map[string]string{"ignore": "", "warning": "warning", "error": "error"} {
		res := validate(t, testValidator(t, Options{UnknownExtensions: policy}), body)
		found := ""
		for _, is := range res.Issues {
			if is.Rule == "extension" {
				found = is.Severity
			}
		}
		if found != sev {
			t.Errorf("policy %s: got severity %q, want %q:%s", policy, found, sev, dump(res.Issues))
		}
	}
}

const validObservation = `{
 "resourceType": "Observation", "id": "o1", "status": "final",
 "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">BP</div>"},
 "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/observation-category", "code": "vital-signs", "display": "Vital Signs"}]}],
 "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}], "text": "HR"},
 "subject": {"reference": "Patient/p1"},
 "effectiveDateTime": "2024-05-01T10:00:00Z",
 "valueQuantity": {"value": 72, "unit": "b", "system": "http://example.org/s", "code": "b"},
 "component": [
  {"code": {"coding": [{"system": "http://loinc.org", "code": "8480-6"}]}, "valueQuantity": {"value": 120, "unit": "mm[Hg]", "system": "http://unitsofmeasure.org", "code": "mm[Hg]"}},
  {"code": {"coding": [{"system": "http://loinc.org", "code": "8462-4"}]}, "valueQuantity": {"value": 80.0, "unit": "mm[Hg]", "system": "http://unitsofmeasure.org", "code": "mm[Hg]"}}
 ]
}`

func TestObservationProfile(t *testing.T) {
	v := testValidator(t, Options{})
	runCases(t, v, validObservation, testObsURL+"|1.0.0", []ruleCase{
		{name: "valid"},
		{"choice type restricted", func(m map[string]any) { delete(m, "valueQuantity"); m["valueString"] = "x" }, &want{"type", "error", "Observation.valueString"}},
		{"binding on Quantity", func(m map[string]any) { obj(m["valueQuantity"])["code"] = "z" }, &want{"binding", "error", "Observation.valueQuantity"}},
		{"binding on Quantity nested code", func(m map[string]any) { obj(m["valueQuantity"])["code"] = "c" }, nil},
		{"required child of choice", func(m map[string]any) { delete(obj(m["valueQuantity"]), "value") }, &want{"cardinality", "error", "Observation.valueQuantity.value"}},
		{"pattern", func(m map[string]any) {
			m["code"] = map[string]any{"coding": []any{map[string]any{"system": "http://loinc.org", "code": "1234-5"}}}
		}, &want{"pattern", "error", "Observation.code"}},
		{"closed pattern slicing", func(m map[string]any) {
			m["category"] = append(arr(m, "category"), map[string]any{"text": "other"})
		}, &want{"slicing", "error", "Observation.category[1]"}},
		{"value discriminator into pattern + exists", func(m map[string]any) {
			delete(obj(arr(m, "component")[0]), "valueQuantity")
			obj(arr(m, "component")[0])["dataAbsentReason"] = map[string]any{"text": "n/a"}
		}, &want{"cardinality", "error", "Observation.component"}},
		{"reference target", func(m map[string]any) { m["subject"] = map[string]any{"reference": "Group/1"} }, &want{"reference", "error", "Observation.subject"}},
		{"base choice twice", func(m map[string]any) { m["valueString"] = "x" }, &want{"structure", "error", "Observation.value[x]"}},
		{"base binding (status)", func(m map[string]any) { m["status"] = "done" }, &want{"binding", "error", "Observation.status"}},
		{"profiled type (SimpleQuantity)", func(m map[string]any) {
			m["referenceRange"] = []any{map[string]any{"low": map[string]any{"value": 1, "comparator": "<"}}}
		}, &want{"sqty-1", "error", "Observation.referenceRange[0].low"}},
		{"maxValue", func(m map[string]any) { obj(m["valueQuantity"])["value"] = json.Number("300.5") }, &want{"maxValue", "error", "Observation.valueQuantity.value"}},
		{"minValue", func(m map[string]any) { obj(m["valueQuantity"])["value"] = -1 }, &want{"minValue", "error", "Observation.valueQuantity.value"}},
		{"maxLength", func(m map[string]any) { m["note"] = []any{map[string]any{"text": "ééééééééééé"}} }, &want{"maxLength", "error", "Observation.note[0].text"}},
		{"maxLength ok", func(m map[string]any) { m["note"] = []any{map[string]any{"text": "éééééééééé"}} }, nil},
		{"decimal as string", func(m map[string]any) { obj(m["valueQuantity"])["value"] = "72" }, &want{"type", "error", "Observation.valueQuantity.value"}},
	})
}

func TestBundleProfile(t *testing.T) {
	v := testValidator(t, Options{})
	obs := edit(t, validObservation, func(m map[string]any) {
		m["subject"] = map[string]any{"reference": "urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a"}
	})
	bundle := `{"resourceType": "Bundle", "type": "collection", "entry": [
	  {"fullUrl": "urn:uuid:61ebe359-bfdc-4613-8bf2-c5e300945f0a", "resource": ` + validPatient + `},
	  {"fullUrl": "urn:uuid:88f151c0-a954-468a-88bd-5ae15c08e059", "resource": ` + obs + `}]}`
	prac := map[string]any{"fullUrl": "urn:uuid:9a1e3c7e-7f54-4a2e-9d7b-5b3b9c0d0a11", "resource": map[string]any{"resourceType": "Practitioner", "id": "x"}}
	runCases(t, v, bundle, testBundleURL, []ruleCase{
		{name: "valid"},
		{"fixed code", func(m map[string]any) { m["type"] = "batch" }, &want{"fixed", "error", "Bundle.type"}},
		{"closed type slicing", func(m map[string]any) { m["entry"] = append(arr(m, "entry"), prac) }, &want{"slicing", "error", "Bundle.entry[2]"}},
		{"profile discriminator", func(m map[string]any) {
			p := obj(obj(arr(m, "entry")[0])["resource"])
			delete(p, "birthDate")
			delete(p, "_birthDate")
		}, &want{"cardinality", "error", "Bundle.entry"}},
		{"entries validated against base", func(m map[string]any) {
			obj(obj(arr(m, "entry")[1])["resource"])["foo"] = true
		}, &want{"structure", "error", "Bundle.entry[1].resource.foo"}},
		{"reference resolved in Bundle", func(m map[string]any) {
			m["entry"] = append(arr(m, "entry"), prac)
			obj(obj(obj(arr(m, "entry")[1])["resource"])["subject"])["reference"] = prac["fullUrl"]
		}, &want{"reference", "error", "Bundle.entry[1].resource.subject"}},
	})
}

func TestProfileIssues(t *testing.T) {
	v := testValidator(t, Options{})
	res := validate(t, v, validObservation, testPatientURL)
	checkWant(t, res, &want{"profile", "error", "Observation"})
	res = validate(t, v, validObservation, "http://example.org/none")
	checkWant(t, res, &want{"profile", "warning", "Observation"})
	if err := v.Prepare(testPatientURL, testObsURL); err != nil {
		t.Fatal(err)
	}
	var upe *UnknownProfileError
	if err := v.Prepare("http://example.org/none"); !errors.As(err, &upe) {
		t.Fatalf("Prepare unknown: %v", err)
	}
}

func TestBadInvariants(t *testing.T) {
	v := testValidator(t, Options{})
	body := `{"resourceType": "Basic", "id": "b",
	  "contained": [{"resourceType": "Patient", "id": "pt", "name": [{"family": "X"}]}],
	  "code": {"text": "x"}, "identifier": [{"value": "a"}, {"value": "b"}], "subject": {"reference": "#pt"}}`
	res := validate(t, v, body, "http://example.org/fhir/StructureDefinition/bad-invariant")
	checkWant(t, res, &want{"bad-1", "warning", "Basic"})
	checkWant(t, res, &want{"bad-2", "warning", "Basic"})
	checkWant(t, res, &want{"slicing", "information", "Basic.identifier"})
	for _, is := range res.Issues {
		if is.Severity == "error" {
			t.Fatalf("unexpected error:%s", dump(res.Issues))
		}
	}
	// resolve() of a contained resource works with a sub-node as focus
	res = validate(t, v, strings.Replace(body, `"name": [{"family": "X"}]`, `"gender": "male"`, 1), "http://example.org/fhir/StructureDefinition/bad-invariant")
	checkWant(t, res, &want{"bad-4", "error", "Basic.subject"})
}

func TestMalformedJSON(t *testing.T) {
	v := New(nil, Options{})
	for _, body := range []string{`{`, `[]`, `{"resourceType": "Patient"} x`, `"x"`} {
		res := validate(t, v, body)
		if !res.HasErrors() || res.Issues[0].Code != "structure" {
			t.Errorf("%s: %v", body, res.Issues)
		}
	}
	res := validate(t, v, `{"resourceType": "NoSuchType"}`)
	checkWant(t, res, &want{"structure", "error", "NoSuchType"})
}

// An issue carries what an OperationOutcome issue needs (the server maps
// it in fhirserver.outcomeIssues): severity, type, rule and location.
func TestIssueFields(t *testing.T) {
	v := testValidator(t, Options{})
	res := validate(t, v, edit(t, validPatient, func(m map[string]any) { m["gender"] = "other" }), testPatientURL)
	found := false
	for _, is := range res.Issues {
		if is.Severity == "error" && is.Code == "code-invalid" && is.Rule == "binding" && is.Expression == "Patient.gender" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no binding error at Patient.gender:%s", dump(res.Issues))
	}
	if (Result{}).HasErrors() {
		t.Fatal("an empty result has errors")
	}
}

func TestNowOption(t *testing.T) {
	called := false
	v := New(nil, Options{Now: func() time.Time { called = true; return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }})
	validate(t, v, `{"resourceType": "Patient", "active": true}`)
	if !called {
		t.Fatal("Now not used")
	}
}

func TestCancelled(t *testing.T) {
	v := New(nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := `{"resourceType": "Patient", "name": [` + strings.Repeat(`{"family": "x", "given": ["a","b"]},`, 300) + `{"family": "y"}]}`
	if _, err := v.ValidateJSON(ctx, []byte(big)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	v := testValidator(t, Options{})
	done := make(chan Result, 8)
	for range 8 {
		go func() {
			r, _ := v.ValidateJSON(context.Background(), []byte(validPatient), testPatientURL)
			done <- r
		}()
	}
	for range 8 {
		if r := <-done; len(errorsAndWarnings(r)) > 0 {
			t.Fatalf("%s", dump(r.Issues))
		}
	}
}

// A resource with thousands of faults keeps MaxIssues issues and only
// counts the rest (200,000 bad identifiers once cost 200,000 issues and
// a 48.7 MB answer), and the count still refuses it.
func TestIssuesPastMaxAreCountedOnly(t *testing.T) {
	v := testValidator(t, Options{})
	const n = 3 * MaxIssues
	body := edit(t, validPatient, func(m map[string]any) {
		ids := make([]any, 0, n)
		for i := range n {
			ids = append(ids, map[string]any{"value": strconv.Itoa(i)}) // no system: an error each
		}
		m["identifier"] = ids
	})
	r := validate(t, v, body, testPatientURL)
	if len(r.Issues) > MaxIssues {
		t.Errorf("kept %d issues, want at most %d", len(r.Issues), MaxIssues)
	}
	if r.Omitted < n-MaxIssues || r.OmittedSeverity != "error" {
		t.Errorf("omitted %d (%q), want at least %d errors counted", r.Omitted, r.OmittedSeverity, n-MaxIssues)
	}
	if !r.HasErrors() {
		t.Error("the resource is not refused")
	}
	// Only the errors past the cap: a resource whose kept issues are all
	// warnings is still refused for the errors it counted.
	if !(Result{Issues: []Issue{{Severity: "warning"}}, Omitted: 1, OmittedSeverity: "error"}).HasErrors() {
		t.Error("counted errors do not refuse")
	}
}
