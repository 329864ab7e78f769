package value

import (
	"encoding/json"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
)

func number(t *testing.T, s string) Value {
	t.Helper()
	v, err := ParseNumber(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A FHIR primitive converts to its System value; equality, equivalence
// and order follow the System types.
func TestSystemValues(t *testing.T) {
	dec := Node(json.Number("1.50"), nil, model.Lookup("decimal"))
	if s := ToSystem(dec); s.TypeName() != "System.Decimal" || s.String() != "1.50" {
		t.Errorf("decimal node → %s %s", s.TypeName(), s)
	}
	if eq, ok := Equal(dec, number(t, "1.5")); !eq || !ok {
		t.Error("1.50 = 1.5 is not true")
	}
	if !Equivalent(String("Abc  d"), String("abc d")) {
		t.Error("strings are not equivalent modulo case and spaces")
	}
	if c, ok, err := Compare(Int(1), number(t, "1.1")); c >= 0 || !ok || err != nil {
		t.Errorf("1 < 1.1: %d %v %v", c, ok, err)
	}
	if _, _, err := Compare(String("a"), Int(1)); err == nil {
		t.Error("a String and an Integer compared")
	}
	if v, ok, err := Arith("/", Int(7), Int(2)); !ok || err != nil || v.String() != "3.5" {
		t.Errorf("7 / 2 = %s %v %v", v, ok, err)
	}
	if _, ok, _ := Arith("+", Int(2147483647), Int(1)); ok {
		t.Error("Integer overflow is not empty")
	}
	q := Quantity(Int(1), "g")
	if eq, ok := Equal(q, Quantity(Int(1000), "mg")); !eq || !ok {
		t.Error("1 'g' = 1000 'mg' is not true")
	}
	if !Is(Int(1), TypeSpec{NS: "System", Name: "Integer"}) || Is(Int(1), TypeSpec{Name: "String"}) {
		t.Error("type tests of System values")
	}
}

type noCheck struct{}

func (noCheck) Check() error { return nil }

// The set functions keep FHIRPath equality: 1 and 1.0 are one item.
func TestSets(t *testing.T) {
	u, err := Union(noCheck{}, Collection{Int(1), number(t, "1.0")}, Collection{Int(2)})
	if err != nil || len(u) != 2 {
		t.Errorf("union = %v %v", u, err)
	}
	x, err := Exclude(noCheck{}, Collection{Int(1), Int(2), Int(1)}, Collection{number(t, "2.0")})
	if err != nil || len(x) != 2 {
		t.Errorf("exclude = %v %v", x, err)
	}
	if sub, err := Subset(noCheck{}, Collection{Int(1)}, Collection{Int(2), number(t, "1.0")}); !sub || err != nil {
		t.Errorf("subset = %v %v", sub, err)
	}
}
