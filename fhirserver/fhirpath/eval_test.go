package fhirpath

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Expected results are JSON renderings of the result collection, taken
// from the FHIRPath specification's examples and rules.
func TestEvaluate(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	obs := loadJSON(t, "observation.json")
	runEvalCases(t, []evalCase{
		// navigation and the root type name
		{"Patient.name.family", pat, `["Berg","Olsen"]`},
		{"name.given", pat, `["Anna","Marie","Annie","Anna"]`},
		{"Patient.name[1].given", pat, `["Annie"]`},
		{"Observation.name", pat, `[]`},
		{"Patient.name.where(use = 'official').given.first()", pat, `["Anna"]`},
		// choice types
		{"Observation.value", obs, `[{"code":"kg","system":"http://unitsofmeasure.org","unit":"kg","value":67.50}]`},
		{"Observation.value.ofType(Quantity).value", obs, `[67.50]`},
		{"Observation.value is Quantity", obs, `[true]`},
		{"(Observation.value as Quantity).unit", obs, `["kg"]`},
		{"Observation.value as Period", obs, `[]`},
		{"Observation.value > 60 'kg'", obs, `[true]`},
		{"Observation.effective is dateTime", obs, `[true]`},
		{"Patient.deceased = false", pat, `[true]`},
		// primitive extensions
		{"Patient.birthDate.extension('http://hl7.org/fhir/StructureDefinition/patient-birthTime').value", pat, `["1981-04-17T06:15:00+02:00"]`},
		{"Patient.name[0].given[1].extension.value", pat, `["CL"]`},
		{"Patient.name[0].given[0].extension.exists()", pat, `[false]`},
		{"Patient.birthDate.hasValue()", pat, `[true]`},
		{"Patient.birthDate.getValue() = @1981-04-17", pat, `[true]`},
		// contained and resolve
		{"Observation.performer.resolve().name.family", obs, `["Hansen"]`},
		{"Observation.contained.ofType(Practitioner).id", obs, `["p1"]`},
		{"Observation.performer.resolve() is Practitioner", obs, `[true]`},
		// arithmetic, precedence, logic
		{"1 + 2 * 3", nil, `[7]`},
		{"(1 + 2) * 3", nil, `[9]`},
		{"-2 + 5", nil, `[3]`},
		{"7 div 2", nil, `[3]`},
		{"7 mod 2", nil, `[1]`},
		{"7 / 2", nil, `[3.5]`},
		{"1.0 + 2", nil, `[3.0]`},
		{"1.0.toString()", nil, `["1.0"]`},
		{"0.1 + 0.2 = 0.3", nil, `[true]`},
		{"'a' + 'b'", nil, `["ab"]`},
		{"'a' & {}", nil, `["a"]`},
		{"2147483647 + 1", nil, `[]`},
		{"5 / 0", nil, `[]`},
		{"true and {}", nil, `[]`},
		{"false and {}", nil, `[false]`},
		{"true or {}", nil, `[true]`},
		{"{} or false", nil, `[]`},
		{"true xor true", nil, `[false]`},
		{"false implies {}", nil, `[true]`},
		{"{} implies true", nil, `[true]`},
		{"1 | 2 | 1", nil, `[1,2]`},
		{"true or false and false", nil, `[true]`},
		{"false implies false implies false", nil, `[true]`},
		{"-1.abs()", nil, `[-1]`},
		{"(-1).abs()", nil, `[1]`},
		{"2 + 3 = 5 and 'a' < 'b'", nil, `[true]`},
		{"1 < 2 = true", nil, `[true]`},
		{"Patient.name.given.count() > 2 and Patient.active", pat, `[true]`},
		{"(1 | 2).combine(1)", nil, `[1,2,1]`},
		{"1 is Integer | 2", nil, `[true,2]`},
		{"2 in (1 | 2)", nil, `[true]`},
		{"(1 | 2) contains 3", nil, `[false]`},
		// equality and equivalence
		{"(1 | 2) = (1 | 2)", nil, `[true]`},
		{"(1 | 2) = (2 | 1)", nil, `[false]`},
		{"(1 | 2) ~ (2 | 1)", nil, `[true]`},
		{"{} = {}", nil, `[]`},
		{"{} ~ {}", nil, `[true]`},
		{"'Abc  d' ~ 'abc d'", nil, `[true]`},
		{"1.2 ~ 1.21", nil, `[true]`},
		{"1 = 1.0", nil, `[true]`},
		// dates with partial precision and time zones
		{"@2015-02 = @2015-02-01", nil, `[]`},
		{"@2015-02 < @2015-03-01", nil, `[true]`},
		{"@2015 ~ @2015-01", nil, `[false]`},
		{"@2012-04-15T15:00:00+02:00 = @2012-04-15T16:00:00+03:00", nil, `[true]`},
		{"@2012-04-15T10:00:00 = @2012-04-15T10:00:00.0", nil, `[true]`},
		{"@T14:30 < @T14:31", nil, `[true]`},
		{"@2014-01-31 + 1 month", nil, `["2014-02-28"]`},
		{"@2015-02-04T14:34:28Z - 2 hours", nil, `["2015-02-04T12:34:28Z"]`},
		{"Patient.birthDate < @2000-01-01", pat, `[true]`},
		// quantities
		{"4 'mg' + 1 'mg'", nil, `[{"value":5,"unit":"mg"}]`},
		{"1 'g' = 1000 'mg'", nil, `[true]`},
		{"1 year = 1 'a'", nil, `[]`},
		{"1 year ~ 1 'a'", nil, `[true]`},
		{"2 'mL/min' = 120 'mL/h'", nil, `[true]`},
		{"1 '[lb_av]' > 450 'g'", nil, `[true]`},
		{"1 week = 7 days", nil, `[true]`},
		{"60 'min' = 1 hour", nil, `[true]`},
		{"'5 \\'mg\\''.toQuantity()", nil, `[{"value":5,"unit":"mg"}]`},
		// existence and filtering
		{"Patient.telecom.where(system = 'email').exists()", pat, `[true]`},
		{"Patient.name.all(given.exists())", pat, `[true]`},
		{"Patient.name.select(given.first())", pat, `["Anna","Annie","Anna"]`},
		{"Patient.name.given.distinct()", pat, `["Anna","Marie","Annie"]`},
		{"Patient.name.given.isDistinct()", pat, `[false]`},
		{"(1 | 2 | 3).where($this > 1).select($this * 10)", nil, `[20,30]`},
		{"(10 | 20 | 30).select($index)", nil, `[0,1,2]`},
		{"(1 | 2 | 3).aggregate($this + $total, 0)", nil, `[6]`},
		{"(1|2|3).skip(1).take(1)", nil, `[2]`},
		{"(1|2|3).tail().last()", nil, `[3]`},
		{"(1|2|3).intersect(2|3|4)", nil, `[2,3]`},
		{"(1|2|3).exclude(2)", nil, `[1,3]`},
		{"(1|2).subsetOf(1|2|3)", nil, `[true]`},
		{"(true|false).anyTrue()", nil, `[true]`},
		{"iif(1 > 2, 'a', 'b')", nil, `["b"]`},
		{"Patient.contact.repeat(name).family", pat, `["Berg"]`},
		{"Observation.children().count() > 10", obs, `[true]`},
		{"Observation.descendants().where($this is Coding).code.count()", obs, `[7]`},
		// strings
		{"'abcdef'.substring(2, 3)", nil, `["cde"]`},
		{"'abc'.indexOf('c')", nil, `[2]`},
		{"'a,b'.split(',').join('|')", nil, `["a|b"]`},
		{"'Hello'.matches('^H.*o$')", nil, `[true]`},
		{"'abc'.replaceMatches('(b)', '[$1]')", nil, `["a[b]c"]`},
		{"'ABC'.lower().upper().length()", nil, `[3]`},
		{"'  x '.trim()", nil, `["x"]`},
		{"'abc'.toChars()", nil, `["a","b","c"]`},
		// math
		{"(-5).abs()", nil, `[5]`},
		{"1.5.ceiling()", nil, `[2]`},
		{"(-1.5).floor()", nil, `[-2]`},
		{"3.14159.round(2)", nil, `[3.14]`},
		{"16.sqrt()", nil, `[4]`},
		{"2.power(10)", nil, `[1024]`},
		{"2.718.truncate()", nil, `[2]`},
		// conversion
		{"'true'.toBoolean()", nil, `[true]`},
		{"'12'.toInteger() + 1", nil, `[13]`},
		{"'1.50'.toDecimal()", nil, `[1.50]`},
		{"'abc'.convertsToInteger()", nil, `[false]`},
		{"'2015-02-04'.toDate()", nil, `["2015-02-04"]`},
		{"@2015-02-04T10:00:00Z.toString()", nil, `["2015-02-04T10:00:00Z"]`},
		{"@2015T.toString()", nil, `["2015"]`},
		{"@2015T is DateTime", nil, `[true]`},
		// types
		{"Patient.type().name", pat, `["Patient"]`},
		{"Patient.type().namespace", pat, `["FHIR"]`},
		{"1.type().name", nil, `["Integer"]`},
		{"Patient is DomainResource", pat, `[true]`},
		{"Patient.name.first() is HumanName", pat, `[true]`},
		{"Patient.gender is code", pat, `[true]`},
		{"Patient.active is System.Boolean", pat, `[false]`},
		// environment
		{"%resource.id", pat, `["example"]`},
		{"%ucum", nil, `["http://unitsofmeasure.org"]`},
		{"%`vs-administrative-gender`", nil, `["http://hl7.org/fhir/ValueSet/administrative-gender"]`},
		{"%`ext-patient-birthTime`", nil, `["http://hl7.org/fhir/StructureDefinition/patient-birthTime"]`},
		{"Patient.extension(%`ext-patient-birthPlace`).value.city", pat, `["Bergen"]`},
		{"Patient.text.div.htmlChecks()", pat, `[true]`},
		{"Patient.conformsTo('http://hl7.org/fhir/StructureDefinition/Patient')", pat, `[true]`},
		{"Patient.name.family.memberOf('http://x')", pat, `[]`},
		// comments
		{"1 + /* two */ 2 // three", nil, `[3]`},
	})
}

