package fhirpath

import (
	"context"
	"slices"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

func TestAllSearchParameterExpressionsCompile(t *testing.T) {
	sps, err := profiles.SearchParameters()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sp := range sps {
		if sp.Expression == "" {
			continue
		}
		n++
		if _, err := Compile(sp.Expression); err != nil {
			t.Errorf("%s: %q: %v", sp.ID, sp.Expression, err)
		}
		for _, c := range sp.Component {
			if _, err := Compile(c.Expression); err != nil {
				t.Errorf("%s component: %q: %v", sp.ID, c.Expression, err)
			}
		}
	}
	if n < 1300 {
		t.Errorf("only %d expressions", n)
	}
}

func TestAllConstraintExpressionsCompile(t *testing.T) {
	sds, err := profiles.StructureDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	seen := map[string]bool{}
	for _, sd := range sds {
		for _, e := range sd.Elements {
			for _, c := range e.Constraint {
				if c.Expression == "" || seen[c.Expression] {
					continue
				}
				seen[c.Expression] = true
				n++
				if _, err := Compile(c.Expression); err != nil {
					t.Errorf("%s %s: %q: %v", sd.Name, c.Key, c.Expression, err)
				}
			}
		}
	}
	if n < 150 {
		t.Errorf("only %d constraint expressions", n)
	}
}

// searchParamsFor returns the compiled expressions of the parameters
// that apply to a resource type.
func searchParamsFor(t testing.TB, typ string) []*Expression {
	sps, err := profiles.SearchParameters()
	if err != nil {
		t.Fatal(err)
	}
	var out []*Expression
	for _, sp := range sps {
		if sp.Expression == "" {
			continue
		}
		if !slices.Contains(sp.Base, typ) && !slices.Contains(sp.Base, "Resource") && !slices.Contains(sp.Base, "DomainResource") {
			continue
		}
		out = append(out, MustCompile(sp.Expression))
	}
	return out
}

// invariantsFor returns the compiled constraints of a type's definition.
func invariantsFor(t testing.TB, typ string) []*Expression {
	sd, ok := profiles.TypeDefinition(typ)
	if !ok {
		t.Fatalf("no definition for %s", typ)
	}
	var out []*Expression
	for _, e := range sd.Elements {
		if e.Path != typ {
			continue
		}
		for _, c := range e.Constraint {
			if c.Expression != "" && c.Severity == "error" {
				out = append(out, MustCompile(c.Expression))
			}
		}
	}
	return out
}

func TestSearchParametersEvaluateWithoutError(t *testing.T) {
	for typ, file := range map[string]string{"Patient": "patient.json", "Observation": "observation.json"} {
		res := loadJSON(t, file)
		exprs := searchParamsFor(t, typ)
		if len(exprs) < 20 {
			t.Fatalf("%s: only %d parameters", typ, len(exprs))
		}
		nonEmpty := 0
		for _, e := range exprs {
			c, err := e.Evaluate(context.Background(), res)
			if err != nil {
				t.Errorf("%s: %s: %v", typ, e, err)
			}
			if len(c) > 0 {
				nonEmpty++
			}
		}
		if nonEmpty < 10 {
			t.Errorf("%s: only %d parameters have values", typ, nonEmpty)
		}
	}
}

func TestInvariantsHoldOnTypicalResources(t *testing.T) {
	for typ, file := range map[string]string{"Patient": "patient.json", "Observation": "observation.json"} {
		res := loadJSON(t, file)
		for _, e := range invariantsFor(t, typ) {
			c, err := e.Evaluate(context.Background(), res)
			if err != nil {
				t.Errorf("%s: %s: %v", typ, e, err)
				continue
			}
			if len(c) == 1 && c[0].TypeName() == "System.Boolean" && c[0].String() == "false" {
				t.Errorf("%s: invariant %s fails on a valid resource", typ, e)
			}
		}
	}
}
