package validate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// benchPatient is a typical Patient of about 2 KB.
const benchPatient = `{
 "resourceType": "Patient", "id": "example",
 "meta": {"versionId": "3", "lastUpdated": "2024-05-01T10:00:00Z"},
 "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Jane Doe, born 2 January 1980</p></div>"},
 "extension": [
  {"url": "http://example.org/fhir/StructureDefinition/birth-place", "valueString": "Oslo"},
  {"url": "http://example.org/fhir/StructureDefinition/ethnicity", "extension": [
    {"url": "category", "valueCoding": {"system": "http://example.org/fhir/CodeSystem/colors", "code": "crimson"}},
    {"url": "text", "valueString": "dark red"}]}
 ],
 "identifier": [
  {"use": "official", "system": "urn:oid:2.16.999.1", "value": "123456789",
   "type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "NI"}]}},
  {"use": "usual", "system": "https://platform.example/patients", "value": "PT-1",
   "period": {"start": "2020-01-01"}, "assigner": {"display": "Platform"}}
 ],
 "active": true,
 "name": [
  {"use": "official", "family": "Doe", "given": ["Jane", "Mary"], "prefix": ["Ms"]},
  {"use": "maiden", "family": "Smith", "given": ["Jane"], "period": {"end": "2005-06-01"}}
 ],
 "telecom": [
  {"system": "phone", "value": "+47 1234 5678", "use": "mobile", "rank": 1},
  {"system": "email", "value": "jane@example.org", "use": "home"}
 ],
 "gender": "female",
 "birthDate": "1980-01-02",
 "address": [{"use": "home", "type": "both", "text": "1 Main St, Oslo", "line": ["1 Main St"], "city": "Oslo",
  "postalCode": "0150", "country": "NO", "period": {"start": "2010-01-01"}}],
 "maritalStatus": {"coding": [{"system": "http://example.org/fhir/CodeSystem/colors", "code": "blue"}], "text": "Married"},
 "generalPractitioner": [{"reference": "Practitioner/1", "display": "Dr Who"}],
 "managingOrganization": {"reference": "Organization/1"},
 "communication": [{"language": {"coding": [{"system": "urn:ietf:bcp:47", "code": "nb"}], "text": "Norwegian"}, "preferred": true}]
}`

func BenchmarkValidatePatient(b *testing.B) {
	v := testValidator(b, Options{})
	if err := v.Prepare(testPatientURL); err != nil {
		b.Fatal(err)
	}
	var res map[string]any
	d := json.NewDecoder(strings.NewReader(benchPatient))
	d.UseNumber()
	if err := d.Decode(&res); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name     string
		profiles []string
	}{{"base", nil}, {"profile", []string{testPatientURL}}} {
		r, err := v.Validate(context.Background(), res, bc.profiles...)
		if err != nil || len(errorsAndWarnings(r)) > 0 {
			b.Fatalf("%s: %v%s", bc.name, err, dump(r.Issues))
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Validate(context.Background(), res, bc.profiles...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
