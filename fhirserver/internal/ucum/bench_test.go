package ucum

import (
	"math/big"
	"testing"
)

func BenchmarkConvertMgToG(b *testing.B) {
	v := big.NewRat(5, 1)
	Convert(v, "mg", "g")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Convert(v, "mg", "g"); !ok {
			b.Fatal("not ok")
		}
	}
}

func BenchmarkCanonicalMgPerDL(b *testing.B) {
	v := big.NewRat(5, 1)
	Canonical(v, "mg/dL")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := Canonical(v, "mg/dL"); !ok {
			b.Fatal("not ok")
		}
	}
}

// BenchmarkParseUncached measures a cold parse of a compound unit.
func BenchmarkParseUncached(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if u := parseUnit("mL/(kg.min)"); u == nil {
			b.Fatal("nil")
		}
	}
}
