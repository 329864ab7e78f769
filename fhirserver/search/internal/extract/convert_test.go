package extract

import (
	"math/big"
	"testing"
)

func TestParseReference(t *testing.T) {
	tests := []struct{ ref, typ, id, ver, url string }{
		{"Patient/1", "Patient", "1", "", ""},
		{"Patient/1/_history/2", "Patient", "1", "2", ""},
		{"http://x/fhir/Patient/1", "Patient", "1", "", "http://x/fhir/Patient/1"},
		{"http://x/fhir/Patient/1/_history/2", "Patient", "1", "2", "http://x/fhir/Patient/1"},
		{"urn:uuid:abc", "", "", "", "urn:uuid:abc"},
		{"urn:oid:1.2.3", "", "", "", "urn:oid:1.2.3"},
		{"Foo/1", "", "", "", ""},
		{"Patient/", "", "", "", ""},
		{"Patient/a b", "", "", "", ""},
		{"1", "", "", "", ""},
		{"", "", "", "", ""},
	}
	for _, tt := range tests {
		typ, id, ver, url := parseReference(tt.ref)
		if typ != tt.typ || id != tt.id || ver != tt.ver || url != tt.url {
			t.Errorf("parseReference(%q) = %q %q %q %q", tt.ref, typ, id, ver, url)
		}
	}
}

func TestPrecisionRange(t *testing.T) {
	// The search page: a decimal denotes the range of its implicit
	// precision, half a unit of the last digit either side.
	tests := []struct{ lit, low, high string }{
		{"5.4", "5.35", "5.45"},
		{"100", "99.5", "100.5"},
		{"100.00", "99.995", "100.005"},
		{"0.25", "0.245", "0.255"},
		{"-1.5", "-1.55", "-1.45"},
		{"1e2", "50", "150"},
		{"1.5e-1", "0.145", "0.155"},
		{"72.4", "72.35", "72.45"},
	}
	for _, tt := range tests {
		v, lo, hi, ok := precisionRange(tt.lit)
		if !ok || !ratIs(v, tt.lit) || !ratIs(lo, tt.low) || !ratIs(hi, tt.high) {
			t.Errorf("precisionRange(%s) = %v [%v, %v), want [%s, %s)", tt.lit, v, lo, hi, tt.low, tt.high)
		}
	}
}

// ratIs reports whether r is the decimal s.
func ratIs(r *big.Rat, s string) bool {
	want, ok := new(big.Rat).SetString(s)
	return ok && r != nil && r.Cmp(want) == 0
}
