package fhirpath

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// Date/time arithmetic: results outside years 0001-9999 are empty, and
// huge amounts must not wrap around (FHIRPath N1 §6.6.1).
func TestFixDateTimeArithmeticOverflow(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"@2015-01-01 + 1537228672809129302 years", nil, `[]`},
		{"@2015-01-01 - 1537228672809129302 years", nil, `[]`},
		{"@2015-01-01 + 9223372036854775807 months", nil, `[]`},
		// beyond a time.Duration (~292 years) but inside 0001-9999: these
		// wrapped to 1722-09-22T00:25:26Z and 1747-05-03T04:12
		{"@2015-01-01T00:00:00Z + 2562048 hours", nil, `["2307-04-13T00:00:00Z"]`},
		{"@2015-01-01T10:00 + 10000000000 seconds", nil, `["2331-11-22T03:46"]`},
		{"@2015-01-01T00:00:00Z + 100000000 hours", nil, `[]`},
		{"@2015-01-01T10:00 + 1000000000000 seconds", nil, `[]`},
		{"@2015-01-01 + 2635249153387078802 weeks", nil, `[]`},
		{"@2015-01-01T00:00:00Z + 9223372036854775807 milliseconds", nil, `[]`},
		{"@2015-01-01T00:00:00Z - 9223372036854775807 milliseconds", nil, `[]`},
		{"@2015-01-01 + 3000000 days", nil, `[]`},
		{"@9999-12-31 + 1 day", nil, `[]`},
		{"@0001-01-01 - 1 day", nil, `[]`},
		// in range, including amounts beyond what a time.Duration holds
		{"@2015-01-01 + 1 year", nil, `["2016-01-01"]`},
		{"@2015-01-01T00:00:00Z + 24 hours", nil, `["2015-01-02T00:00:00Z"]`},
		{"@0001-01-01T00:00:00Z + 315537811200000 milliseconds", nil, `["9999-12-31T00:00:00Z"]`},
		{"@9999-12-31T00:00:00Z - 315537811200 seconds", nil, `["0001-01-01T00:00:00Z"]`},
		{"@2015-01-01T10:00 + 86400 seconds", nil, `["2015-01-02T10:00"]`},
		{"@T10:00:00 + 25 hours", nil, `["11:00:00"]`},
	})
}

// div gives an Integer; a quotient outside the 32-bit range is empty.
func TestFixDecimalDivRange(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"9999999999999999999999999999.0 div 0.00000001", nil, `[]`},
		{"5000000000.0 div 1", nil, `[]`},
		{"-5000000000.0 div 1", nil, `[]`},
		{"2147483647.0 div 1", nil, `[2147483647]`},
		{"-2147483648.0 div 1", nil, `[-2147483648]`},
		{"5.5 div 0.7", nil, `[7]`},
		{"5.5 div 0", nil, `[]`},
	})
}

// Offset temperatures have no sum with a different unit.
func TestFixOffsetUnitArithmetic(t *testing.T) {
	runEvalCases(t, []evalCase{
		{"10 'Cel' + 1 'K'", nil, `[]`},
		{"10 'Cel' - 1 'K'", nil, `[]`},
		{"1 'K' + 10 'Cel'", nil, `[]`},
		{"10 'Cel' + 1 '[degF]'", nil, `[]`},
		{"10 '[degF]' + 1 '[degRe]'", nil, `[]`},
		{"(10 'Cel' + 1 'Cel') = 11 'Cel'", nil, `[true]`},
		{"(10 '[degF]' - 1 '[degF]') = 9 '[degF]'", nil, `[true]`},
		{"(10 'K' + 1 'K') = 11 'K'", nil, `[true]`},
		{"0 'Cel' = 32 '[degF]'", nil, `[true]`},
		{"0 'Cel' < 1 'K'", nil, `[false]`},
	})
}

// resourceType from the data only names concrete resource types, and
// misses are not cached.
func TestFixResourceTypeFromData(t *testing.T) {
	bb := map[string]any{"resourceType": "Patient.contact", "name": map[string]any{"family": "X"}}
	tests := []evalCase{
		{"$this is BackboneElement", bb, `[false]`},
		{"name.family", bb, `["X"]`},
		{"$this is Patient", map[string]any{"resourceType": "Patient"}, `[true]`},
		{"$this is Resource", map[string]any{"resourceType": "HumanName"}, `[false]`},
	}
	runEvalCases(t, tests)
	// that misses are not cached is proven in package model
}

// Resource.id, Element.id and Extension.url are FHIR primitives (the
// structuredefinition-fhir-type extension names their type).
func TestFixFHIRTypeExtension(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	ext := map[string]any{"resourceType": "Patient", "id": "p1",
		"extension": []any{map[string]any{"id": "e1", "url": "http://x", "valueString": "v"}}}
	runEvalCases(t, []evalCase{
		{"Patient.id", pat, `["example"]`},
		{"Patient.id.ofType(string)", pat, `["example"]`},
		{"Patient.id.ofType(FHIR.string)", pat, `["example"]`},
		{"Patient.id is string", pat, `[true]`},
		{"Patient.id is FHIR.string", pat, `[true]`},
		{"Patient.id is System.String", pat, `[false]`},
		{"Patient.id.type().name", pat, `["string"]`},
		{"Patient.id.type().namespace", pat, `["FHIR"]`},
		{"Patient.id = 'example'", pat, `[true]`},
		{"Patient.extension.url is uri", ext, `[true]`},
		{"Patient.extension.url.type().name", ext, `["uri"]`},
		{"Patient.extension.id is string", ext, `[true]`},
		{"Patient.extension.value is string", ext, `[true]`},
		// the value of a primitive stays a System value
		{"Patient.id.value", ext, `[]`},
	})
}

