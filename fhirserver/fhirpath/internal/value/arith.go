package value

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// Arith applies an arithmetic operator to two System values.
func Arith(op string, a, b Value) (Value, bool, error) {
	switch {
	case a.k == kInt && b.k == kInt:
		var n int64
		switch op {
		case "+":
			n = a.n + b.n
		case "-":
			n = a.n - b.n
		case "*":
			n = a.n * b.n
		case "/":
			if b.n == 0 {
				return Value{}, false, nil
			}
			r := big.NewRat(a.n, b.n)
			return decValue(r, divScale(r)), true, nil
		case "div":
			if b.n == 0 {
				return Value{}, false, nil
			}
			n = a.n / b.n
		case "mod":
			if b.n == 0 {
				return Value{}, false, nil
			}
			n = a.n % b.n
		}
		if n > maxInt || n < minInt {
			return Value{}, false, nil
		}
		return Int(n), true, nil
	case (a.k == kInt || a.k == kDec) && (b.k == kInt || b.k == kDec):
		x, sx, _ := numeric(a)
		y, sy, _ := numeric(b)
		r := new(big.Rat)
		scale := max(sx, sy)
		switch op {
		case "+":
			r.Add(x, y)
		case "-":
			r.Sub(x, y)
		case "*":
			r.Mul(x, y)
			scale = sx + sy
		case "/":
			if y.Sign() == 0 {
				return Value{}, false, nil
			}
			r.Quo(x, y)
			scale = divScale(r)
		case "div":
			if y.Sign() == 0 {
				return Value{}, false, nil
			}
			q := new(big.Int).Quo(new(big.Int).Mul(x.Num(), y.Denom()), new(big.Int).Mul(x.Denom(), y.Num()))
			if !q.IsInt64() || q.Int64() > maxInt || q.Int64() < minInt {
				return Value{}, false, nil // outside the Integer range
			}
			return Int(q.Int64()), true, nil
		case "mod":
			if y.Sign() == 0 {
				return Value{}, false, nil
			}
			q := new(big.Int).Quo(new(big.Int).Mul(x.Num(), y.Denom()), new(big.Int).Mul(x.Denom(), y.Num()))
			r.Sub(x, new(big.Rat).Mul(y, new(big.Rat).SetInt(q)))
		}
		return boundDecimal(r, scale)
	case a.k == kStr && b.k == kStr && op == "+":
		if len(a.s)+len(b.s) > MaxStringLen {
			return Value{}, false, ErrTooLarge
		}
		return String(a.s + b.s), true, nil
	case isDateKind(a.k) && b.k == kQty && (op == "+" || op == "-"):
		return dateArith(op, a, b)
	case a.k == kQty && b.k == kQty:
		return quantityArith(op, a, b)
	case a.k == kQty && (b.k == kInt || b.k == kDec) && (op == "*" || op == "/"):
		return quantityArith(op, a, Quantity(b, "1"))
	case (a.k == kInt || a.k == kDec) && b.k == kQty && op == "*":
		return quantityArith(op, Quantity(a, "1"), b)
	}
	if a.k == kNode || b.k == kNode {
		return Value{}, false, nil
	}
	return Value{}, false, fmt.Errorf("fhirpath: cannot apply %s to %s and %s", op, a.TypeName(), b.TypeName())
}

// MaxStringLen bounds strings built by an evaluation (concatenation,
// join, replace) so that doubling loops fail instead of exhausting memory.
const MaxStringLen = 1 << 22

// Decimals are bounded as the specification's Decimal type: at most 28
// significant integer digits (larger results are empty) and at most 28
// fractional digits (rounded), which also keeps exact arithmetic cheap.
var maxDecimal = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(28), nil))

func boundDecimal(r *big.Rat, scale int) (Value, bool, error) {
	if new(big.Rat).Abs(r).Cmp(maxDecimal) >= 0 {
		return Value{}, false, nil
	}
	if scale > 28 || r.Denom().BitLen() > 96 {
		r = roundRat(r, 28)
		scale = min(scale, 28)
	}
	return decValue(r, scale), true, nil
}

func boundQuantity(q Value) (Value, bool, error) {
	d, ok, err := boundDecimal(q.r, int(q.n))
	if !ok || err != nil {
		return Value{}, ok, err
	}
	q.r, q.n = d.r, d.n
	return q, true, nil
}

// divScale is the number of digits a quotient keeps: exact when it
// terminates within 8 digits, else 8.
func divScale(r *big.Rat) int {
	for s := 0; s <= 8; s++ {
		if exactAt(r, s) {
			return s
		}
	}
	return 8
}

func dateArith(op string, a, q Value) (Value, bool, error) {
	unit := q.s
	if unit == "a" || unit == "mo" {
		return Value{}, false, fmt.Errorf("fhirpath: cannot add %q (a definite UCUM duration) to a date; use a calendar duration", unit)
	}
	unit = units.FromUCUM(unit)
	if !units.IsCalendar(unit) {
		return Value{}, false, fmt.Errorf("fhirpath: cannot add a quantity in %q to a date", q.s)
	}
	// Fractions of the unit are dropped (7.7 days adds 7 days).
	n := new(big.Int).Quo(q.r.Num(), q.r.Denom())
	if !n.IsInt64() {
		return Value{}, false, nil
	}
	amt := n.Int64()
	if op == "-" {
		amt = -amt
	}
	d, ok := a.d.Add(amt, unit)
	if !ok {
		return Value{}, false, nil
	}
	return Value{k: a.k, d: d}, true, nil
}

func quantityArith(op string, a, b Value) (Value, bool, error) {
	ua, _ := units.Normalize(a.s)
	ub, _ := units.Normalize(b.s)
	switch op {
	case "+", "-":
		if (units.IsOffset(ua) || units.IsOffset(ub)) && ua != ub {
			// 1 'K' added to a Celsius value is a difference, not an
			// absolute temperature: mixed offset units have no sum.
			return Value{}, false, nil
		}
		bv, ok := units.Convert(b.r, ub, ua)
		if !ok {
			return Value{}, false, nil
		}
		r := new(big.Rat)
		if op == "+" {
			r.Add(a.r, bv)
		} else {
			r.Sub(a.r, bv)
		}
		return boundQuantity(Value{k: kQty, r: r, n: max(a.n, b.n), s: a.s})
	case "*", "/":
		bv, unitB := b.r, ub
		if ub != ua && ub != "1" && ua != "1" {
			if c, ok := units.Convert(b.r, ub, ua); ok {
				bv, unitB = c, ua
			}
		}
		r := new(big.Rat)
		if op == "*" {
			r.Mul(a.r, bv)
		} else {
			if bv.Sign() == 0 {
				return Value{}, false, nil
			}
			r.Quo(a.r, bv)
		}
		u, ok := units.Combine(ua, unitB, op == "/")
		if !ok {
			return Value{}, false, nil
		}
		return boundQuantity(Value{k: kQty, r: r, n: max(a.n, b.n), s: strings.TrimSpace(u)})
	}
	return Value{}, false, nil
}
