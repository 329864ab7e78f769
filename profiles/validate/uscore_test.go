package validate

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

// usCoreDir is the US Core 3.1.0 package of the shared reference folder
// (KILN_SHARED, which make test sets when ../shared is present).
var usCoreDir = filepath.Join(os.Getenv("KILN_SHARED"), "fhir", "us-core-3.1.0")

var usCoreSet = sync.OnceValues(func() (*profiles.Set, error) {
	return profiles.NewSet(profiles.SetOptions{Packages: []string{usCoreDir}})
})

func usCoreValidator(t testing.TB) *Validator {
	t.Helper()
	if os.Getenv("KILN_SHARED") == "" {
		t.Skip("set KILN_SHARED to the shared reference folder (with fhir/us-core-3.1.0) to run")
	}
	set, err := usCoreSet()
	if err != nil {
		t.Fatal(err)
	}
	return New(set, Options{})
}

const usCorePatient = `{"resourceType": "Patient", "id": "x",
 "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Amy Shaw</div>"},
 "extension": [
  {"url": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race", "extension": [
    {"url": "ombCategory", "valueCoding": {"system": "urn:oid:2.16.840.1.113883.6.238", "code": "2106-3", "display": "White"}},
    {"url": "text", "valueString": "White"}]},
  {"url": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex", "valueCode": "F"}],
 "identifier": [{"system": "http://hospital.smarthealthit.org", "value": "1032702"}],
 "name": [{"family": "Shaw", "given": ["Amy"]}], "gender": "female", "birthDate": "1987-02-20"}`

// TestUSCore validates against US Core 3.1.0 loaded as a package into a
// profiles.Set (full published snapshots).
func TestUSCore(t *testing.T) {
	v := usCoreValidator(t)
	const url = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"
	runCases(t, v, usCorePatient, url, []ruleCase{
		{name: "valid"},
		{"identifier.system missing", func(m map[string]any) { delete(obj(arr(m, "identifier")[0]), "system") },
			&want{"cardinality", "error", "Patient.identifier[0].system"}},
		{"race code outside the value set", func(m map[string]any) {
			obj(arr(obj(arr(m, "extension")[0]), "extension")[0])["valueCoding"] = map[string]any{"system": "urn:oid:2.16.840.1.113883.6.238", "code": "9999-9"}
		}, &want{"binding", "error", "Patient.extension[0].extension[0].valueCoding"}},
		{"race as a simple extension", func(m map[string]any) {
			arr(m, "extension")[0] = map[string]any{"url": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race", "valueString": "White"}
		}, &want{"cardinality", "error", "Patient.extension[0].value"}},
		{"name missing", func(m map[string]any) { delete(m, "name") }, &want{"cardinality", "error", "Patient.name"}},
		{"birthsex code", func(m map[string]any) { obj(arr(m, "extension")[1])["valueCode"] = "X" },
			&want{"binding", "error", "Patient.extension[1].valueCode"}},
	})
	obs := `{"resourceType": "Observation", "id": "o", "status": "final",
	 "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"},
	 "category": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/observation-category", "code": "laboratory"}]}],
	 "code": {"coding": [{"system": "http://loinc.org", "code": "2339-0"}]}, "subject": {"reference": "Patient/x"},
	 "effectiveDateTime": "2020-01-01", "valueQuantity": {"value": 44, "unit": "mg/dL", "system": "http://unitsofmeasure.org", "code": "mg/dL"}}`
	runCases(t, v, obs, "http://hl7.org/fhir/us/core/StructureDefinition/us-core-observation-lab", []ruleCase{
		{name: "valid"},
		{"category slice missing", func(m map[string]any) {
			m["category"] = []any{map[string]any{"text": "other"}}
		}, &want{"cardinality", "error", "Observation.category"}},
		{"subject to a Group", func(m map[string]any) { m["subject"] = map[string]any{"reference": "Group/1"} },
			&want{"reference", "error", "Observation.subject"}},
	})
}

func BenchmarkValidateUSCorePatient(b *testing.B) {
	v := usCoreValidator(b)
	const url = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"
	res := decode(b, benchPatient)
	if err := v.Prepare(url); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Validate(b.Context(), res, url); err != nil {
			b.Fatal(err)
		}
	}
}
