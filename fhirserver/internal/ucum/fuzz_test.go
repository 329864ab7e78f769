package ucum

import (
	"math/big"
	"testing"
	"time"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"mg", "mg/dL", "10*3/uL", "10^-3", "/min", "{beats}/min", "mm[Hg]", "[lb_av]", "Cel",
		"[degF]", "(kg.m)/s2", "m2.s-1", "mL/(kg.min)", "[iU]/L", "%", "[pH]", "dB", "B[10.nV]",
		"mg//L", "m^", "", "{", "[", "((((m))))", "Ym1000", "[pi]99", "10*999/[lb_av]99",
	} {
		f.Add(s, "g")
	}
	f.Fuzz(func(t *testing.T, from, to string) {
		start := time.Now()
		one := big.NewRat(3, 7)
		vf, vt := Valid(from), Valid(to)
		got, ok := Convert(one, from, to)
		if ok && (!vf || !vt) {
			t.Fatalf("Convert(%q, %q) ok but Valid=%v,%v", from, to, vf, vt)
		}
		if one.Cmp(big.NewRat(3, 7)) != 0 {
			t.Fatal("argument mutated")
		}
		if c, canon, ok := Canonical(one, from); ok {
			if !vf {
				t.Fatalf("Canonical(%q) ok but not Valid", from)
			}
			if canon == "" || !Valid(canon) {
				t.Fatalf("Canonical(%q) unit %q is not valid", from, canon)
			}
			// Round trip through the canonical unit is exact.
			if back, ok := Convert(c, canon, from); !ok || back.Cmp(one) != 0 {
				t.Fatalf("round trip %q via %q: %v %v", from, canon, back, ok)
			}
		}
		if ok && from == to {
			if got.Cmp(one) != 0 {
				t.Fatalf("Convert(%q, itself) = %v", from, got)
			}
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("slow: %v for %q, %q", d, from, to)
		}
	})
}
