package model

import (
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

func TestModel(t *testing.T) {
	m, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range profiles.ResourceTypes() {
		if m.Resource([]byte(rt)) == nil {
			t.Errorf("no resource type %s", rt)
		}
	}
	if len(m.Resources()) != len(profiles.ResourceTypes()) {
		t.Errorf("%d resource types, profiles has %d", len(m.Resources()), len(profiles.ResourceTypes()))
	}
	for _, abstract := range []string{"Resource", "DomainResource", "HumanName"} {
		if m.Resource([]byte(abstract)) != nil {
			t.Errorf("%s is a resource type", abstract)
		}
	}
	p := m.Resource([]byte("Patient"))
	for name, want := range map[string]string{
		"id": "id", "_id": "id", "gender": "code", "_gender": "code", "name": "HumanName",
		"deceasedBoolean": "boolean", "deceasedDateTime": "dateTime", "contact": "Patient.contact",
	} {
		mb := p.Member([]byte(name))
		if mb == nil || mb.Type == nil || mb.Type.Name != want {
			t.Errorf("Patient.%s: %+v, want type %s", name, mb, want)
		}
	}
	for _, absent := range []string{"deceased", "deceasedString", "_name", "resourceType", "meta.project"} {
		if p.Member([]byte(absent)) != nil {
			t.Errorf("Patient has a member %q", absent)
		}
	}
	if mb := p.Member([]byte("contained")); mb == nil || mb.Type != nil || !mb.Elem.Repeats {
		t.Errorf("Patient.contained: %+v", mb)
	}
	if mb := p.Member([]byte("gender")); mb.Codes == nil || !mb.Codes.Has([]byte("female")) || mb.Codes.Has([]byte("Female")) {
		t.Errorf("Patient.gender codes: %+v", mb.Codes)
	}
	if mb := p.Member([]byte("managingOrganization")); len(mb.Targets) != 1 || mb.Targets[0] != "Organization" {
		t.Errorf("Patient.managingOrganization targets: %v", mb.Targets)
	}
	q := m.Resource([]byte("Questionnaire"))
	item := q.Member([]byte("item")).Type
	if item.Member([]byte("item")).Type != item {
		t.Error("Questionnaire.item.item does not refer to Questionnaire.item")
	}
	if m.Type("Meta").Member([]byte("project")) != nil {
		t.Error("Meta.project (Medplum's) is in the model")
	}
	if sq := m.Type("Range").Member([]byte("low")).Type; sq.Name != "SimpleQuantity" || sq.Member([]byte("comparator")) != nil {
		t.Errorf("Range.low is %s", sq.Name)
	}
}
