package decimal

import (
	"math/big"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in    string
		ok    bool
		scale int
	}{
		{"1", true, 0}, {"1.50", true, 2}, {"-0.001", true, 3}, {"+2.5", true, 1},
		{"1.5e3", true, 1}, {"1E-2", true, 0}, {"5.", true, 0}, {".5", true, 1},
		// What big.Rat would also read, but is not decimal text.
		{"1/2", false, 0}, {"0x10", false, 0}, {"Inf", false, 0},
		{"", false, 0}, {"-", false, 0}, {".", false, 0}, {"1e", false, 0}, {"1e+-2", false, 0}, {"1.2.3", false, 0},
	}
	for _, tt := range tests {
		d, ok := Parse(tt.in)
		if ok != tt.ok || ok && d.Scale() != tt.scale {
			t.Errorf("Parse(%q) = scale %d, %v; want scale %d, %v", tt.in, d.Scale(), ok, tt.scale, tt.ok)
		}
	}
}

func TestRange(t *testing.T) {
	// The search page: a decimal denotes the range of its implicit
	// precision, half a unit of the last digit either side.
	tests := []struct{ lit, val, low, high string }{
		{"5.4", "5.4", "5.35", "5.45"},
		{"100", "100", "99.5", "100.5"},
		{"+100.00", "100", "99.995", "100.005"},
		{"-1.5", "-1.5", "-1.55", "-1.45"},
		{"1e2", "100", "50", "150"},
		{"1.5e-1", "0.15", "0.145", "0.155"},
		{"1e-30", "1e-30", "5e-31", "1.5e-30"},   // beyond the cached places
		{"1e1001", "1e1001", "1e1001", "1e1001"}, // absurd exponent: exact
	}
	for _, tt := range tests {
		d, ok := Parse(tt.lit)
		if !ok {
			t.Fatalf("Parse(%q) failed", tt.lit)
		}
		v, lo, hi, ok := d.Range()
		if !ok || v.Cmp(rat(tt.val)) != 0 || lo.Cmp(rat(tt.low)) != 0 || hi.Cmp(rat(tt.high)) != 0 {
			t.Errorf("%s.Range() = %v [%v, %v), want %s [%s, %s)", tt.lit, v, lo, hi, tt.val, tt.low, tt.high)
		}
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		eq   bool
	}{
		{"1.50", "1.5", true}, {"15e-1", "1.5", true}, {"0", "-0.0", true}, {"100", "1e2", true},
		{"1e999999999", "10e999999998", true}, // compared without expanding
		{"1e99999999999999999999", "10e99999999999999999998", true},
		{"1.5", "1.51", false}, {"-1", "1", false}, {"1e2", "1e3", false},
	}
	for _, tt := range tests {
		a, _ := Parse(tt.a)
		b, _ := Parse(tt.b)
		if got := Equal(a, b); got != tt.eq {
			t.Errorf("Equal(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
	if Equal(Decimal{}, Decimal{}) {
		t.Error("unparsed decimals compared equal")
	}
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}
