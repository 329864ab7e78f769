package value

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// The conversion functions: each To… converts a System value (toX()); ok
// is false when it does not convert (and convertsToX() is false).

// ToBoolean is toBoolean().
func ToBoolean(v Value) (Value, bool) {
	switch v.k {
	case kBool:
		return v, true
	case kInt:
		if v.n == 0 || v.n == 1 {
			return Bool(v.n == 1), true
		}
	case kDec:
		if v.r.Cmp(big.NewRat(1, 1)) == 0 {
			return Bool(true), true
		}
		if v.r.Sign() == 0 {
			return Bool(false), true
		}
	case kStr:
		switch strings.ToLower(v.s) {
		case "true", "t", "yes", "y", "1", "1.0":
			return Bool(true), true
		case "false", "f", "no", "n", "0", "0.0":
			return Bool(false), true
		}
	}
	return Value{}, false
}

var intRe = regexp.MustCompile(`^[+-]?[0-9]+$`)

var decRe = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?$`)

// ToInteger is toInteger(): Integers are 32-bit.
func ToInteger(v Value) (Value, bool) {
	switch v.k {
	case kInt:
		return v, true
	case kBool:
		return Int(v.n), true
	case kStr:
		if intRe.MatchString(v.s) {
			n, err := strconv.ParseInt(v.s, 10, 64)
			if err == nil && n <= maxInt && n >= minInt {
				return Int(n), true
			}
		}
	}
	return Value{}, false
}

// ToDecimal is toDecimal().
func ToDecimal(v Value) (Value, bool) {
	switch v.k {
	case kDec:
		return v, true
	case kInt:
		return decValue(new(big.Rat).SetInt64(v.n), 0), true
	case kBool:
		return decValue(new(big.Rat).SetInt64(v.n), 1), true
	case kStr:
		if decRe.MatchString(v.s) {
			r, scale, ok := readDecimal(v.s)
			if ok {
				// A Decimal has at most 28 integer digits (larger is not
				// convertible) and 28 fractional digits (rounded).
				d, ok, err := boundDecimal(r, scale)
				return d, ok && err == nil
			}
		}
	}
	return Value{}, false
}

// ToString is toString() of a System value.
func ToString(v Value) (Value, bool) {
	if v.k == kNode {
		return Value{}, false
	}
	s, ok := toStringValue(v)
	if !ok {
		return Value{}, false
	}
	return String(s), true
}

// ToDate is toDate().
func ToDate(v Value) (Value, bool) {
	switch v.k {
	case kDate:
		return v, true
	case kDateTime:
		return Date(v.d.AsDate()), true
	case kStr:
		if d, err := datetime.Parse(v.s, datetime.Date); err == nil {
			return Date(d), true
		}
	}
	return Value{}, false
}

// ToDateTime is toDateTime().
func ToDateTime(v Value) (Value, bool) {
	switch v.k {
	case kDateTime:
		return v, true
	case kDate:
		return Date(v.d.AsDateTime()), true
	case kStr:
		if d, err := datetime.Parse(v.s, datetime.DateTime); err == nil {
			return Date(d), true
		}
	}
	return Value{}, false
}

// ToTime is toTime().
func ToTime(v Value) (Value, bool) {
	switch v.k {
	case kTime:
		return v, true
	case kStr:
		if d, err := datetime.Parse(strings.TrimPrefix(v.s, "T"), datetime.Time); err == nil {
			return Date(d), true
		}
	}
	return Value{}, false
}

var qtyRe = regexp.MustCompile(`^([+-]?[0-9]+(?:\.[0-9]+)?)\s*(?:'([^']+)'|([a-zA-Z]+))?$`)

// ToQuantity is toQuantity() of a System value, before the unit
// conversion and bound of QuantityIn.
func ToQuantity(v Value) (Value, bool) {
	switch v.k {
	case kQty:
		return v, true
	case kInt, kDec:
		return Quantity(v, "1"), true
	case kBool:
		return Quantity(Int(v.n), "1"), true
	case kStr:
		m := qtyRe.FindStringSubmatch(strings.TrimSpace(v.s))
		if m == nil {
			return Value{}, false
		}
		num, err := ParseNumber(strings.TrimPrefix(m[1], "+"))
		if err != nil {
			return Value{}, false
		}
		if strings.HasPrefix(m[1], "-") {
			if num.k == kInt {
				num, _ = ParseNumber(m[1])
			}
		}
		unit := "1"
		switch {
		case m[2] != "":
			unit = m[2]
		case m[3] != "":
			cu, ok := units.Calendar(m[3])
			if !ok {
				return Value{}, false
			}
			unit = cu
		}
		return Quantity(num, unit), true
	}
	return Value{}, false
}

// QuantityIn completes toQuantity(unit) of q (from ToQuantity): with
// inUnit, q is converted to unit (ok=false when it cannot be). The value
// is bounded as a Decimal, after any unit conversion (km to nm
// multiplies by 10^12).
func QuantityIn(q Value, unit string, inUnit bool) (Value, bool, error) {
	if inUnit && unit != q.s {
		un, _ := units.Normalize(unit)
		qn, _ := units.Normalize(q.s)
		r, ok := units.Convert(q.r, qn, un)
		if !ok {
			return Value{}, false, nil
		}
		q = Value{k: kQty, r: r, n: q.n, s: unit}
	}
	return boundQuantity(q)
}
