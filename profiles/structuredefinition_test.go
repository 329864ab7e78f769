package profiles

import (
	"encoding/json"
	"slices"
	"testing"
)

func typeCodes(e *ElementDefinition) []string {
	var codes []string
	for _, t := range e.Type {
		codes = append(codes, t.Code)
	}
	return codes
}

func TestPatientElements(t *testing.T) {
	sd, ok := TypeDefinition("Patient")
	if !ok {
		t.Fatal("TypeDefinition(Patient) not found")
	}
	if sd.URL != "http://hl7.org/fhir/StructureDefinition/Patient" || sd.Kind != "resource" || sd.FHIRVersion != "4.0.1" {
		t.Errorf("Patient = %s %s %s", sd.URL, sd.Kind, sd.FHIRVersion)
	}
	tests := []struct {
		path     string
		types    []string
		min      int
		max      string
		summary  bool
		modifier bool
	}{
		{"Patient.birthDate", []string{"date"}, 0, "1", true, false},
		{"Patient.deceased[x]", []string{"boolean", "dateTime"}, 0, "1", true, true},
		{"Patient.name", []string{"HumanName"}, 0, "*", true, false},
		{"Patient.active", []string{"boolean"}, 0, "1", true, true},
		{"Patient.link.other", []string{"Reference"}, 1, "1", true, false},
		{"Patient.contact.name", []string{"HumanName"}, 0, "1", false, false},
	}
	for _, tt := range tests {
		e, ok := sd.Element(tt.path)
		if !ok {
			t.Errorf("element %s not found", tt.path)
			continue
		}
		if got := typeCodes(e); !slices.Equal(got, tt.types) {
			t.Errorf("%s types = %v, want %v", tt.path, got, tt.types)
		}
		if e.Min != tt.min || e.Max != tt.max || e.IsSummary != tt.summary || e.IsModifier != tt.modifier {
			t.Errorf("%s = %d..%s summary=%v modifier=%v, want %d..%s summary=%v modifier=%v",
				tt.path, e.Min, e.Max, e.IsSummary, e.IsModifier, tt.min, tt.max, tt.summary, tt.modifier)
		}
	}

	other, _ := sd.Element("Patient.link.other")
	if want := []string{"http://hl7.org/fhir/StructureDefinition/Patient", "http://hl7.org/fhir/StructureDefinition/RelatedPerson"}; !slices.Equal(other.Type[0].TargetProfile, want) {
		t.Errorf("Patient.link.other targetProfile = %v, want %v", other.Type[0].TargetProfile, want)
	}
	if e, _ := sd.Element("Patient.id"); e == nil || e.Base == nil || e.Base.Path != "Resource.id" {
		t.Errorf("Patient.id base = %+v, want Resource.id", e)
	}
	if e, _ := sd.Element("Patient.contact"); e == nil || !slices.ContainsFunc(e.Constraint, func(c Constraint) bool {
		return c.Key == "pat-1" && c.Severity == "error" && c.Expression != ""
	}) {
		t.Error("Patient.contact lacks constraint pat-1 with an expression")
	}
	if _, ok := sd.Element("Patient.nope"); ok {
		t.Error("Element(Patient.nope) found")
	}
}

func TestTypeDefinition(t *testing.T) {
	tests := []struct {
		name       string
		kind       string
		abstract   bool
		derivation string
	}{
		{"Patient", "resource", false, "specialization"},
		{"Resource", "resource", true, ""},
		{"DomainResource", "resource", true, "specialization"},
		{"HumanName", "complex-type", false, "specialization"},
		{"Quantity", "complex-type", false, "specialization"},
		{"Element", "complex-type", true, ""},
		{"string", "primitive-type", false, "specialization"},
		{"dateTime", "primitive-type", false, "specialization"},
		{"MetadataResource", "logical", false, "specialization"},
	}
	for _, tt := range tests {
		sd, ok := TypeDefinition(tt.name)
		if !ok {
			t.Errorf("TypeDefinition(%s) not found", tt.name)
			continue
		}
		if sd.Type != tt.name || sd.Kind != tt.kind || sd.Abstract != tt.abstract || sd.Derivation != tt.derivation {
			t.Errorf("TypeDefinition(%s) = type %s kind %s abstract %v derivation %q", tt.name, sd.Type, sd.Kind, sd.Abstract, sd.Derivation)
		}
		if len(sd.Elements) == 0 || sd.Elements[0].Path != tt.name {
			t.Errorf("TypeDefinition(%s) has no root element", tt.name)
		}
	}
	for _, name := range []string{"SimpleQuantity", "SubscriptionStatus", "patient", ""} {
		if _, ok := TypeDefinition(name); ok {
			t.Errorf("TypeDefinition(%q) found", name)
		}
	}
}

