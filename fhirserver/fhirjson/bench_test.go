package fhirjson

import (
	"os"
	"testing"
)

func BenchmarkCheckPatient(b *testing.B) {
	v := newValidator(b)
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Check(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardPatient measures the guard pass alone.
func BenchmarkGuardPatient(b *testing.B) {
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if s := scanDoc(body, 100); len(s.issues) > 0 {
			b.Fatal(s.issues)
		}
	}
}

func BenchmarkSetMeta(b *testing.B) {
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SetMeta(body, "kiln-demo-1", "2", goldenTime); err != nil {
			b.Fatal(err)
		}
	}
}
