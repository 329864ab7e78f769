package fhirpath

import (
	"context"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

func BenchmarkPatientNameFamily(b *testing.B) {
	pat := loadJSON(b, "patient.json")
	e := MustCompile("Patient.name.family")
	ctx := context.Background()
	_, _ = e.Evaluate(ctx, pat) // load the type tables outside the timing
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(ctx, pat); err != nil {
			b.Fatal(err)
		}
	}
}

func benchAll(b *testing.B, exprs []*Expression, res any) {
	ctx := context.Background()
	for _, e := range exprs {
		_, _ = e.Evaluate(ctx, res) // load the type tables outside the timing
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range exprs {
			if _, err := e.Evaluate(ctx, res); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPatientSearchParameters evaluates every R4 SearchParameter
// that applies to Patient on one Patient (one op = all of them).
func BenchmarkPatientSearchParameters(b *testing.B) {
	benchAll(b, searchParamsFor(b, "Patient"), loadJSON(b, "patient.json"))
}

func BenchmarkObservationSearchParameters(b *testing.B) {
	benchAll(b, searchParamsFor(b, "Observation"), loadJSON(b, "observation.json"))
}

// BenchmarkPatientInvariants evaluates every constraint of the Patient
// definition (all elements) on one Patient.
func BenchmarkPatientInvariants(b *testing.B) {
	sd, _ := profiles.TypeDefinition("Patient")
	var exprs []*Expression
	for _, e := range sd.Elements {
		for _, c := range e.Constraint {
			if c.Expression != "" && e.Path == "Patient" {
				exprs = append(exprs, MustCompile(c.Expression))
			}
		}
	}
	benchAll(b, exprs, loadJSON(b, "patient.json"))
}

// BenchmarkPatientAllElementInvariants evaluates every constraint of every
// element of the Patient definition on the element instances of one
// Patient, as a validator does: each element path is navigated once, then
// its constraints run on each instance. "without-ele-1" leaves out ele-1
// (hasValue() or children()), which validators usually check structurally.
func BenchmarkPatientAllElementInvariants(b *testing.B) {
	for _, skipEle1 := range []bool{false, true} {
		name := "all"
		if skipEle1 {
			name = "without-ele-1"
		}
		b.Run(name, func(b *testing.B) { benchElementInvariants(b, skipEle1) })
	}
}

func benchElementInvariants(b *testing.B, skipEle1 bool) {
	sd, _ := profiles.TypeDefinition("Patient")
	type element struct {
		path   *Expression
		checks []*Expression
	}
	var elements []element
	constraints := 0
	for _, e := range sd.Elements {
		var checks []*Expression
		for _, c := range e.Constraint {
			if c.Expression == "" || skipEle1 && c.Key == "ele-1" {
				continue
			}
			checks = append(checks, MustCompile(c.Expression))
		}
		if len(checks) > 0 {
			elements = append(elements, element{MustCompile(strings.TrimSuffix(e.Path, "[x]")), checks})
			constraints += len(checks)
		}
	}
	pat := loadJSON(b, "patient.json")
	ctx := context.Background()
	resource := WithVariable("resource", pat)
	run := func() {
		for _, el := range elements {
			items, err := el.path.Evaluate(ctx, pat)
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range items {
				for _, c := range el.checks {
					if _, err := c.Evaluate(ctx, it, resource); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	run()
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(constraints), "constraints")
}

// BenchmarkCompileSearchParameters compiles every R4 SearchParameter
// expression (one op = all of them).
func BenchmarkCompileSearchParameters(b *testing.B) {
	sps, err := profiles.SearchParameters()
	if err != nil {
		b.Fatal(err)
	}
	MustCompile("Patient.name.is(HumanName)") // load type tables once
	b.ReportAllocs()
	for b.Loop() {
		for _, sp := range sps {
			if sp.Expression == "" {
				continue
			}
			if _, err := Compile(sp.Expression); err != nil {
				b.Fatal(err)
			}
		}
	}
}
