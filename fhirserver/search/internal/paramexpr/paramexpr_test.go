package paramexpr

import (
	"slices"
	"testing"
)

func TestBranchesFor(t *testing.T) {
	tests := []struct{ expr, typ, want string }{
		{"Patient.name | Practitioner.name", "Patient", "Patient.name"},
		{"Patient.name | Practitioner.name", "Practitioner", "Practitioner.name"},
		{"Resource.meta.tag", "Patient", "Resource.meta.tag"},
		{"(ActivityDefinition.useContext.value.ofType(Quantity)) | (ActivityDefinition.useContext.value.ofType(Range)) | (CodeSystem.useContext.value.ofType(Quantity))", "ActivityDefinition",
			"(ActivityDefinition.useContext.value.ofType(Quantity)) | (ActivityDefinition.useContext.value.ofType(Range))"},
		// A nested union is kept whole: it may name several types.
		{"(Patient.a | Group.b).c | Group.d", "Patient", "(Patient.a | Group.b).c"},
		{"Patient.x.where(code = 'a|b') | Group.y", "Patient", "Patient.x.where(code = 'a|b')"},
		// No branch for the type: the whole expression (yields nothing).
		{"Patient.name | Practitioner.name", "Group", "Patient.name | Practitioner.name"},
	}
	for _, tt := range tests {
		if got := branchesFor(tt.expr, tt.typ); got != tt.want {
			t.Errorf("branchesFor(%q, %s) = %q, want %q", tt.expr, tt.typ, got, tt.want)
		}
	}
}

func TestNeeds(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"Patient.name", []string{"name"}},
		{"Observation.code | Observation.component.code", []string{"code", "component"}},
		{"(Observation.value.ofType(Quantity)) | (Observation.value.ofType(SampledData))", []string{"value"}},
		{"Resource.meta.tag", []string{"meta"}},
		{"Observation", nil},
		{"Patient.extension('x').value", nil},
		{"%resource.id", nil},
		{"Patient.deceased.exists() and Patient.deceased != false", nil},
		{"(Patient.deceased.exists())", nil},
		{"Patient.telecom.where(system='phone')", []string{"telecom"}},
		{"(Observation.value.ofType(CodeableConcept)).text", []string{"value"}},
		{"Observation.subject.where(resolve() is Patient)", []string{"subject"}},
		{"Patient.name.count()", nil},
		{"Patient.active = true", nil},
	}
	for _, tt := range tests {
		if got := needs(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("needs(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// branchesFor keeps the top-level union branches of expr that can apply
// to resource type t (see Kept) and returns them as one
// expression.
func branchesFor(expr, t string) string {
	src, _ := Kept(expr, Branches(expr), t)
	return src
}

// needs returns the top-level element names the union branches of expr
// start with (see Needs); nil when expr does not compile.
func needs(expr string) []string { return Needs(Branches(expr)) }
