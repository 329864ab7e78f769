package fhirpath

import (
	"context"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

func BenchmarkPatientNameFamily(b *testing.B) {
	pat := loadJSON(b, "patient.json")
	e := MustCompile("Patient.name.family")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(ctx, pat); err != nil {
			b.Fatal(err)
		}
	}
}

func benchAll(b *testing.B, exprs []*Expression, res any) {
	ctx := context.Background()
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
