package fhirjson

import (
	"errors"
	"testing"

	"github.com/google/fhir/go/fhirversion"
	"github.com/google/fhir/go/jsonformat"
)

// TestParseErrorShape pins the one place that reads google/fhir's internal
// error type: after an upgrade that changes it, this fails by name instead
// of every parse error turning into the generic message.
func TestParseErrorShape(t *testing.T) {
	um, err := jsonformat.NewUnmarshaller("UTC", fhirversion.R4)
	if err != nil {
		t.Fatal(err)
	}
	_, err = um.Unmarshal([]byte(`{"resourceType":"Patient","colour":"blue","active":"yes"}`))
	ues, ok := unmarshalErrors(err)
	if !ok {
		t.Fatalf("google/fhir's parse error %T no longer has the fields Path, Details and Diagnostics", err)
	}
	want := map[umError]bool{
		{Path: "Patient", Details: "unknown field", Diagnostics: `"colour"`}:              true,
		{Path: "Patient.active", Details: "expected boolean", Diagnostics: `found "yes"`}: true,
	}
	for _, ue := range ues {
		if !want[ue] {
			t.Errorf("unexpected parse error %+v", ue)
		}
		delete(want, ue)
	}
	for ue := range want {
		t.Errorf("missing parse error %+v", ue)
	}
	if _, ok := unmarshalErrors(errors.New("other")); ok {
		t.Error("a plain error was read as a parse error")
	}
}

// TestReportedDetails proves the validation errors are read through the
// ErrorReporter hook's public data alone: the element path it hands over
// and the error's text.
func TestReportedDetails(t *testing.T) {
	um, err := jsonformat.NewUnmarshaller("UTC", fhirversion.R4)
	if err != nil {
		t.Fatal(err)
	}
	var rep reporter
	body := `{"resourceType":"Observation","code":{"text":"x"},"subject":{"reference":"Practitioner/1"}}`
	if _, err := um.UnmarshalWithErrorReporter([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range rep.errs {
		for _, d := range reportedDetails(r.path, r.err) {
			got[r.path+" | "+d] = true
		}
	}
	for _, w := range []string{
		`Observation | missing required field "status"`,
		`Observation.subject | invalid reference to a Practitioner resource, want Patient, Group, Device, Location`,
	} {
		if !got[w] {
			t.Errorf("missing %q in %v", w, got)
		}
	}
}