// The caller owns Evaluate's result: writing into it changes nothing
// for later evaluations.
func TestFixResultNotAliased(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	for _, expr := range []string{"'a'", "true", "1 = 1", "1 = 2", "'a'.where(true)", "{}.empty()", "@2015-01-01", "5 'mg'"} {
		e, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		first, err := e.Evaluate(context.Background(), pat)
		if err != nil || len(first) != 1 {
			t.Fatalf("%s: %v %v", expr, first, err)
		}
		want, _ := json.Marshal(first)
		first[0] = value.Int(42)
		for _, again := range []string{expr, "1 = 1", "1 = 2"} {
			e2 := e
			if again != expr {
				e2 = MustCompile(again)
			}
			got, err := e2.Evaluate(context.Background(), pat)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 1 && got[0].TypeName() == "System.Integer" && got[0].String() == "42" {
				t.Errorf("%s: writing into a result of %s changed a later result", again, expr)
			}
		}
		got, _ := e.Evaluate(context.Background(), pat)
		if b, _ := json.Marshal(got); string(b) != string(want) {
			t.Errorf("%s = %s after a write into an earlier result, want %s", expr, b, want)
		}
	}
	// concurrent writers do not see each other's writes
	e := MustCompile("Patient.active = true")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c, err := e.Evaluate(context.Background(), pat)
				if err != nil || len(c) != 1 || c[0].TypeName() != "System.Boolean" {
					t.Errorf("got %v, %v", c, err)
					return
				}
				c[0] = value.Int(7)
			}
		}()
	}
	wg.Wait()
	// that the literal walk knows every node type the parser builds is
	// proven in package eval
	if d := DefaultLimits(); d.MaxCollection <= 0 || d.MaxDepth <= 0 {
		t.Errorf("DefaultLimits() = %+v", d)
	}
}

// The same input node reached twice is one item in union and distinct.
func TestFixUnionNodeIdentity(t *testing.T) {
	pat := decodeJSON(t, []byte(`{"resourceType":"Patient","name":[{"given":["Jim",null,"Pete"],"_given":[null,{"extension":[{"url":"http://x","valueString":"a"}]},null]}]}`))
	var big []any
	var bigExt []any
	for i := 0; i < 40; i++ {
		big = append(big, nil)
		bigExt = append(bigExt, map[string]any{"id": "x"})
	}
	large := map[string]any{"resourceType": "Patient", "name": []any{map[string]any{"given": big, "_given": bigExt}}}
	runEvalCases(t, []evalCase{
		{"(name.given | name.given).count()", pat, `[3]`},
		{"name.given.distinct().count()", pat, `[3]`},
		{"(name.given | name.given).distinct().count()", pat, `[3]`},
		{"name.given.union(name.given).count()", pat, `[3]`},
		{"(name.given | name.given).isDistinct()", pat, `[true]`},
		{"name.given.count()", pat, `[3]`},
		// one empty side: the other side is still de-duplicated
		{"(Patient.name.given | {})", loadJSON(t, "patient.json"), `["Anna","Marie","Annie"]`},
		{"({} | Patient.name.given)", loadJSON(t, "patient.json"), `["Anna","Marie","Annie"]`},
		{"Patient.name.given.distinct()", loadJSON(t, "patient.json"), `["Anna","Marie","Annie"]`},
		{"Patient.name.family.distinct()", loadJSON(t, "patient.json"), `["Berg","Olsen"]`},
		{"(1 | 2 | {}).count()", nil, `[2]`},
		{"name.given.count()", large, `[40]`},
		{"(name.given | name.given).count()", large, `[40]`},
		{"name.given.distinct().count()", large, `[40]`},
	})
}

// Two matching choice keys: the first in sorted order, every time.
func TestFixChoiceKeyDeterministic(t *testing.T) {
	obj := map[string]any{"valueString": "s", "valueBoolean": true, "valueInteger": json.Number("3")}
	for i := 0; i < 50; i++ {
		got, err := evalJSON(t, "value", obj)
		if err != nil {
			t.Fatal(err)
		}
		if got != `[true]` {
			t.Fatalf("value = %s, want [true] (valueBoolean sorts first)", got)
		}
	}
	runEvalCases(t, []evalCase{
		{"value", map[string]any{"valueString": "s"}, `["s"]`},
		{"value", map[string]any{"valuePatient.contact": map[string]any{"name": "n"}}, `[{"name":"n"}]`},
	})
}

// $index and $total are only defined inside the functions that set them.
func TestFixSpecialVariableScope(t *testing.T) {
	for _, expr := range []string{"$index", "$total", "1 + $index", "Patient.name[$index]", "where(true).$total", "select($total)"} {
		if _, err := Compile(expr); err == nil {
			t.Errorf("Compile(%q) succeeded, want an error", expr)
		}
	}
	pat := loadJSON(t, "patient.json")
	runEvalCases(t, []evalCase{
		{"Patient.name.select($index)", pat, `[0,1,2]`},
		{"Patient.name.where($index = 2).family", pat, `["Olsen"]`},
		{"(1|2|3).aggregate($this + $total, 0)", nil, `[6]`},
		{"(1|2|3).aggregate(iif($total.empty(), $this, $total + $this))", nil, `[6]`},
		{"(1|2).aggregate($total + (3|4).select($index).count(), 0)", nil, `[4]`},
	})
}