func TestErrors(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	for _, expr := range []string{
		"1 +", "(1", "'abc", "@20x", "Patient.name.", "1 is", "foo(", "unknownFn()",
		"1.substring()", "$foo", "{1}", "Patient.as(NoSuchType)",
	} {
		if _, err := Compile(expr); err == nil {
			t.Errorf("%q compiled", expr)
		} else {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("%q: error %v has no position", expr, err)
			}
		}
	}
	for _, expr := range []string{
		"Patient.name.given + 1",    // singleton expected
		"Patient.name.family < 'x'", // singleton expected
		"'a' < 1",                   // not comparable
		"%undefined",
		"(1|2).single()",
		"(1|2).iif(true, 1, 2)",
		"'x'.matches('(?<')",
	} {
		if got, err := evalJSON(t, expr, pat); err == nil {
			t.Errorf("%q: no error, got %s", expr, got)
		}
	}
	if got, err := evalJSON(t, "Observation.valueQuantity", loadJSON(t, "observation.json")); err == nil {
		t.Errorf("choice element reached by its typed name: no error, got %s", got)
	}
	if _, err := evalJSON(t, "Encounter.status", pat, WithStrict(true)); err == nil {
		t.Error("strict mode: wrong resource type is not an error")
	}
}

func TestOptions(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	got, err := evalJSON(t, "%x + 1", nil, WithVariable("x", 41))
	if err != nil || got != `[42]` {
		t.Errorf("variable: %s %v", got, err)
	}
	got, err = evalJSON(t, "Patient.managingOrganization.resolve().name", pat, WithResolver(func(_ context.Context, ref string) (any, error) {
		return map[string]any{"resourceType": "Organization", "id": "1", "name": "Kiln General"}, nil
	}))
	if err != nil || got != `["Kiln General"]` {
		t.Errorf("resolver: %s %v", got, err)
	}
	now := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	got, err = evalJSON(t, "now() = now() and today() = @2024-05-06 and timeOfDay() = @T07:08:09.000", nil, WithNow(now))
	if err != nil || got != `[true]` {
		t.Errorf("clock: %s %v", got, err)
	}
	_, err = evalJSON(t, "(1|2|3).repeat($this + 1)", nil, WithLimits(Limits{MaxCollection: 1000, MaxDepth: 50}))
	if err == nil {
		t.Error("unbounded repeat did not hit a limit")
	}
}

