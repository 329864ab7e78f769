package profiles

import (
	"slices"
	"strings"
	"testing"
)

func TestSearchParameters(t *testing.T) {
	sps, err := SearchParameters()
	if err != nil {
		t.Fatal(err)
	}
	// search-parameters.json of the package holds 1,378; one, from FHIR R5
	// (DeviceDefinition-classification), is dropped. Three have no
	// expression: _text, _content and _query.
	if len(sps) != 1377 {
		t.Errorf("%d SearchParameters, want 1377", len(sps))
	}
	byID := map[string]SearchParameter{}
	withExpr := 0
	for _, sp := range sps {
		if _, dup := byID[sp.ID]; dup {
			t.Errorf("duplicate id %s", sp.ID)
		}
		byID[sp.ID] = sp
		if sp.Expression != "" {
			withExpr++
		}
		if sp.Code == "" || sp.Type == "" || len(sp.Base) == 0 || sp.URL == "" {
			t.Errorf("incomplete SearchParameter %+v", sp)
		}
		for _, b := range sp.Base {
			if !IsResourceType(b) && b != "Resource" && b != "DomainResource" {
				t.Errorf("%s: base %s is not a resource type", sp.ID, b)
			}
		}
	}
	if withExpr != 1374 {
		t.Errorf("%d SearchParameters with an expression, want 1374", withExpr)
	}

	tests := []struct {
		id, code, typ, exprContains string
		base                        []string
	}{
		{"individual-family", "family", "string", "Patient.name.family", []string{"Patient", "Practitioner"}},
		{"individual-birthdate", "birthdate", "date", "Patient.birthDate", []string{"Patient", "Person", "RelatedPerson"}},
		{"Observation-subject", "subject", "reference", "Observation.subject", []string{"Observation"}},
		{"Observation-code-value-quantity", "code-value-quantity", "composite", "Observation", []string{"Observation"}},
		{"Resource-id", "_id", "token", "Resource.id", []string{"Resource"}},
		{"Resource-lastUpdated", "_lastUpdated", "date", "Resource.meta.lastUpdated", []string{"Resource"}},
	}
	for _, tt := range tests {
		sp, ok := byID[tt.id]
		if !ok {
			t.Errorf("SearchParameter %s not found", tt.id)
			continue
		}
		if sp.Code != tt.code || sp.Type != tt.typ || !strings.Contains(sp.Expression, tt.exprContains) || !slices.Equal(sp.Base, tt.base) {
			t.Errorf("%s = code %s type %s base %v expression %q", tt.id, sp.Code, sp.Type, sp.Base, sp.Expression)
		}
	}

	if sp := byID["Observation-subject"]; !slices.Contains(sp.Target, "Patient") {
		t.Errorf("Observation-subject targets %v, want Patient among them", sp.Target)
	}
	cvq := byID["Observation-code-value-quantity"]
	if len(cvq.Component) != 2 || cvq.Component[0].Definition != "http://hl7.org/fhir/SearchParameter/clinical-code" {
		t.Errorf("Observation-code-value-quantity components = %+v", cvq.Component)
	}
	if cvq.MultipleOr == nil || *cvq.MultipleOr {
		t.Errorf("Observation-code-value-quantity multipleOr = %v, want false", cvq.MultipleOr)
	}
	if _, ok := byID["DeviceDefinition-classification"]; ok {
		t.Error("R5 SearchParameter DeviceDefinition-classification kept")
	}
}

func BenchmarkSearchParametersDecode(b *testing.B) {
	for b.Loop() {
		if _, err := decodeSearchParameters(); err != nil {
			b.Fatal(err)
		}
	}
}
