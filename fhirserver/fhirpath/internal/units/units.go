// Package units holds what FHIRPath quantities need of units: the calendar
// duration keywords (year, months, …) and their UCUM equivalents, and the
// conversion between commensurable units (package ucum, with a small
// built-in table as a fallback for the forms it does not read).
package units

import (
	"math/big"

	"github.com/kiln-fhir/kiln/fhirserver/internal/ucum"
)

// unitDef is one entry of the small built-in unit table used until (and
// besides) the ucum package: the dimension and the factor to its base.
type unitDef struct {
	dim    string
	factor *big.Rat
}

func rat(s string) *big.Rat {
	r, _ := new(big.Rat).SetString(s)
	return r
}

var unitTable = map[string]unitDef{
	"ms": {"s", rat("0.001")}, "s": {"s", rat("1")}, "min": {"s", rat("60")}, "h": {"s", rat("3600")},
	"d": {"s", rat("86400")}, "wk": {"s", rat("604800")}, "mo": {"s", rat("2629800")}, "a": {"s", rat("31557600")},
	"g": {"g", rat("1")}, "mg": {"g", rat("0.001")}, "ug": {"g", rat("0.000001")}, "ng": {"g", rat("0.000000001")},
	"kg": {"g", rat("1000")}, "[lb_av]": {"g", rat("453.59237")}, "[oz_av]": {"g", rat("28.349523125")},
	"m": {"m", rat("1")}, "cm": {"m", rat("0.01")}, "mm": {"m", rat("0.001")}, "km": {"m", rat("1000")},
	"um": {"m", rat("0.000001")}, "[in_i]": {"m", rat("0.0254")}, "[ft_i]": {"m", rat("0.3048")},
	"L": {"L", rat("1")}, "l": {"L", rat("1")}, "dL": {"L", rat("0.1")}, "mL": {"L", rat("0.001")}, "ml": {"L", rat("0.001")},
	"m2": {"m2", rat("1")}, "cm2": {"m2", rat("0.0001")}, "mm2": {"m2", rat("0.000001")},
	"1": {"1", rat("1")}, "%": {"1", rat("0.01")},
}

// calendarWords maps the calendar duration keywords of the grammar, singular
// and plural, to the calendar unit they name.
var calendarWords = map[string]string{
	"year": "year", "years": "year", "month": "month", "months": "month",
	"week": "week", "weeks": "week", "day": "day", "days": "day",
	"hour": "hour", "hours": "hour", "minute": "minute", "minutes": "minute",
	"second": "second", "seconds": "second", "millisecond": "millisecond", "milliseconds": "millisecond",
}

// Calendar returns the calendar unit a keyword such as "days" names.
func Calendar(word string) (string, bool) {
	u, ok := calendarWords[word]
	return u, ok
}

// IsCalendar reports whether u is a calendar unit (year, month, …,
// millisecond).
func IsCalendar(u string) bool {
	_, ok := calendarToUCUM[u]
	return ok
}

// FromUCUM maps a UCUM time unit to the calendar unit date arithmetic
// uses for it ('d' → day); other units are returned unchanged.
func FromUCUM(u string) string {
	if c, ok := ucumToCalendar[u]; ok {
		return c
	}
	return u
}

// calendarToUCUM maps calendar duration keywords to the UCUM unit they
// equal for comparison; year and month map to 'a' and 'mo', which are only
// equivalent (not equal) to the calendar units.
var calendarToUCUM = map[string]string{
	"year": "a", "month": "mo", "week": "wk", "day": "d", "hour": "h",
	"minute": "min", "second": "s", "millisecond": "ms",
}

// ucumToCalendar maps the UCUM time units usable in date arithmetic.
var ucumToCalendar = map[string]string{
	"a": "year", "mo": "month", "wk": "week", "d": "day", "h": "hour",
	"min": "minute", "s": "second", "ms": "millisecond",
}

// Normalize maps calendar units to UCUM; calendar reports whether the
// unit was year or month, which only equal 'a' and 'mo' approximately.
func Normalize(u string) (string, bool) {
	if c, ok := calendarToUCUM[u]; ok {
		return c, u == "year" || u == "month"
	}
	return u, false
}

// IsOffset reports whether u is a temperature scale with an offset
// zero, whose values are not differences.
func IsOffset(u string) bool {
	return u == "Cel" || u == "[degF]" || u == "[degRe]"
}

// Convert converts a value between commensurable units.
func Convert(v *big.Rat, from, to string) (*big.Rat, bool) {
	if from == to {
		return v, true
	}
	if r, ok := ucum.Convert(v, from, to); ok {
		return r, true
	}
	f, ok1 := unitTable[from]
	t, ok2 := unitTable[to]
	if !ok1 || !ok2 || f.dim != t.dim {
		return nil, false
	}
	r := new(big.Rat).Mul(v, f.factor)
	return r.Quo(r, t.factor), true
}

// Combine builds the unit of a product (or, with div, a quotient) of
// quantities in units a and b.
func Combine(a, b string, div bool) (string, bool) {
	switch {
	case b == "1":
		return a, true
	case a == "1" && !div:
		return b, true
	case div && a == b:
		return "1", true
	case !div && a == b:
		return a + "2", true
	case div:
		return a + "/" + b, true
	}
	return a + "." + b, true
}
