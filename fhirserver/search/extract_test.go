package search

import (
	"context"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/profiles"
)

// entriesOf returns the entries of one parameter for a resource given as
// JSON text.
func entriesOf(t *testing.T, resource, param string) []Entry {
	t.Helper()
	m := decode(t, resource)
	es, err := testRegistry(t).Extract(context.Background(), m["resourceType"].(string), m)
	if err != nil {
		t.Fatal(err)
	}
	return byParam(es, param)
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

func ratEq(a, b *big.Rat) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(b) == 0
}

func strsOf(es []Entry, f func(Entry) string) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = f(e)
	}
	return out
}

func TestExtractString(t *testing.T) {
	tests := []struct {
		name, resource, param string
		want                  []string // normalized values, in order
	}{
		{"HumanName parts", `{"resourceType":"Patient","name":[{"family":"Müller","given":["Jürgen","Peter"],"prefix":["Dr."],"suffix":["PhD"],"text":"Dr. Jürgen Müller"}]}`,
			"name", []string{"muller", "jurgen", "peter", "dr.", "phd", "dr. jurgen muller"}},
		{"family only", `{"resourceType":"Patient","name":[{"family":"Müller","given":["Jürgen"]},{"family":"Ñúñez"}]}`,
			"family", []string{"muller", "nunez"}},
		{"Address parts", `{"resourceType":"Patient","address":[{"line":["Hauptstraße 5","Hinterhaus"],"city":"München","district":"Altstadt","state":"Bayern","postalCode":"80331","country":"DE","text":"Hauptstraße 5, München"}]}`,
			"address", []string{"hauptstrasse 5", "hinterhaus", "munchen", "altstadt", "bayern", "80331", "de", "hauptstrasse 5, munchen"}},
		{"plain string", `{"resourceType":"Organization","name":"  Charité   Berlin "}`, "name", []string{"charite berlin"}},
		{"markdown", `{"resourceType":"ActivityDefinition","status":"draft","description":"Ünïcode **text**"}`, "description", []string{"unicode **text**"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := entriesOf(t, tt.resource, tt.param)
			got := strsOf(es, func(e Entry) string { return e.Str })
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			for _, e := range es {
				if e.Kind != KindString || e.Exact == "" {
					t.Errorf("entry %v: kind or exact missing", e)
				}
			}
		})
	}
	// Exact keeps the original for :exact.
	es := entriesOf(t, `{"resourceType":"Patient","name":[{"family":"Müller"}]}`, "family")
	if len(es) != 1 || es[0].Exact != "Müller" {
		t.Errorf("exact = %v", es)
	}
}