func TestStructureDefinitionByURL(t *testing.T) {
	tests := []struct {
		url     string
		id      string
		wantHit bool
	}{
		{"http://hl7.org/fhir/StructureDefinition/Patient", "Patient", true},
		{"http://hl7.org/fhir/StructureDefinition/Patient|4.0.1", "Patient", true},
		{"http://hl7.org/fhir/StructureDefinition/SimpleQuantity", "SimpleQuantity", true},
		{"http://hl7.org/fhir/StructureDefinition/MoneyQuantity", "MoneyQuantity", true},
		{"http://hl7.org/fhir/StructureDefinition/SubscriptionStatus", "", false},
		{"Patient", "", false},
	}
	for _, tt := range tests {
		sd, ok := StructureDefinitionByURL(tt.url)
		if ok != tt.wantHit || (ok && sd.ID != tt.id) {
			t.Errorf("StructureDefinitionByURL(%s) = %v, %v; want %s, %v", tt.url, sd, ok, tt.id, tt.wantHit)
		}
	}
	sq, _ := StructureDefinitionByURL("http://hl7.org/fhir/StructureDefinition/SimpleQuantity")
	if sq != nil {
		if sq.Type != "Quantity" || sq.Derivation != "constraint" {
			t.Errorf("SimpleQuantity = type %s derivation %s", sq.Type, sq.Derivation)
		}
		if e, ok := sq.Element("Quantity.comparator"); !ok || e.Max != "0" {
			t.Errorf("SimpleQuantity Quantity.comparator = %+v, want max 0", e)
		}
	}
}

func TestStructureDefinitionsCount(t *testing.T) {
	sds, err := StructureDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	urls := map[string]bool{}
	for _, sd := range sds {
		kinds[sd.Kind]++
		if urls[sd.URL] {
			t.Errorf("duplicate URL %s", sd.URL)
		}
		urls[sd.URL] = true
	}
	// 148 resources (146 concrete + Resource + DomainResource), the logical
	// MetadataResource, 43 complex types (2 of them the Quantity profiles)
	// and 20 primitive types.
	want := map[string]int{"resource": 148, "logical": 1, "complex-type": 43, "primitive-type": 20}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d StructureDefinitions of kind %s, want %d", kinds[k], k, n)
		}
	}
	if len(sds) != 212 {
		t.Errorf("%d StructureDefinitions, want 212", len(sds))
	}
}

func TestPrimitiveValueTypes(t *testing.T) {
	tests := []struct {
		typ, path, code, fhirType string
		regex                     bool
	}{
		{"string", "string.value", "http://hl7.org/fhirpath/System.String", "string", true},
		{"id", "id.value", "http://hl7.org/fhirpath/System.String", "string", true},
		{"boolean", "boolean.value", "http://hl7.org/fhirpath/System.Boolean", "boolean", true},
		{"Resource", "Resource.id", "http://hl7.org/fhirpath/System.String", "string", false},
	}
	for _, tt := range tests {
		sd, ok := TypeDefinition(tt.typ)
		if !ok {
			t.Fatalf("TypeDefinition(%s) not found", tt.typ)
		}
		e, ok := sd.Element(tt.path)
		if !ok || len(e.Type) != 1 {
			t.Errorf("%s: element %+v", tt.path, e)
			continue
		}
		ty := e.Type[0]
		if ty.Code != tt.code || ty.FHIRType() != tt.fhirType || (ty.Regex() != "") != tt.regex {
			t.Errorf("%s type = %s fhir-type %q regex %q", tt.path, ty.Code, ty.FHIRType(), ty.Regex())
		}
	}
	sd, _ := TypeDefinition("integer")
	e, _ := sd.Element("integer.value")
	if e == nil || e.MinValueKey != "minValueInteger" || string(e.MinValue) != "-2147483648" ||
		e.MaxValueKey != "maxValueInteger" || string(e.MaxValue) != "2147483647" {
		t.Errorf("integer.value min/max = %+v", e)
	}
	sd, _ = TypeDefinition("string")
	if e, _ := sd.Element("string.value"); e == nil || e.MaxLength != 1048576 {
		t.Errorf("string.value maxLength = %+v", e)
	}
}

