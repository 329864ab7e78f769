package fhirpath

import (
	"reflect"
	"testing"
)

// TestBranches proves what Branches reports of a compiled expression: the
// top-level union branches with their text, where each starts, its path
// steps and the types it narrows to.
func TestBranches(t *testing.T) {
	tests := []struct {
		expr string
		want []Branch
	}{
		{"Patient.name | Practitioner.name", []Branch{
			{Source: "Patient.name", First: "Patient", Path: []Step{{Name: "Patient"}, {Name: "name"}}},
			{Source: "Practitioner.name", First: "Practitioner", Path: []Step{{Name: "Practitioner"}, {Name: "name"}}},
		}},
		// Parentheses are transparent; ofType() names its type.
		{"(Observation.value.ofType(Quantity)) | (Observation.value as FHIR.Range)", []Branch{
			{Source: "(Observation.value.ofType(Quantity))", First: "Observation", Path: []Step{{Name: "Observation"}, {Name: "value"}, {Name: "ofType", Call: true, Type: "Quantity"}}},
			{Source: "(Observation.value as FHIR.Range)", First: "Observation", Path: []Step{{Name: "Observation"}, {Name: "value"}, {Name: "as", Operator: true, Type: "Range", TypeNS: "FHIR"}}},
		}},
		// A union in parentheses is one branch; a '|' in a string is not
		// a union.
		{"(Patient.a | Group.b).c | Group.d.where(x = 'a|b')", []Branch{
			{Source: "(Patient.a | Group.b).c", First: "Patient", Union: true},
			{Source: "Group.d.where(x = 'a|b')", First: "Group", Path: []Step{{Name: "Group"}, {Name: "d"}, {Name: "where", Call: true}}},
		}},
		// '|' binds tighter than '=': the root is not a union.
		{"Patient.a = Patient.b | Patient.c", []Branch{
			{Source: "Patient.a = Patient.b | Patient.c", First: "Patient", Union: true},
		}},
		{"%resource.id|extension('u').value[0]", []Branch{
			{Source: "%resource.id", Variables: true},
			{Source: "extension('u').value[0]", First: "extension", FirstCall: true, Path: []Step{{Name: "extension", Call: true}, {Name: "value"}, {Index: true}}},
		}},
	}
	for _, tt := range tests {
		e, err := Compile(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		if got := e.Branches(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Branches(%q) =\n%+v\nwant\n%+v", tt.expr, got, tt.want)
		}
	}
}
