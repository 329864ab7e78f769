package search

import (
	"context"
	"testing"
)

func benchExtract(b *testing.B, r *Registry, file string) {
	res := loadFixture(b, file)
	typ := res["resourceType"].(string)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Extract(ctx, typ, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtractObservation measures the target: all index
// entries of a typical Observation in ≤ 50 µs.
func BenchmarkExtractObservation(b *testing.B) { benchExtract(b, testRegistry(b), "observation.json") }

func BenchmarkExtractPatient(b *testing.B) { benchExtract(b, testRegistry(b), "patient.json") }

// The Whole variants compile each expression unsplit (every union branch
// for every type), to measure what per-type splitting saves.
func BenchmarkExtractObservationWhole(b *testing.B) {
	r, err := newRegistry(true)
	if err != nil {
		b.Fatal(err)
	}
	benchExtract(b, r, "observation.json")
}

func BenchmarkExtractPatientWhole(b *testing.B) {
	r, err := newRegistry(true)
	if err != nil {
		b.Fatal(err)
	}
	benchExtract(b, r, "patient.json")
}

// BenchmarkBuildRegistry is the one-off build from the core
// SearchParameters; BenchmarkNewRegistry what each later registry costs.
func BenchmarkBuildRegistry(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildRegistry(false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewRegistry(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRegistry(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtractObservationReuse is the steady state of a writer that
// reuses its entry buffer (AppendExtract).
func BenchmarkExtractObservationReuse(b *testing.B) {
	r := testRegistry(b)
	res := loadFixture(b, "observation.json")
	ctx := context.Background()
	var buf []Entry
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = r.AppendExtract(ctx, buf[:0], "Observation", res); err != nil {
			b.Fatal(err)
		}
	}
}
