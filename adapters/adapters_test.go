package adapters

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const testProfileURL = "https://fhir.health.example/StructureDefinition"

var pack = Pack{ProfileURL: testProfileURL}

// cases returns the names of the input files in dir with the suffix.
func cases(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join("testdata", dir, "*"+suffix))
	if err != nil || len(m) == 0 {
		t.Fatalf("no cases in %s: %v", dir, err)
	}
	for i := range m {
		m[i] = strings.TrimSuffix(m[i], suffix)
	}
	return m
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func indent(t *testing.T, v any) []byte {
	t.Helper()
	var b []byte
	var err error
	if raw, ok := v.([]byte); ok {
		var buf bytes.Buffer
		err = json.Indent(&buf, raw, "", "  ")
		b = buf.Bytes()
	} else {
		b, err = json.MarshalIndent(v, "", "  ")
	}
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// golden compares got with the golden file (rewritten with -update).
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./adapters -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// POST /patients → Patient (golden), and the golden Patient → the body
// again.
func TestNewPatientBothWays(t *testing.T) {
	for _, c := range cases(t, "newpatient", ".request.json") {
		t.Run(filepath.Base(c), func(t *testing.T) {
			var in NewPatient
			readJSON(t, c+".request.json", &in)
			golden(t, c+".patient.json", indent(t, pack.PatientResource(in, "PT-42")))

			var res map[string]any
			readJSON(t, c+".patient.json", &res)
			if back := NewPatientOf(res); back != in {
				t.Errorf("Patient → body: %+v, want %+v", back, in)
			}
		})
	}
}

func TestPatientResourceTrims(t *testing.T) {
	var res map[string]any
	b := pack.PatientResource(NewPatient{FirstName: " Ada ", LastName: "Lovelace ", DateOfBirth: "1815-12-10", Phone: "  ", Email: " ada@example.org"}, "PT-1")
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	got := NewPatientOf(res)
	if got != (NewPatient{FirstName: "Ada", LastName: "Lovelace", DateOfBirth: "1815-12-10", Email: "ada@example.org"}) {
		t.Errorf("%+v", got)
	}
}

type summaryInput struct {
	Now          time.Time        `json:"now"`
	Patient      map[string]any   `json:"patient"`
	Conditions   []map[string]any `json:"conditions"`
	Observations []map[string]any `json:"observations"`
}

// Patient + Conditions + Observations → the summary (golden).
func TestSummary(t *testing.T) {
	for _, c := range cases(t, "summary", ".input.json") {
		t.Run(filepath.Base(c), func(t *testing.T) {
			var in summaryInput
			readJSON(t, c+".input.json", &in)
			golden(t, c+".summary.json", indent(t, pack.SummaryOf(in.Patient, in.Conditions, in.Observations, in.Now)))
		})
	}
}

func ffw(id, status, effective, outcome, validUntil string) map[string]any {
	o := map[string]any{
		"resourceType": "Observation", "id": id, "status": status,
		"code":                 map[string]any{"coding": []any{map[string]any{"system": pack.Canonical() + "/CodeSystem/workforce-observation", "code": "fitness-for-work"}}},
		"valueCodeableConcept": map[string]any{"coding": []any{map[string]any{"system": pack.Canonical() + "/CodeSystem/fitness-for-work-outcome", "code": outcome}}},
	}
	if effective != "" {
		o["effectiveDateTime"] = effective
	}
	if validUntil != "" {
		o["component"] = []any{map[string]any{
			"code":          map[string]any{"coding": []any{map[string]any{"system": pack.Canonical() + "/CodeSystem/workforce-observation", "code": "valid-until"}}},
			"valueDateTime": validUntil,
		}}
	}
	return o
}

func TestComplianceOf(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	weight := map[string]any{"resourceType": "Observation", "status": "final",
		"code": map[string]any{"coding": []any{map[string]any{"system": "http://loinc.org", "code": "29463-7"}}}}
	tests := []struct {
		name string
		obs  []map[string]any
		want string
	}{
		{"none", nil, ComplianceUnknown},
		{"other observations only", []map[string]any{weight}, ComplianceUnknown},
		{"fit", []map[string]any{ffw("a", "final", "2026-01-15", "fit", "2028-01-14")}, ComplianceCompliant},
		{"fit without a validity", []map[string]any{ffw("a", "final", "2026-01-15", "fit", "")}, ComplianceCompliant},
		{"fit with restrictions", []map[string]any{ffw("a", "amended", "2026-01-15", "fit-with-restrictions", "2027-01")}, ComplianceWithRestriction},
		{"valid through today", []map[string]any{ffw("a", "final", "2025-01-15", "fit", "2026-11-22")}, ComplianceCompliant},
		{"expired yesterday", []map[string]any{ffw("a", "final", "2025-01-15", "fit", "2026-11-21T23:00:00Z")}, ComplianceExpired},
		{"expired restricted", []map[string]any{ffw("a", "final", "2024-01-15", "fit-with-restrictions", "2025")}, ComplianceExpired},
		{"temporarily unfit", []map[string]any{ffw("a", "final", "2026-01-15", "temporarily-unfit", "")}, ComplianceNonCompliant},
		{"permanently unfit", []map[string]any{ffw("a", "corrected", "2026-01-15", "permanently-unfit", "")}, ComplianceNonCompliant},
		{"an unknown outcome", []map[string]any{ffw("a", "final", "2026-01-15", "maybe", "")}, ComplianceUnknown},
		{"the latest wins", []map[string]any{
			ffw("new", "final", "2026-03-01T08:00:00+01:00", "temporarily-unfit", ""),
			ffw("old", "final", "2026-02-28", "fit", "2028-01-01"),
		}, ComplianceNonCompliant},
		{"the latest wins, in any order", []map[string]any{
			ffw("old", "final", "2025-02-28", "temporarily-unfit", ""),
			ffw("new", "final", "2026-03-01", "fit", "2028-01-01"),
		}, ComplianceCompliant},
		{"preliminary and entered-in-error are ignored", []map[string]any{
			ffw("a", "final", "2025-02-28", "fit", "2028-01-01"),
			ffw("b", "preliminary", "2026-03-01", "permanently-unfit", ""),
			ffw("c", "entered-in-error", "2026-03-02", "permanently-unfit", ""),
		}, ComplianceCompliant},
	}
	for _, tt := range tests {
		if got := pack.ComplianceOf(tt.obs, now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

type anonymizeInput struct {
	Now      time.Time      `json:"now"`
	Resource map[string]any `json:"resource"`
}

func TestAnonymizePatient(t *testing.T) {
	for _, c := range cases(t, "anonymize", ".input.json") {
		t.Run(filepath.Base(c), func(t *testing.T) {
			var in anonymizeInput
			readJSON(t, c+".input.json", &in)
			before := string(indent(t, in.Resource))
			out := AnonymizePatient(in.Resource, in.Now)
			if string(indent(t, in.Resource)) != before {
				t.Error("AnonymizePatient changed its input")
			}
			got := indent(t, out)
			golden(t, c+".output.json", got)
			if !IsAnonymized(out) || out["active"] != false {
				t.Errorf("not labelled or still active: %s", got)
			}
			again := indent(t, AnonymizePatient(out, in.Now))
			if !bytes.Equal(again, got) {
				t.Errorf("not idempotent:\n%s", again)
			}
			// Nothing identifying is left.
			for _, s := range IdentifyingStrings(in.Resource) {
				if bytes.Contains(got, []byte(s)) {
					t.Errorf("%q survived", s)
				}
			}
		})
	}
}

func TestAnonymizeBirthDate(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for bd, want := range map[string]any{
		"1987-04-12": "1987", "1987": "1987", "1937-01-01": "1937", "1936-12-31": nil, "1900": nil, "bogus": nil,
	} {
		out := AnonymizePatient(map[string]any{"resourceType": "Patient", "id": "PT-1", "birthDate": bd}, now)
		if got, ok := out["birthDate"]; want == nil && ok || want != nil && got != want {
			t.Errorf("birthDate %s → %v, want %v", bd, got, want)
		}
	}
}

type scrubInput struct {
	PatientRef    string         `json:"patient_ref"`
	IdentifyingOf map[string]any `json:"identifying_of"`
	Resource      map[string]any `json:"resource"`
}

type scrubOutput struct {
	Changed  bool           `json:"changed"`
	Resource map[string]any `json:"resource"`
}

func TestScrubReferencing(t *testing.T) {
	for _, c := range cases(t, "scrub", ".input.json") {
		t.Run(filepath.Base(c), func(t *testing.T) {
			var in scrubInput
			readJSON(t, c+".input.json", &in)
			out, changed := ScrubReferencing(in.Resource, in.PatientRef, IdentifyingStrings(in.IdentifyingOf)...)
			golden(t, c+".output.json", indent(t, scrubOutput{changed, out}))
			if _, again := ScrubReferencing(out, in.PatientRef, IdentifyingStrings(in.IdentifyingOf)...); again {
				t.Error("a second scrub changed something")
			}
		})
	}
}

func TestErasedOf(t *testing.T) {
	p := map[string]any{"resourceType": "Patient", "id": "PT-9", "meta": map[string]any{"lastUpdated": "2026-11-22T10:11:12.345+00:00"}}
	if got := ErasedOf(p); got != (Erased{PatientID: "PT-9", Status: "anonymized", AnonymizedAt: "2026-11-22T10:11:12Z"}) {
		t.Errorf("%+v", got)
	}
}
