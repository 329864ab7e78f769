package profiles

import (
	"slices"
	"testing"
)

func TestPatientGenderBinding(t *testing.T) {
	sd, _ := TypeDefinition("Patient")
	if sd == nil {
		t.Fatal("TypeDefinition(Patient) not found")
	}
	e, ok := sd.Element("Patient.gender")
	if !ok || e.Binding == nil {
		t.Fatalf("Patient.gender binding = %+v", e)
	}
	if e.Binding.Strength != "required" || e.Binding.ValueSet != "http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1" {
		t.Errorf("Patient.gender binding = %+v", e.Binding)
	}
	vs, ok := ValueSetByURL(e.Binding.ValueSet)
	if !ok {
		t.Fatalf("ValueSetByURL(%s) not found", e.Binding.ValueSet)
	}
	if vs.URL != "http://hl7.org/fhir/ValueSet/administrative-gender" || vs.Compose == nil || len(vs.Compose.Include) != 1 {
		t.Fatalf("administrative-gender ValueSet = %+v", vs)
	}
	system := vs.Compose.Include[0].System
	cs, ok := CodeSystemByURL(system)
	if !ok {
		t.Fatalf("CodeSystemByURL(%s) not found", system)
	}
	var codes []string
	for _, c := range cs.Concept {
		codes = append(codes, c.Code)
	}
	if want := []string{"male", "female", "other", "unknown"}; !slices.Equal(codes, want) {
		t.Errorf("administrative-gender codes = %v, want %v", codes, want)
	}
	if c, ok := cs.Lookup("female"); !ok || c.Display != "Female" {
		t.Errorf("Lookup(female) = %+v, %v", c, ok)
	}
	if _, ok := cs.Lookup("Female"); ok {
		t.Error("Lookup(Female) found; codes are case-sensitive")
	}
}

func TestLookupNested(t *testing.T) {
	// issue-type nests codes: "required" sits under "invalid".
	cs, ok := CodeSystemByURL("http://hl7.org/fhir/issue-type")
	if !ok {
		t.Fatal("issue-type not found")
	}
	for _, code := range []string{"invalid", "required", "not-found", "exception"} {
		if _, ok := cs.Lookup(code); !ok {
			t.Errorf("issue-type Lookup(%s) not found", code)
		}
	}
	for _, c := range cs.Concept {
		if c.Code == "required" {
			t.Error("required is a top-level concept; want it nested under invalid")
		}
	}
	if _, ok := cs.Lookup("nope"); ok {
		t.Error("issue-type Lookup(nope) found")
	}
}

// Every required binding of the core resources and types must resolve,
// except the few the specification leaves to external terminology.
func TestRequiredBindingsResolve(t *testing.T) {
	unresolvable := map[string]bool{
		// Defined by LOINC, not by the FHIR specification.
		"http://loinc.org/vs/LL379-9": true,
		// The package's EvidenceVariable follows FHIR R5 here.
		"http://hl7.org/fhir/ValueSet/characteristic-combination": true,
	}
	// Code systems the specification does not define (UCUM, MIME types,
	// currencies).
	external := map[string]bool{
		"http://unitsofmeasure.org": true,
		"urn:ietf:bcp:13":           true,
		"urn:iso:std:iso:4217":      true,
	}
	sds, err := StructureDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sd := range sds {
		for _, e := range sd.Elements {
			if e.Binding == nil || e.Binding.Strength != "required" || e.Binding.ValueSet == "" {
				continue
			}
			url := stripVersion(e.Binding.ValueSet)
			if seen[url] || unresolvable[url] {
				continue
			}
			seen[url] = true
			vs, ok := ValueSetByURL(url)
			if !ok {
				t.Errorf("%s: required ValueSet %s not embedded", e.ID, url)
				continue
			}
			for _, inc := range vs.Compose.Include {
				if inc.System == "" || external[inc.System] {
					continue
				}
				if _, ok := CodeSystemByURL(inc.System); !ok {
					t.Errorf("ValueSet %s: CodeSystem %s not embedded", url, inc.System)
				}
			}
			for _, inc := range vs.Compose.Include {
				for _, ref := range inc.ValueSet {
					if _, ok := ValueSetByURL(ref); !ok {
						t.Errorf("ValueSet %s: included ValueSet %s not embedded", url, ref)
					}
				}
			}
		}
	}
	if len(seen) < 200 {
		t.Errorf("only %d required ValueSets seen", len(seen))
	}
}

func BenchmarkTerminologyDecode(b *testing.B) {
	for b.Loop() {
		if _, err := decodeTerminology(); err != nil {
			b.Fatal(err)
		}
	}
}
