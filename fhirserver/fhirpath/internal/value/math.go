package value

import (
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// NumberInput returns the single numeric input (Integer, Decimal or Quantity).
func NumberInput(in Collection, fn string) (Value, bool, error) {
	v, ok, err := Singleton(in, fn+"()")
	if !ok || err != nil {
		return Value{}, false, err
	}
	v = ToSystem(v)
	switch v.k {
	case kInt, kDec, kQty:
		return v, true, nil
	}
	return Value{}, false, fmt.Errorf("fhirpath: %s() expects a number, got %s", fn, v.TypeName())
}

func floatOf(v Value) float64 {
	if v.k == kInt {
		return float64(v.n)
	}
	f, _ := v.r.Float64()
	return f
}

// fromFloat makes a Decimal from a float result; NaN and Inf are empty,
// and the result is bounded as every Decimal (boundDecimal).
func fromFloat(f float64) (Collection, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, nil
	}
	r, scale, _ := readDecimal(strconv.FormatFloat(f, 'f', -1, 64))
	return decResult(r, scale)
}

// decResult bounds a Decimal result; out of range is empty.
func decResult(r *big.Rat, scale int) (Collection, error) {
	d, ok, err := boundDecimal(r, scale)
	if err != nil || !ok {
		return nil, err
	}
	return Collection{d}, nil
}

func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m
	return q // Euclidean division with positive denominator is floor
}

func intResult(b *big.Int) (Collection, error) {
	if !b.IsInt64() || b.Int64() > maxInt || b.Int64() < minInt {
		return nil, nil
	}
	return Collection{Int(b.Int64())}, nil
}

// The math functions of one number (Integer, Decimal or Quantity, as
// NumberInput gives it).

// Abs is abs(): a Quantity keeps its unit.
func Abs(v Value) (Collection, error) {
	switch v.k {
	case kInt:
		if v.n < 0 {
			return Collection{Int(-v.n)}, nil
		}
		return Collection{v}, nil
	case kDec:
		return Collection{decValue(new(big.Rat).Abs(v.r), int(v.n))}, nil
	}
	w := v
	w.r = new(big.Rat).Abs(v.r)
	return Collection{w}, nil
}

// Ceiling is ceiling().
func Ceiling(v Value) (Collection, error) {
	if v.k == kInt {
		return Collection{v}, nil
	}
	neg := new(big.Rat).Neg(v.r)
	return intResult(new(big.Int).Neg(floorRat(neg)))
}

// Floor is floor().
func Floor(v Value) (Collection, error) {
	if v.k == kInt {
		return Collection{v}, nil
	}
	return intResult(floorRat(v.r))
}

// Truncate is truncate().
func Truncate(v Value) (Collection, error) {
	if v.k == kInt {
		return Collection{v}, nil
	}
	return intResult(new(big.Int).Quo(v.r.Num(), v.r.Denom()))
}

// Exp, Ln and Sqrt are exp(), ln() and sqrt().
func Exp(v Value) (Collection, error)  { return fromFloat(math.Exp(floatOf(v))) }
func Ln(v Value) (Collection, error)   { return fromFloat(math.Log(floatOf(v))) }
func Sqrt(v Value) (Collection, error) { return fromFloat(math.Sqrt(floatOf(v))) }

// Log is v.log(base).
func Log(v, base Value) (Collection, error) {
	return fromFloat(math.Log(floatOf(v)) / math.Log(floatOf(base)))
}

// Power is v.power(e): an Integer for Integer operands and a
// non-negative exponent.
func Power(v, e Value) (Collection, error) {
	if f := math.Pow(floatOf(v), floatOf(e)); math.IsInf(f, 0) || math.Abs(f) > 1e300 {
		return nil, nil // far outside any representable result
	}
	if v.k == kInt && e.k == kInt && e.n >= 0 {
		r := new(big.Int).Exp(big.NewInt(v.n), big.NewInt(e.n), nil)
		return intResult(r)
	}
	return fromFloat(math.Pow(floatOf(v), floatOf(e)))
}

// Round is v.round(precision) of an Integer or Decimal.
func Round(v Value, precision int64) (Collection, error) {
	x, _, ok := numeric(v)
	if !ok {
		return nil, fmt.Errorf("fhirpath: round() expects a number, got %s", v.TypeName())
	}
	return decResult(roundRat(x, int(precision)), int(precision))
}

// Precision is precision(): the digits after the point of a Decimal or
// Quantity (0 for an Integer), the digits of a date or time; ok=false
// for other values.
func Precision(v Value) (Value, bool) {
	v = ToSystem(v)
	switch v.k {
	case kDec, kQty:
		return Int(v.n), true
	case kInt:
		return Int(0), true
	case kDate, kDateTime, kTime:
		return Int(int64(v.d.Digits())), true
	}
	return Value{}, false
}

// Comparable is comparable(): whether two quantities have commensurable
// units; ok=false when either is not a Quantity.
func Comparable(v, w Value) (bool, bool) {
	v, w = ToSystem(v), ToSystem(w)
	if v.k != kQty || w.k != kQty {
		return false, false
	}
	ua, _ := units.Normalize(v.s)
	ub, _ := units.Normalize(w.s)
	_, conv := units.Convert(big.NewRat(1, 1), ub, ua)
	return conv, true
}

// Boundary is lowBoundary() (or, with high, highBoundary()) at a
// precision of p digits; p is -1 when none was given, and noArgument
// says the call had no argument (then a default precision applies).
// ok=false when the value has no boundary at that precision.
func Boundary(v Value, p int64, noArgument, high bool) (Value, bool) {
	v = ToSystem(v)
	switch v.k {
	case kInt, kDec, kQty:
		if p == -1 && noArgument {
			p = 8
		}
		if p < 0 || p > 31 {
			return Value{}, false
		}
		x, s, _ := numeric(v)
		if v.k == kQty {
			x, s = v.r, int(v.n)
		}
		var r *big.Rat
		if int(p) >= s {
			half := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Mul(big.NewInt(2), pow10(s)))
			if high {
				r = new(big.Rat).Add(x, half)
			} else {
				r = new(big.Rat).Sub(x, half)
			}
			r = floorAt(r, int(p), high)
		} else if new(big.Rat).Abs(x).Cmp(new(big.Rat).SetFrac(big.NewInt(1), pow10(int(p)))) < 0 {
			// All significant digits lie below the requested precision:
			// both boundaries are zero at that precision (as the
			// reference suite expects for 0.0034 at precision 1).
			r = new(big.Rat)
		} else {
			r = floorAt(x, int(p), high)
		}
		out := decValue(r, int(p))
		if v.k == kQty {
			out = Value{k: kQty, r: r, n: p, s: v.s}
		}
		return out, true
	case kDate, kDateTime, kTime:
		if p == -1 && noArgument {
			if v.k == kTime {
				p = 9
			} else {
				p = 17
				if v.k == kDate {
					p = 8
				}
			}
		}
		d, ok := v.d.Boundary(p, high)
		if !ok {
			return Value{}, false
		}
		return Date(d), true
	}
	return Value{}, false
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

// floorAt rounds x down (or up when ceil) to p decimal digits.
func floorAt(x *big.Rat, p int, ceil bool) *big.Rat {
	m := new(big.Rat).Mul(x, new(big.Rat).SetInt(pow10(p)))
	q := floorRat(m)
	if ceil && !m.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return new(big.Rat).SetFrac(q, pow10(p))
}