func TestElementChoiceKeys(t *testing.T) {
	tests := []struct {
		json                                 string
		fixedKey, fixed, patternKey, pattern string
		minKey, min, maxKey, max             string
	}{
		{json: `{"path":"A.b","fixedCode":"x"}`, fixedKey: "fixedCode", fixed: `"x"`},
		{json: `{"path":"A.b","patternCodeableConcept":{"text":"t"}}`, patternKey: "patternCodeableConcept", pattern: `{"text":"t"}`},
		{json: `{"path":"A.b","minValueDecimal":1.0,"maxValueDecimal":2.50}`, minKey: "minValueDecimal", min: "1.0", maxKey: "maxValueDecimal", max: "2.50"},
		{json: `{"path":"A.b","constraint":[{"key":"k","human":"\"fixed"}]}`},
		{json: `{"path":"A.b"}`},
	}
	for _, tt := range tests {
		var e ElementDefinition
		if err := json.Unmarshal([]byte(tt.json), &e); err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		got := []string{e.FixedKey, string(e.Fixed), e.PatternKey, string(e.Pattern), e.MinValueKey, string(e.MinValue), e.MaxValueKey, string(e.MaxValue)}
		want := []string{tt.fixedKey, tt.fixed, tt.patternKey, tt.pattern, tt.minKey, tt.min, tt.maxKey, tt.max}
		if !slices.Equal(got, want) || e.Path != "A.b" {
			t.Errorf("%s: got %q, want %q", tt.json, got, want)
		}
	}
}

// Both layouts (one StructureDefinition per line, and anything else) and
// both paths (with and without choice elements) must decode alike.
func TestDecodeStructureDefinitionList(t *testing.T) {
	a := `{"id":"A","url":"u:a","snapshot":{"element":[{"path":"A","min":0,"max":"*"},{"path":"A.x","fixedCode":"c","minValueInteger":1}]}}`
	b := `{"id":"B","url":"u:b","snapshot":{"element":[{"path":"B","min":0,"max":"*","type":[{"code":"x"}]}]}}`
	check := func(name, data string) {
		list, err := decodeStructureDefinitionList([]byte(data))
		if err != nil || len(list) != 2 {
			t.Fatalf("%s: %v, %v", name, list, err)
		}
		x, ok := list[0].Element("A.x")
		if list[0].ID != "A" || !ok || x.FixedKey != "fixedCode" || string(x.Fixed) != `"c"` || string(x.MinValue) != "1" {
			t.Errorf("%s: A = %+v, A.x = %+v", name, list[0], x)
		}
		if e, ok := list[1].Element("B"); list[1].ID != "B" || !ok || e.Max != "*" || e.Type[0].Code != "x" {
			t.Errorf("%s: B = %+v", name, list[1])
		}
	}
	check("lines", "[\n"+a+",\n"+b+"\n]\n")
	check("compact", "["+a+","+b+"]")
	if _, err := decodeStructureDefinitionList([]byte("[\n{\"id\":1}\n]\n")); err == nil {
		t.Error("bad line decoded without error")
	}
}

func BenchmarkStructureDefinitionsDecode(b *testing.B) {
	for b.Loop() {
		if _, err := decodeStructureDefinitions(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTypeDefinition(b *testing.B) {
	TypeDefinition("Patient")
	for b.Loop() {
		TypeDefinition("Patient")
	}
}
