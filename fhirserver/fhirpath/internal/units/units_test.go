package units

import (
	"math/big"
	"testing"
)

func TestCalendarAndConversion(t *testing.T) {
	if u, ok := Calendar("days"); !ok || u != "day" || !IsCalendar(u) || FromUCUM("d") != "day" || FromUCUM("mg") != "mg" {
		t.Errorf("calendar days: %q %v", u, ok)
	}
	if _, ok := Calendar("fortnight"); ok {
		t.Error("fortnight is a calendar keyword")
	}
	if u, cal := Normalize("year"); u != "a" || !cal {
		t.Errorf("Normalize(year) = %q %v", u, cal)
	}
	if u, cal := Normalize("week"); u != "wk" || cal {
		t.Errorf("Normalize(week) = %q %v", u, cal)
	}
	for _, c := range []struct {
		v, from, to, want string
		ok                bool
	}{
		{"1", "g", "mg", "1000", true},
		{"120", "mL/h", "mL/min", "2", true},
		{"1", "g", "m", "", false},
	} {
		v, _ := new(big.Rat).SetString(c.v)
		got, ok := Convert(v, c.from, c.to)
		if ok != c.ok || ok && got.RatString() != c.want {
			t.Errorf("Convert(%s %s → %s) = %v %v", c.v, c.from, c.to, got, ok)
		}
	}
	if u, _ := Combine("mg", "mL", true); u != "mg/mL" {
		t.Errorf("Combine = %q", u)
	}
	if !IsOffset("Cel") || IsOffset("K") {
		t.Error("offset units")
	}
}
