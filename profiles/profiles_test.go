package profiles

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
)

func TestResourceTypes(t *testing.T) {
	got := ResourceTypes()
	if len(got) != 146 {
		t.Errorf("len(ResourceTypes()) = %d, want 146 (FHIR R4 4.0.1)", len(got))
	}
	if !slices.IsSorted(got) {
		t.Error("ResourceTypes() is not sorted")
	}
	if len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Error("ResourceTypes() has duplicates")
	}
	for _, name := range []string{"Patient", "Observation", "Bundle", "Binary", "Parameters", "Account", "VisionPrescription"} {
		if !slices.Contains(got, name) {
			t.Errorf("ResourceTypes() lacks %s", name)
		}
	}
	for _, name := range []string{"Resource", "DomainResource", "MetadataResource", "HumanName", "string", "Quantity", "SimpleQuantity", "SubscriptionStatus"} {
		if slices.Contains(got, name) {
			t.Errorf("ResourceTypes() contains %s", name)
		}
	}

	got[0] = "Mutated"
	if ResourceTypes()[0] == "Mutated" {
		t.Error("ResourceTypes() returns shared storage")
	}
}

// The pre-computed list must agree with the StructureDefinitions.
func TestResourceTypesMatchStructureDefinitions(t *testing.T) {
	sds, err := StructureDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, sd := range sds {
		if sd.Kind == "resource" && !sd.Abstract && sd.Derivation == "specialization" {
			want = append(want, sd.Type)
		}
	}
	slices.Sort(want)
	if got := ResourceTypes(); !slices.Equal(got, want) {
		t.Errorf("resourcetypes.json = %v\nStructureDefinitions give %v", got, want)
	}
}

func TestIsResourceType(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"Patient", true},
		{"Observation", true},
		{"Bundle", true},
		{"OperationOutcome", true},
		{"patient", false},
		{"Resource", false},
		{"DomainResource", false},
		{"HumanName", false},
		{"string", false},
		{"SubscriptionStatus", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsResourceType(tt.name); got != tt.want {
			t.Errorf("IsResourceType(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	if err := Load(); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentFirstUse(t *testing.T) {
	// Run with -race: the lazy decoding must be safe on first use.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := TypeDefinition("Patient"); !ok {
				t.Error("TypeDefinition(Patient) not found")
			}
			if _, ok := ValueSetByURL("http://hl7.org/fhir/ValueSet/administrative-gender"); !ok {
				t.Error("administrative-gender not found")
			}
			if _, err := SearchParameters(); err != nil {
				t.Error(err)
			}
			if !IsResourceType("Patient") {
				t.Error("IsResourceType(Patient) = false")
			}
		}()
	}
	wg.Wait()
}

func TestPatientCompartment(t *testing.T) {
	c, err := PatientCompartment()
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != "Patient" || c.URL != "http://hl7.org/fhir/CompartmentDefinition/patient" {
		t.Errorf("compartment = %s %s", c.Code, c.URL)
	}
	tests := []struct {
		resourceType string
		want         []string
	}{
		{"Observation", []string{"subject", "performer"}},
		{"Patient", []string{"link"}},
		{"Encounter", []string{"patient"}},
		{"Group", []string{"member"}},
		{"AllergyIntolerance", []string{"patient", "recorder", "asserter"}},
		{"Practitioner", nil},
		{"Task", nil},
		{"CodeSystem", nil},
	}
	for _, tt := range tests {
		if got := c.Params(tt.resourceType); !slices.Equal(got, tt.want) {
			t.Errorf("Params(%s) = %v, want %v", tt.resourceType, got, tt.want)
		}
	}
	for rt := range c.Resources {
		if !IsResourceType(rt) {
			t.Errorf("compartment lists unknown resource type %s", rt)
		}
	}
}

func BenchmarkResourceTypesDecode(b *testing.B) {
	for b.Loop() {
		decodeResourceTypes()
	}
}

func BenchmarkIsResourceType(b *testing.B) {
	IsResourceType("Patient")
	names := []string{"Patient", "Observation", "HumanName", "NotAType"}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		IsResourceType(names[i%len(names)])
	}
}

// The embedded JSON files must decode without unknown-field surprises:
// re-encoding a typed value must not lose a key the generator keeps.
func TestSearchParameterRoundTrip(t *testing.T) {
	var raw []map[string]json.RawMessage
	if err := decodeGzip("searchparameters.json.gz", &raw); err != nil {
		t.Fatal(err)
	}
	sps, err := SearchParameters()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != len(sps) {
		t.Fatalf("%d raw, %d typed", len(raw), len(sps))
	}
	for i, sp := range sps {
		data, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		for k := range raw[i] {
			if _, ok := back[k]; !ok && k != "resourceType" {
				t.Errorf("SearchParameter %s: key %q lost by the typed view", sp.ID, k)
			}
		}
	}
}
