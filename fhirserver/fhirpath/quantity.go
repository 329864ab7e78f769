package fhirpath

import (
	"math/big"
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

// normalizeUnit maps calendar keywords to UCUM; strict reports whether
// year/month keywords were involved.
func normalizeUnit(u string) (string, bool) {
	if c, ok := calendarToUCUM[u]; ok {
		return c, u == "year" || u == "month"
	}
	return u, false
}

// offsetUnit reports whether u is a temperature scale with an offset
// zero, whose values are not differences.
func offsetUnit(u string) bool {
	return u == "Cel" || u == "[degF]" || u == "[degRe]"
}

// convertUnit converts a value between commensurable units.
func convertUnit(v *big.Rat, from, to string) (*big.Rat, bool) {
	if from == to {
		return v, true
	}
	if r, ok := ucumConvert(v, from, to); ok {
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

// compareQuantity compares two quantities after unit conversion; ok=false
// when the units are not commensurable. For equality (strict), calendar
// years and months do not equal UCUM 'a' and 'mo'.
func compareQuantity(a, b Value, strict bool) (int, bool) {
	ua, ca := normalizeUnit(a.s)
	ub, cb := normalizeUnit(b.s)
	if strict && ca != cb && (ca || cb) {
		return 0, false
	}
	if ua == ub {
		return a.r.Cmp(b.r), true
	}
	bv, ok := convertUnit(b.r, ub, ua)
	if !ok {
		return 0, false
	}
	if !strict {
		s := int(max(a.n, b.n))
		return roundRat(a.r, s).Cmp(roundRat(bv, s)), true
	}
	return a.r.Cmp(bv), true
}

// multiplyUnits and divideUnits build the unit of a product or quotient;
// only the unitless and same-unit cases are supported without ucum.
func combineUnits(a, b string, div bool) (string, bool) {
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
