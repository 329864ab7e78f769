package validate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

func TestEqualAndContains(t *testing.T) {
	for _, c := range []struct {
		a, b             string
		equal, contained bool // b as fixed / as pattern of a
	}{
		{`1`, `1.0`, true, true},
		{`1.5`, `1.50`, true, true},
		{`1`, `2`, false, false},
		{`"a"`, `"a"`, true, true},
		{`true`, `false`, false, false},
		{`{"a": 1, "b": [1, 2]}`, `{"a": 1}`, false, true},
		{`{"a": 1, "b": [1, 2]}`, `{"b": [2]}`, false, true},
		{`{"a": 1, "b": [1, 2]}`, `{"b": [3]}`, false, false},
		{`{"a": 1, "b": [1, 2]}`, `{"b": [1, 2], "a": 1.0}`, true, true},
		{`[1, 2]`, `[1, 2]`, true, true},
		{`[1, 2]`, `[2, 1]`, false, true},
		{`{"coding": [{"system": "s", "code": "c", "display": "d"}]}`, `{"coding": [{"system": "s", "code": "c"}]}`, false, true},
		{`null`, `null`, true, true},
		{`"1"`, `1`, false, false},
	} {
		a, b := decodeRaw(json.RawMessage(c.a)), decodeRaw(json.RawMessage(c.b))
		if got := equalJSON(a, b); got != c.equal {
			t.Errorf("equal(%s, %s) = %v", c.a, c.b, got)
		}
		if got := containsJSON(a, b); got != c.contained {
			t.Errorf("contains(%s, %s) = %v", c.a, c.b, got)
		}
	}
	// float64 input (decoded without UseNumber)
	if !equalJSON(float64(2), json.Number("2.0")) {
		t.Error("float64 vs json.Number")
	}
}

func TestFormats(t *testing.T) {
	for typ, cases := range map[string]map[string]bool{
		"date":     {"2020": true, "2020-02": true, "2020-02-29": true, "2020-13": false, "2020-02-32": false, "20": false, "2020-2-1": false, "0000": false},
		"dateTime": {"2020-01-01T10:00:00Z": true, "2020-01-01T10:00:00.123+02:00": true, "2020-01-01T10:00:00": false, "2020-01-01T10:00Z": false, "2020-01-01": true, "2020-01-01T25:00:00Z": false},
		"instant":  {"2020-01-01T10:00:00Z": true, "2020-01-01": false, "2020-01-01T10:00:00.5-05:00": true},
		"time":     {"10:00:00": true, "10:00": false, "24:00:00": false, "10:00:00.25": true},
		"code":     {"abc": true, "a b": true, " a": false, "a  b": false, "a ": false, "": false},
		"id":       {"a-b.C1": true, "a_b": false, "": false},
		"uri":      {"http://x": true, "a b": false},
	} {
		f := formatCheck(typ)
		for s, want := range cases {
			if got := f(s); got != want {
				t.Errorf("%s %q = %v", typ, s, got)
			}
		}
	}
}

func TestParsePath(t *testing.T) {
	for p, ok := range map[string]bool{
		"$this": true, "system": true, "code.coding.system": true, "value.ofType(Quantity)": true,
		"extension('http://a.b/c').value": true, "resolve()": false, "reference.resolve().name": false, "a[0]": false,
	} {
		if _, got := parsePath(p); got != ok {
			t.Errorf("parsePath(%q) ok = %v", p, got)
		}
	}
	steps, _ := parsePath("extension('http://a.b/c').valueCoding.system")
	m := decode(t, `{"extension": [{"url": "http://a.b/c", "valueCoding": {"system": "s1"}}, {"url": "x", "valueCoding": {"system": "s2"}}]}`)
	if got := navigate(m, steps); len(got) != 1 || got[0] != "s1" {
		t.Errorf("navigate = %v", got)
	}
	steps, _ = parsePath("value.ofType(Quantity).code")
	if got := navigate(decode(t, `{"valueQuantity": {"code": "kg"}}`), steps); len(got) != 1 || got[0] != "kg" {
		t.Errorf("navigate ofType = %v", got)
	}
	steps, _ = parsePath("value.code")
	if got := navigate(decode(t, `{"valueQuantity": {"code": "kg"}}`), steps); len(got) != 1 || got[0] != "kg" {
		t.Errorf("navigate choice = %v", got)
	}
}

// termDefs serves hand-made terminology only.
type termDefs struct {
	CoreDefinitions
	vs map[string]*profiles.ValueSet
	cs map[string]*profiles.CodeSystem
}

func (d termDefs) ValueSet(url string) (*profiles.ValueSet, bool) { v, ok := d.vs[url]; return v, ok }
func (d termDefs) CodeSystem(url string) (*profiles.CodeSystem, bool) {
	c, ok := d.cs[url]
	return c, ok
}