func TestExtractToken(t *testing.T) {
	type tok struct{ system, code, text string }
	tests := []struct {
		name, resource, param string
		want                  []tok
	}{
		{"code", `{"resourceType":"Patient","gender":"female"}`, "gender", []tok{{"", "female", ""}}},
		{"boolean", `{"resourceType":"Patient","active":true}`, "active", []tok{{"", "true", ""}}},
		{"boolean false", `{"resourceType":"Patient","active":false}`, "active", []tok{{"", "false", ""}}},
		{"id", `{"resourceType":"Patient","id":"p-1"}`, "_id", []tok{{"", "p-1", ""}}},
		{"Coding", `{"resourceType":"Patient","meta":{"tag":[{"system":"http://s","code":"c","display":"Cee"},{"code":"nosys"}]}}`, "_tag",
			[]tok{{"http://s", "c", "Cee"}, {"", "nosys", ""}}},
		{"CodeableConcept", `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-8","display":"Acyclovir"},{"system":"http://snomed.info/sct","code":"123"}],"text":"Acyclovir level"}}`, "code",
			// The text is an entry of its own, so that :text matches the text
			// and each display as separate strings.
			[]tok{{"http://loinc.org", "1-8", "Acyclovir"}, {"http://snomed.info/sct", "123", ""}, {"", "", "Acyclovir level"}}},
		{"CodeableConcept text only", `{"resourceType":"Condition","subject":{"reference":"Patient/1"},"code":{"text":"headache"}}`, "code",
			[]tok{{"", "", "headache"}}},
		{"Identifier", `{"resourceType":"Patient","identifier":[{"system":"http://mrn","value":"123","type":{"coding":[{"system":"http://v2","code":"MR"}],"text":"MRN"}},{"value":"nosys"}]}`, "identifier",
			[]tok{{"http://mrn", "123", "MRN"}, {"", "nosys", ""}}},
		{"ContactPoint", `{"resourceType":"Patient","telecom":[{"system":"phone","value":"555-1234","use":"home"},{"system":"email","value":"a@b.c"}]}`, "telecom",
			[]tok{{"", "555-1234", ""}, {"", "a@b.c", ""}}},
		{"ContactPoint filtered", `{"resourceType":"Patient","telecom":[{"system":"phone","value":"555-1234"},{"system":"email","value":"a@b.c"}]}`, "email",
			[]tok{{"", "a@b.c", ""}}},
		{"boolean choice", `{"resourceType":"Group","type":"person","actual":true,"characteristic":[{"code":{"text":"x"},"valueBoolean":true,"exclude":false}]}`, "value",
			[]tok{{"", "true", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := entriesOf(t, tt.resource, tt.param)
			var got []tok
			for _, e := range es {
				if e.Kind != KindToken {
					t.Errorf("kind %v", e.Kind)
				}
				got = append(got, tok{e.System, e.Code, e.Text})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	es := entriesOf(t, `{"resourceType":"Patient","identifier":[{"system":"http://mrn","value":"123","type":{"coding":[{"system":"http://v2","code":"MR"}]}}]}`, "identifier")
	if len(es) != 1 || es[0].TypeSystem != "http://v2" || es[0].TypeCode != "MR" {
		t.Errorf("identifier type = %v", es)
	}
}

func TestExtractDate(t *testing.T) {
	tests := []struct {
		name, resource, param string
		low, high             []string // per entry
	}{
		{"date", `{"resourceType":"Patient","birthDate":"1974-12-25"}`, "birthdate",
			[]string{"1974-12-25T00:00:00Z"}, []string{"1974-12-26T00:00:00Z"}},
		{"partial year", `{"resourceType":"Patient","birthDate":"2024"}`, "birthdate",
			[]string{"2024-01-01T00:00:00Z"}, []string{"2025-01-01T00:00:00Z"}},
		{"partial month (leap)", `{"resourceType":"Patient","birthDate":"2024-02"}`, "birthdate",
			[]string{"2024-02-01T00:00:00Z"}, []string{"2024-03-01T00:00:00Z"}},
		{"dateTime with zone", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2024-03-01T10:00:00+02:00"}`, "date",
			[]string{"2024-03-01T08:00:00Z"}, []string{"2024-03-01T08:00:01Z"}},
		{"dateTime crossing midnight", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2024-03-01T01:30:00+05:00"}`, "date",
			[]string{"2024-02-29T20:30:00Z"}, []string{"2024-02-29T20:30:01Z"}},
		{"dateTime minutes", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2024-03-01T10:00-05:00"}`, "date",
			[]string{"2024-03-01T15:00:00Z"}, []string{"2024-03-01T15:01:00Z"}},
		{"instant ms", `{"resourceType":"Patient","meta":{"lastUpdated":"2024-05-01T12:00:00.123Z"}}`, "_lastUpdated",
			[]string{"2024-05-01T12:00:00.123Z"}, []string{"2024-05-01T12:00:00.124Z"}},
		{"Period closed", `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2024-01-01T09:00:00Z","end":"2024-01-02"}}`, "date",
			[]string{"2024-01-01T09:00:00Z"}, []string{"2024-01-03T00:00:00Z"}},
		{"Period open end", `{"resourceType":"Encounter","status":"in-progress","class":{"code":"AMB"},"period":{"start":"2024-01-01"}}`, "date",
			[]string{"2024-01-01T00:00:00Z"}, []string{MaxTime.Format(time.RFC3339Nano)}},
		{"Period open start", `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"end":"2024-01-01"}}`, "date",
			[]string{MinTime.Format(time.RFC3339Nano)}, []string{"2024-01-02T00:00:00Z"}},
		{"Timing events and bounds", `{"resourceType":"CarePlan","status":"active","intent":"plan","subject":{"reference":"Patient/1"},"activity":[{"detail":{"status":"scheduled","scheduledTiming":{"event":["2024-06-01","2024-06-08T10:00:00Z"],"repeat":{"boundsPeriod":{"start":"2024-06-01","end":"2024-06-30"}}}}}]}`, "activity-date",
			[]string{"2024-06-01T00:00:00Z", "2024-06-08T10:00:00Z", "2024-06-01T00:00:00Z"},
			[]string{"2024-06-02T00:00:00Z", "2024-06-08T10:00:01Z", "2024-07-01T00:00:00Z"}},
		{"bad date skipped", `{"resourceType":"Patient","birthDate":"yesterday"}`, "birthdate", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := entriesOf(t, tt.resource, tt.param)
			if len(es) != len(tt.low) {
				t.Fatalf("got %v, want %d entries", es, len(tt.low))
			}
			for i, e := range es {
				if e.Kind != KindDate || !e.Low.Equal(utc(tt.low[i])) || !e.High.Equal(utc(tt.high[i])) {
					t.Errorf("entry %d = [%s, %s), want [%s, %s)", i, e.Low.Format(time.RFC3339Nano), e.High.Format(time.RFC3339Nano), tt.low[i], tt.high[i])
				}
			}
		})
	}
}

func TestExtractNumber(t *testing.T) {
	es := entriesOf(t, `{"resourceType":"RiskAssessment","status":"final","subject":{"reference":"Patient/1"},"prediction":[{"probabilityDecimal":0.25},{"probabilityRange":{"low":{"value":0.1},"high":{"value":0.3}}}]}`, "probability")
	if len(es) != 2 {
		t.Fatalf("entries %v", es)
	}
	if e := es[0]; e.Kind != KindNumber || !ratEq(e.Value, rat("0.25")) || !ratEq(e.NumLow, rat("0.245")) || !ratEq(e.NumHigh, rat("0.255")) {
		t.Errorf("decimal = %v", e)
	}
	if e := es[1]; !ratEq(e.NumLow, rat("0.1")) || !ratEq(e.NumHigh, rat("0.3")) {
		t.Errorf("range = %v", e)
	}
	// Integers are exact: the search page says integer searches match
	// exactly.
	es = entriesOf(t, `{"resourceType":"MolecularSequence","coordinateSystem":1,"referenceSeq":{"windowStart":100}}`, "window-start")
	if len(es) != 1 || !ratEq(es[0].NumLow, rat("100")) || !ratEq(es[0].NumHigh, rat("100")) {
		t.Errorf("integer = %v", es)
	}
}

func TestExtractQuantity(t *testing.T) {
	obs := func(value string) string {
		return `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":` + value + `}`
	}
	es := entriesOf(t, obs(`{"value":72.4,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}`), "value-quantity")
	if len(es) != 1 {
		t.Fatalf("entries %v", es)
	}
	e := es[0]
	if e.Kind != KindQuantity || e.System != ucumSystem || e.Code != "kg" || e.Unit != "kg" ||
		!ratEq(e.Value, rat("72.4")) || !ratEq(e.NumLow, rat("72.35")) || !ratEq(e.NumHigh, rat("72.45")) {
		t.Errorf("quantity = %+v", e)
	}
	if e.CanonUnit != "g" || !ratEq(e.CanonValue, rat("72400")) || !ratEq(e.CanonLow, rat("72350")) || !ratEq(e.CanonHigh, rat("72450")) {
		t.Errorf("canonical = %v %v [%v, %v)", e.CanonValue, e.CanonUnit, e.CanonLow, e.CanonHigh)
	}

	// 5 mg and 0.005 g are the same quantity: equal canonical values,
	// units and ranges.
	mg := entriesOf(t, obs(`{"value":5,"unit":"mg","system":"http://unitsofmeasure.org","code":"mg"}`), "value-quantity")[0]
	g := entriesOf(t, obs(`{"value":0.005,"unit":"g","system":"http://unitsofmeasure.org","code":"g"}`), "value-quantity")[0]
	if mg.CanonUnit != g.CanonUnit || !ratEq(mg.CanonValue, g.CanonValue) || !ratEq(mg.CanonLow, g.CanonLow) || !ratEq(mg.CanonHigh, g.CanonHigh) {
		t.Errorf("5 mg = %v %s, 0.005 g = %v %s", mg.CanonValue, mg.CanonUnit, g.CanonValue, g.CanonUnit)
	}

	// Not UCUM: no canonical form.
	e = entriesOf(t, obs(`{"value":3,"unit":"tablets","system":"http://example.org/units","code":"tab"}`), "value-quantity")[0]
	if e.CanonValue != nil || e.CanonUnit != "" || e.Code != "tab" {
		t.Errorf("non-UCUM = %+v", e)
	}
	// A comparator opens one side.
	e = entriesOf(t, obs(`{"value":5,"comparator":"<","system":"http://unitsofmeasure.org","code":"mg"}`), "value-quantity")[0]
	if e.NumLow != nil || !ratEq(e.NumHigh, rat("5")) || e.CanonLow != nil || !ratEq(e.CanonHigh, rat("0.005")) {
		t.Errorf("comparator = %v", e)
	}
	// Money.
	es = entriesOf(t, `{"resourceType":"ChargeItem","status":"billable","code":{"text":"x"},"subject":{"reference":"Patient/1"},"priceOverride":{"value":12.5,"currency":"EUR"}}`, "price-override")
	if len(es) != 1 || es[0].System != "urn:iso:std:iso:4217" || es[0].Code != "EUR" || !ratEq(es[0].NumLow, rat("12.45")) {
		t.Errorf("money = %v", es)
	}
	// Age and Range.
	es = entriesOf(t, `{"resourceType":"Condition","subject":{"reference":"Patient/1"},"abatementAge":{"value":40,"unit":"a","system":"http://unitsofmeasure.org","code":"a"}}`, "abatement-age")
	if len(es) != 1 || es[0].Code != "a" || es[0].CanonUnit != "s" {
		t.Errorf("age = %v", es)
	}
	es = entriesOf(t, `{"resourceType":"Condition","subject":{"reference":"Patient/1"},"abatementRange":{"low":{"value":1,"system":"http://unitsofmeasure.org","code":"g"},"high":{"value":2,"system":"http://unitsofmeasure.org","code":"g"}}}`, "abatement-age")
	if len(es) != 1 || !ratEq(es[0].NumLow, rat("1")) || !ratEq(es[0].NumHigh, rat("2")) || es[0].Code != "g" || !ratEq(es[0].CanonHigh, rat("2")) {
		t.Errorf("range = %v", es)
	}
}

func TestExtractReference(t *testing.T) {
	type ref struct{ typ, id, version, url, isys, ival string }
	obs := func(subject string) string {
		return `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":` + subject + `}`
	}
	tests := []struct {
		name, resource, param string
		want                  []ref
	}{
		{"relative", obs(`{"reference":"Patient/p1"}`), "subject", []ref{{"Patient", "p1", "", "", "", ""}}},
		{"versioned", obs(`{"reference":"Patient/p1/_history/7"}`), "subject", []ref{{"Patient", "p1", "7", "", "", ""}}},
		{"absolute", obs(`{"reference":"https://other.example/fhir/Patient/p1"}`), "subject",
			[]ref{{"Patient", "p1", "", "https://other.example/fhir/Patient/p1", "", ""}}},
		{"absolute versioned", obs(`{"reference":"https://other.example/fhir/Patient/p1/_history/2"}`), "subject",
			[]ref{{"Patient", "p1", "2", "https://other.example/fhir/Patient/p1", "", ""}}},
		{"urn:uuid", obs(`{"reference":"urn:uuid:187e0c12-8dd2-67e2-99b2-bf273c878281"}`), "subject",
			[]ref{{"", "", "", "urn:uuid:187e0c12-8dd2-67e2-99b2-bf273c878281", "", ""}}},
		{"contained skipped", obs(`{"reference":"#p1"}`), "subject", nil},
		{"identifier only", obs(`{"identifier":{"system":"http://mrn","value":"42"}}`), "subject", []ref{{"", "", "", "", "http://mrn", "42"}}},
		{"unknown type", obs(`{"reference":"Nope/p1"}`), "subject", nil},
		{"patient filter keeps Patient", obs(`{"reference":"Patient/p1"}`), "patient", []ref{{"Patient", "p1", "", "", "", ""}}},
		{"patient filter drops Group", obs(`{"reference":"Group/g1"}`), "patient", nil},
		{"canonical with version", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://example.org/Questionnaire/q1|2.0"}`, "questionnaire",
			[]ref{{"", "", "2.0", "http://example.org/Questionnaire/q1", "", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []ref
			for _, e := range entriesOf(t, tt.resource, tt.param) {
				if e.Kind != KindReference {
					t.Errorf("kind %v", e.Kind)
				}
				got = append(got, ref{e.RefType, e.RefID, e.RefVersion, e.URL, e.IdentSystem, e.IdentValue})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExtractURI(t *testing.T) {
	es := entriesOf(t, `{"resourceType":"ValueSet","status":"active","url":"http://example.org/ValueSet/vs1","meta":{"profile":["http://example.org/StructureDefinition/p"]}}`, "url")
	if len(es) != 1 || es[0].Kind != KindURI || es[0].URI != "http://example.org/ValueSet/vs1" {
		t.Errorf("url = %v", es)
	}
	es = entriesOf(t, `{"resourceType":"ValueSet","status":"active","meta":{"profile":["http://example.org/StructureDefinition/p"]}}`, "_profile")
	if len(es) != 1 || es[0].URI != "http://example.org/StructureDefinition/p" {
		t.Errorf("_profile = %v", es)
	}
}

func TestExtractComposite(t *testing.T) {
	// A composite on the resource itself whose components are the type's
	// own parameters is searched through them (Param.Conjoined): no entries.
	for _, code := range []string{"code-value-quantity", "code-value-concept"} {
		if es := entriesOf(t, `{"resourceType":"Observation","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"29463-7"},{"system":"http://snomed.info/sct","code":"27113001"}]},
		"valueQuantity":{"value":72.4,"system":"http://unitsofmeasure.org","code":"kg"},
		"valueCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"V"}]}}`, code); len(es) != 0 {
			t.Errorf("%s entries %v, want none", code, es)
		}
	}
	// A root composite whose value parameter reads more paths than its
	// component (value-date also reads dateTime spelt differently) keeps
	// its entries, a code × value product.
	es := entriesOf(t, `{"resourceType":"Observation","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"29463-7"},{"system":"http://snomed.info/sct","code":"27113001"}]},
		"valueString":"high"}`, "code-value-string")
	if len(es) != 2 {
		t.Fatalf("code-value-string entries %v", es)
	}
	for i, sys := range []string{"http://loinc.org", "http://snomed.info/sct"} {
		c := es[i].Components
		if es[i].Kind != KindComposite || len(c) != 2 || c[0].Kind != KindToken || c[0].System != sys || c[1].Kind != KindString || c[1].Str != "high" {
			t.Errorf("entry %d = %v", i, es[i])
		}
	}
	// The wrong value type gives no entry.
	if es := entriesOf(t, `{"resourceType":"Observation","status":"final","code":{"coding":[{"code":"x"}]},"valueBoolean":true}`, "code-value-string"); len(es) != 0 {
		t.Errorf("string value gave %v", es)
	}
	// Components pair within one component, never across components.
	es = entriesOf(t, `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},
		"component":[
			{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":120,"system":"http://unitsofmeasure.org","code":"mm[Hg]"}},
			{"code":{"coding":[{"system":"http://loinc.org","code":"8462-4"}]},"valueQuantity":{"value":80,"system":"http://unitsofmeasure.org","code":"mm[Hg]"}}]}`,
		"component-code-value-quantity")
	var got []string
	for _, e := range es {
		got = append(got, e.Components[0].Code+"="+e.Components[1].Value.RatString())
	}
	if !slices.Equal(got, []string{"8480-6=120", "8462-4=80"}) {
		t.Errorf("pairs = %v", got)
	}
	// component-code-value-concept has equality keys.
	es = entriesOf(t, `{"resourceType":"Observation","status":"final","code":{"text":"x"},"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"L"}]},
		"valueCodeableConcept":{"coding":[{"system":"http://snomed.info/sct","code":"V"}]}}]}`, "component-code-value-concept")
	if len(es) != 1 {
		t.Fatalf("component-code-value-concept %v", es)
	}
	keys := es[0].Keys()
	if !slices.Contains(keys, "component-code-value-concept\x1fhttp://loinc.org|L$http://snomed.info/sct|V") || !slices.Contains(keys, "component-code-value-concept\x1fL$V") {
		t.Errorf("composite keys %q", keys)
	}
}

func TestExtractUnknownType(t *testing.T) {
	if _, err := testRegistry(t).Extract(context.Background(), "Nope", map[string]any{}); err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Errorf("err = %v", err)
	}
}

// TestExtractFixtures checks the main parameters of typical resources.
func TestExtractFixtures(t *testing.T) {
	r := testRegistry(t)
	ctx := context.Background()
	pat, err := r.Extract(ctx, "Patient", loadFixture(t, "patient.json"))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := r.Extract(ctx, "Observation", loadFixture(t, "observation.json"))
	if err != nil {
		t.Fatal(err)
	}
	keys := func(es []Entry, param string) []string {
		var out []string
		for _, e := range byParam(es, param) {
			out = append(out, e.Keys()...)
		}
		return out
	}
	wantKeys := []struct {
		es    []Entry
		param string
		keys  []string
	}{
		{pat, "family", []string{"family\x1fmuller", "family:exact\x1fMüller"}},
		{pat, "gender", []string{"gender\x1fmale", "gender\x1f|male"}},
		{pat, "identifier", []string{"identifier\x1f12345", "identifier\x1fhttp://hospital.example.org/mrn|12345",
			"identifier:of-type\x1fhttp://terminology.hl7.org/CodeSystem/v2-0203|MR|12345", "identifier:text\x1fmedical record number"}},
		{pat, "organization", []string{"organization\x1fOrganization/org-1", "organization\x1fOrganization/org-1/_history/3",
			"organization\x1fhttps://example.org/fhir/Organization/org-1"}},
		{obs, "code", []string{"code\x1f29463-7", "code\x1fhttp://loinc.org|29463-7", "code:text\x1fbody weight",
			"code\x1f27113001", "code\x1fhttp://snomed.info/sct|27113001", "code:text\x1fbody weight", "code:text\x1fweight"}},
		{obs, "subject", []string{"subject\x1fPatient/pat-1"}},
		{obs, "patient", []string{"patient\x1fPatient/pat-1"}},
	}
	for _, w := range wantKeys {
		if got := keys(w.es, w.param); !slices.Equal(got, w.keys) {
			t.Errorf("%s keys = %q, want %q", w.param, got, w.keys)
		}
	}
	if b := byParam(pat, "birthdate"); len(b) != 1 || !b[0].Low.Equal(utc("1974-12-25T00:00:00Z")) || !b[0].High.Equal(utc("1974-12-26T00:00:00Z")) {
		t.Errorf("birthdate = %v", b)
	}
	if d := byParam(obs, "date"); len(d) != 1 || !d[0].Low.Equal(utc("2024-03-01T08:00:00Z")) {
		t.Errorf("date = %v", d)
	}
	if q := byParam(obs, "value-quantity"); len(q) != 1 || !ratEq(q[0].NumLow, rat("72.35")) || q[0].CanonUnit != "g" {
		t.Errorf("value-quantity = %v", q)
	}
	if n := len(byParam(obs, "code-value-quantity")); n != 0 {
		t.Errorf("code-value-quantity entries = %d, want none (searched through code and value-quantity)", n)
	}
	// Every entry has its parameter and a kind, and keys start with the
	// parameter code.
	for _, e := range append(pat, obs...) {
		if e.Param == "" || e.Kind == 0 {
			t.Errorf("entry without param or kind: %v", e)
		}
		for _, k := range e.Keys() {
			if !strings.HasPrefix(k, e.Param+index.KeySep) && !strings.HasPrefix(k, e.Param+":") {
				t.Errorf("key %q lacks prefix %s", k, e.Param)
			}
		}
	}
	// Deterministic.
	again, _ := r.Extract(ctx, "Observation", loadFixture(t, "observation.json"))
	if len(again) != len(obs) {
		t.Fatal("not deterministic")
	}
	for i := range obs {
		if obs[i].String() != again[i].String() || !slices.Equal(obs[i].Keys(), again[i].Keys()) {
			t.Errorf("entry %d differs: %v vs %v", i, obs[i], again[i])
		}
	}
}

// TestExtractSkipsUnexpectedTypes: a value whose FHIR type has no index
// form for the parameter is skipped and counted, never an error.
func TestExtractSkipsUnexpectedTypes(t *testing.T) {
	before := Skipped.Load()
	// A custom string parameter on a CodeableConcept, which has no string
	// form.
	r, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddCustom(profilesSP("http://example.org/sp/code-str", "code-str", "string", "Observation.code")); err != nil {
		t.Fatal(err)
	}
	m := decode(t, `{"resourceType":"Observation","status":"final","code":{"coding":[{"code":"x"}]}}`)
	es, err := r.Extract(context.Background(), "Observation", m)
	if err != nil {
		t.Fatal(err)
	}
	if got := byParam(es, "code-str"); len(got) != 0 {
		t.Errorf("entries for an unsupported type: %v", got)
	}
	if Skipped.Load() == before {
		t.Error("skip not counted")
	}
}

func profilesSP(url, code, typ, expr string) profiles.SearchParameter {
	return profiles.SearchParameter{URL: url, Code: code, Base: []string{"Observation"}, Type: typ, Expression: expr}
}

// TestShortcutsPreserveEntries compares the optimized registry (per-type
// branches, element filters, root composites) with the reference mode
// that evaluates every whole expression.
func TestShortcutsPreserveEntries(t *testing.T) {
	ref, err := newRegistry(true)
	if err != nil {
		t.Fatal(err)
	}
	fast := testRegistry(t)
	resources := []map[string]any{
		loadFixture(t, "patient.json"),
		loadFixture(t, "observation.json"),
		decode(t, `{"resourceType":"Patient","id":"x"}`),
		decode(t, `{"resourceType":"Patient","deceasedDateTime":"2020-01-01"}`),
		decode(t, `{"resourceType":"Observation","status":"final","code":{"text":"bp"},"component":[{"code":{"coding":[{"code":"a"}]},"valueQuantity":{"value":1}},{"code":{"coding":[{"code":"b"}]},"valueCodeableConcept":{"coding":[{"code":"c"}]}}]}`),
		decode(t, `{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"period":{"start":"2024"},"subject":{"reference":"Patient/1"}}`),
		decode(t, `{"resourceType":"ActivityDefinition","status":"draft","useContext":[{"code":{"code":"age"},"valueRange":{"low":{"value":1}}},{"code":{"code":"focus"},"valueCodeableConcept":{"text":"x"}}]}`),
	}
	for _, res := range resources {
		typ := res["resourceType"].(string)
		a, err := ref.Extract(context.Background(), typ, res)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fast.Extract(context.Background(), typ, res)
		if err != nil {
			t.Fatal(err)
		}
		as, bs := strsOf(a, Entry.String), strsOf(b, Entry.String)
		if !slices.Equal(as, bs) {
			t.Errorf("%s: reference\n%s\noptimized\n%s", typ, strings.Join(as, "\n"), strings.Join(bs, "\n"))
		}
	}
}

func TestAppendExtract(t *testing.T) {
	r := testRegistry(t)
	res := loadFixture(t, "observation.json")
	want, err := r.Extract(context.Background(), "Observation", res)
	if err != nil {
		t.Fatal(err)
	}
	prefix := []Entry{{Param: "x", Kind: KindURI, URI: "u"}}
	got, err := r.AppendExtract(context.Background(), prefix, "Observation", res)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want)+1 || got[0].URI != "u" || got[1].String() != want[0].String() {
		t.Errorf("AppendExtract = %d entries, want %d after the prefix", len(got), len(want)+1)
	}
	if got, err := r.AppendExtract(context.Background(), prefix, "Nope", res); err == nil || len(got) != 1 {
		t.Errorf("unknown type: %v %v", got, err)
	}
}
