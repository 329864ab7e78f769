package model

import "testing"

// resourceType from the data only names concrete resource types, and
// misses are not cached.
func TestFixResourceTypeFromData(t *testing.T) {
	names := []string{"NoSuchType1", "Patient.contact", "HumanName", "NoSuchType2"}
	for _, n := range names {
		if rt := ResourceType(map[string]any{"resourceType": n}); rt != nil {
			t.Errorf("resourceType %q gave the type %s", n, rt.Name())
		}
	}
	typeCache.RLock()
	defer typeCache.RUnlock()
	for _, n := range []string{"NoSuchType1", "NoSuchType2"} {
		if _, ok := typeCache.m[n]; ok {
			t.Errorf("type cache holds data-driven miss %q", n)
		}
	}
}

// A type knows its elements through its base types, the JSON keys of a
// choice element, and the types of a primitive.
func TestTypes(t *testing.T) {
	obs := Lookup("Observation")
	if obs == nil || obs.Kind() != "resource" || !obs.DerivesFrom("DomainResource") || obs.DerivesFrom("Patient") {
		t.Fatalf("Observation: %+v", obs)
	}
	if e := obs.Elem("id"); e == nil || obs.ElemType("id", 0).Name() != "string" {
		t.Errorf("Observation.id is not an inherited string element")
	}
	if q := obs.ChoiceType("valueQuantity"); q == nil || !q.IsQuantity() {
		t.Errorf("valueQuantity: %v", q)
	}
	if e := obs.Elem("value"); e == nil || len(e.Keys()) < 2 || e.ExtKeys()[0] != "_"+e.Keys()[0] {
		t.Errorf("Observation.value keys: %v", e)
	}
	if c := Lookup("Patient.contact"); c == nil || c.Elem("name") == nil {
		t.Errorf("backbone Patient.contact: %v", c)
	}
	if d := Lookup("dateTime"); d == nil || d.Primitive() != DateTime || Lookup("HumanName").Primitive() != NotPrimitive {
		t.Errorf("primitives: dateTime %v", d)
	}
	if els := Lookup("HumanName").Elements(); len(els) == 0 || els[0].name != "id" {
		t.Errorf("HumanName elements do not start with the inherited id")
	}
}