func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := MustCompile("(1|2|3).select($this)")
	if _, err := e.Evaluate(ctx, nil); err == nil {
		t.Error("cancelled context not honoured")
	}
}

// TestDeepInput checks that a 100,000-deep input fails fast under the
// depth limit.
func TestDeepInput(t *testing.T) {
	var v any = map[string]any{"x": "leaf"}
	for i := 0; i < 100000; i++ {
		v = map[string]any{"a": v}
	}
	start := time.Now()
	_, err := MustCompile("descendants()").Evaluate(context.Background(), v)
	if err == nil {
		t.Error("no error on a 100,000-deep input")
	}
	_, err = MustCompile("repeat(a)").Evaluate(context.Background(), v)
	if err == nil {
		t.Error("no error on a 100,000-deep repeat")
	}
	if d := time.Since(start); d > hangBound {
		t.Errorf("took %v", d)
	}
	deep := strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000)
	if _, err := Compile(deep); err == nil {
		t.Error("no error on a pathological expression")
	}
	long := "a" + strings.Repeat(".a", 100000)
	if _, err := Compile(long); err == nil {
		t.Error("no error on a 100,000-step path")
	}
}

func TestConcurrentEvaluation(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	exprs := searchParamsFor(t, "Patient")
	want := make([]string, len(exprs))
	for i, e := range exprs {
		c, _ := e.Evaluate(context.Background(), pat)
		b, _ := c.MarshalJSON()
		want[i] = string(b)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 20; r++ {
				for i, e := range exprs {
					c, err := e.Evaluate(context.Background(), pat)
					if err != nil {
						t.Error(err)
						return
					}
					if b, _ := c.MarshalJSON(); string(b) != want[i] {
						t.Errorf("%s: %s != %s", e, b, want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestBundleResolve(t *testing.T) {
	bundle := decodeJSON(t, []byte(`{"resourceType":"Bundle","type":"collection","entry":[
		{"fullUrl":"http://x/fhir/Patient/p1","resource":{"resourceType":"Patient","id":"p1","gender":"male"}},
		{"fullUrl":"urn:uuid:0b4","resource":{"resourceType":"Observation","id":"o1","status":"final",
		 "code":{"text":"x"},"subject":{"reference":"Patient/p1"},"focus":[{"reference":"urn:uuid:0b4"}]}}]}`))
	for expr, want := range map[string]string{
		"Bundle.entry.resource.ofType(Observation).subject.resolve().gender": `["male"]`,
		"Bundle.entry.resource.ofType(Observation).focus.resolve().id":       `["o1"]`,
		"Bundle.entry.resource.where($this is Patient).id":                   `["p1"]`,
		"Bundle.entry[1].resource.status":                                    `["final"]`,
	} {
		got, err := evalJSON(t, expr, bundle)
		if err != nil || got != want {
			t.Errorf("%s = %s (%v), want %s", expr, got, err, want)
		}
	}
}

func TestLargeUnion(t *testing.T) {
	got, err := evalJSON(t, "((1|2|3).repeat(iif($this < 200, $this + 1, {})) | (1.0|2|'a'|'a'|true|true|@2015|@2015-01|1 'mg')).count()", nil)
	if err != nil || got != `[205]` {
		t.Errorf("large union: %s %v", got, err)
	}
	got, err = evalJSON(t, "(descendants() | descendants()).isDistinct() and descendants().count() > 64", loadJSON(t, "observation.json"))
	if err != nil || got != `[true]` {
		t.Errorf("large union of nodes: %s %v", got, err)
	}
}

func TestArrayInput(t *testing.T) {
	got, err := evalJSON(t, "ofType(Patient).id | ofType(Observation).status", []any{
		map[string]any{"resourceType": "Patient", "id": "a"},
		map[string]any{"resourceType": "Observation", "status": "final"},
	})
	if err != nil || got != `["a","final"]` {
		t.Errorf("array input: %s %v", got, err)
	}
}

func TestFloat64Input(t *testing.T) {
	obs := map[string]any{"resourceType": "Observation", "status": "final", "code": map[string]any{"text": "x"},
		"valueQuantity": map[string]any{"value": 67.5, "code": "kg", "system": "http://unitsofmeasure.org"}}
	got, err := evalJSON(t, "Observation.value.value = 67.5 and Observation.value > 67000 'g'", obs)
	if err != nil || got != `[true]` {
		t.Errorf("float64 input: %s %v", got, err)
	}
}

// hangBound is how long a robustness test lets one evaluation run before it
// counts as a hang. It is generous on purpose: these tests prove that hostile
// input ends, not how fast (benchmarks do that), and CI runs them under the
// race detector on a busy machine.
const hangBound = 60 * time.Second
