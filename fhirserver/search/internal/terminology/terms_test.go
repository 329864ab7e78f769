package terminology

import (
	"reflect"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

const (
	gender = "http://hl7.org/fhir/administrative-gender"
	obsSt  = "http://hl7.org/fhir/observation-status"
)

func TestConceptSetFilters(t *testing.T) {
	f := func(op, value string) profiles.ConceptSet {
		return profiles.ConceptSet{System: obsSt, Filter: []profiles.ConceptFilter{{Property: "concept", Op: op, Value: value}}}
	}
	all := []string{"registered", "preliminary", "final", "amended", "corrected", "cancelled", "entered-in-error", "unknown"}
	for _, tt := range []struct {
		cs   profiles.ConceptSet
		want []string
	}{
		{profiles.ConceptSet{System: obsSt}, all},
		{profiles.ConceptSet{System: obsSt, Concept: []profiles.ConceptReference{{Code: "final"}, {Code: "bogus"}}}, []string{"final", "bogus"}},
		{f("is-a", "amended"), []string{"amended", "corrected"}},
		{f("descendent-of", "amended"), []string{"corrected"}},
		{f("is-not-a", "amended"), []string{"registered", "preliminary", "final", "cancelled", "entered-in-error", "unknown"}},
		{f("in", "final,unknown,bogus"), []string{"final", "unknown"}},
		{f("=", "final"), []string{"final"}},
	} {
		got, err := Terms{}.conceptSet("vs", tt.cs, 0)
		if err != nil {
			t.Errorf("%+v: %v", tt.cs, err)
			continue
		}
		want := make([]string, len(tt.want))
		for i, c := range tt.want {
			want[i] = obsSt + "|" + c
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v:\n got %v\nwant %v", tt.cs, got, want)
		}
	}
	for _, cs := range []profiles.ConceptSet{
		f("regex", ".*"),
		{System: obsSt, Filter: []profiles.ConceptFilter{{Property: "status", Op: "=", Value: "x"}}},
		{System: "http://example.org/not-here"},
		{ValueSet: []string{"http://example.org/ValueSet/none"}},
	} {
		if _, err := (Terms{}).conceptSet("vs", cs, 0); err == nil {
			t.Errorf("%+v: no error", cs)
		}
	}
	// An include of ValueSets only is their expansion; with a system, the
	// intersection.
	got, err := Terms{}.conceptSet("vs", profiles.ConceptSet{ValueSet: []string{"http://hl7.org/fhir/ValueSet/administrative-gender"}}, 0)
	if err != nil || len(got) != 4 {
		t.Errorf("valueSet include: %v %v", got, err)
	}
	got, err = Terms{}.conceptSet("vs", profiles.ConceptSet{System: gender, Concept: []profiles.ConceptReference{{Code: "male"}, {Code: "x"}},
		ValueSet: []string{"http://hl7.org/fhir/ValueSet/administrative-gender"}}, 0)
	if err != nil || !reflect.DeepEqual(got, []string{gender + "|male"}) {
		t.Errorf("intersection: %v %v", got, err)
	}
}