func TestExpansion(t *testing.T) {
	tdefs, err := loadTestDefs()
	if err != nil {
		t.Fatal(err)
	}
	colors := tdefs.css["http://example.org/fhir/CodeSystem/colors"]
	const sys = "http://example.org/fhir/CodeSystem/colors"
	d := termDefs{cs: map[string]*profiles.CodeSystem{sys: colors}, vs: map[string]*profiles.ValueSet{
		"eq": {URL: "eq", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{System: sys, Filter: []profiles.ConceptFilter{{Property: "concept", Op: "=", Value: "red"}}}}}},
		"in": {URL: "in", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{System: sys, Filter: []profiles.ConceptFilter{{Property: "concept", Op: "in", Value: "red, blue,nope"}}}}}},
		"isa+desc": {URL: "isa+desc", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{System: sys, Filter: []profiles.ConceptFilter{
			{Property: "concept", Op: "is-a", Value: "warm"}, {Property: "concept", Op: "descendent-of", Value: "red"}}}}}},
		"all":     {URL: "all", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{System: sys}}}},
		"regex":   {URL: "regex", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{System: sys, Filter: []profiles.ConceptFilter{{Property: "concept", Op: "regex", Value: "r.*"}}}}}},
		"import":  {URL: "import", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{System: sys, ValueSet: []string{"in"}}}}},
		"missing": {URL: "missing", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{ValueSet: []string{"nowhere"}}}}},
		"cycle":   {URL: "cycle", Compose: &profiles.ValueSetCompose{Include: []profiles.ConceptSet{{ValueSet: []string{"cycle"}}}}},
	}}
	v := New(d, Options{})
	for _, c := range []struct {
		vs, code  string
		in, known bool
	}{
		{"eq", "red", true, true}, {"eq", "crimson", false, true},
		{"in", "blue", true, true}, {"in", "red", true, true}, {"in", "green", false, true},
		{"isa+desc", "crimson", true, true}, {"isa+desc", "red", false, true}, {"isa+desc", "orange", false, true},
		{"all", "grey", true, true}, {"all", "pink", false, true},
		{"regex", "red", false, false},
		{"import", "blue", true, true}, {"import", "grey", false, true},
		{"missing", "x", false, false},
		{"cycle", "x", false, false},
	} {
		x := v.expansion(c.vs)
		in, known := x.member(sys, c.code)
		if in != c.in || known != c.known {
			t.Errorf("%s %s: in=%v known=%v", c.vs, c.code, in, known)
		}
	}
	if x := v.expansion("nothere"); x.found {
		t.Error("unknown ValueSet found")
	}
}

func TestBindingKinds(t *testing.T) {
	v := testValidator(t, Options{})
	// required binding on a CodeableConcept with text only: warning
	res := validate(t, v, edit(t, validPatient, func(m map[string]any) {
		m["communication"] = []any{map[string]any{"language": map[string]any{"text": "Norwegian"}}}
	}), testPatientURL)
	checkWant(t, res, &want{"binding", "warning", "Patient.communication[0].language"})
	// a code from another system in a CodeableConcept with one good coding passes
	res = validate(t, v, edit(t, validPatient, func(m map[string]any) {
		m["maritalStatus"] = map[string]any{"coding": []any{
			map[string]any{"system": "http://other", "code": "x"},
			map[string]any{"system": "http://example.org/fhir/CodeSystem/colors", "code": "green"}}}
	}), testPatientURL)
	checkWant(t, res, nil)
}

// A discriminator path that only looks like extension('…') is refused,
// not a panic.
func TestParsePathMalformedExtension(t *testing.T) {
	for _, p := range []string{"extension(')", "extension('", "extension(')')x"} {
		if _, ok := parsePath(p); ok {
			t.Errorf("parsePath(%q) accepted", p)
		}
	}
}

// A profile repeated in a nested resource's meta.profile is walked once.
func TestNestedProfilesOnce(t *testing.T) {
	v := New(CoreDefinitions{}, Options{})
	profiles := strings.Repeat(`"https://elsewhere.test/P",`, 200)
	body := `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:0a4f2c5e-1c3b-4e0e-9d6a-3f2b1c0d9e8f",` +
		`"resource":{"resourceType":"Basic","code":{"text":"x"},"meta":{"profile":[` + strings.TrimSuffix(profiles, ",") + `]}}}]}`
	r, err := v.ValidateJSON(context.Background(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, is := range r.Issues {
		if strings.Contains(is.Message, "https://elsewhere.test/P") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the repeated unknown profile was reported %d times, want once:%s", n, dump(r.Issues))
	}
}
