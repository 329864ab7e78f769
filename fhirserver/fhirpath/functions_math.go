package fhirpath

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// numInput returns the single numeric input (Integer, Decimal or Quantity).
func numInput(in Collection, fn string) (Value, bool, error) {
	v, ok, err := singleton(in, fn+"()")
	if !ok || err != nil {
		return Value{}, false, err
	}
	v = toSystem(v)
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
	return Collection{intValue(b.Int64())}, nil
}

func mathFunc(f func(v Value) (Collection, error)) funcDef {
	return funcDef{0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		v, ok, err := numInput(in, "math")
		if err != nil || !ok {
			return nil, err
		}
		return f(v)
	}}
}

var mathFuncs = map[string]funcDef{
	"abs": mathFunc(func(v Value) (Collection, error) {
		switch v.k {
		case kInt:
			if v.n < 0 {
				return Collection{intValue(-v.n)}, nil
			}
			return Collection{v}, nil
		case kDec:
			return Collection{decValue(new(big.Rat).Abs(v.r), int(v.n))}, nil
		}
		w := v
		w.r = new(big.Rat).Abs(v.r)
		return Collection{w}, nil
	}),
	"ceiling": mathFunc(func(v Value) (Collection, error) {
		if v.k == kInt {
			return Collection{v}, nil
		}
		neg := new(big.Rat).Neg(v.r)
		return intResult(new(big.Int).Neg(floorRat(neg)))
	}),
	"floor": mathFunc(func(v Value) (Collection, error) {
		if v.k == kInt {
			return Collection{v}, nil
		}
		return intResult(floorRat(v.r))
	}),
	"truncate": mathFunc(func(v Value) (Collection, error) {
		if v.k == kInt {
			return Collection{v}, nil
		}
		return intResult(new(big.Int).Quo(v.r.Num(), v.r.Denom()))
	}),
	"exp":  mathFunc(func(v Value) (Collection, error) { return fromFloat(math.Exp(floatOf(v))) }),
	"ln":   mathFunc(func(v Value) (Collection, error) { return fromFloat(math.Log(floatOf(v))) }),
	"sqrt": mathFunc(func(v Value) (Collection, error) { return fromFloat(math.Sqrt(floatOf(v))) }),
	"log": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		v, ok, err := numInput(in, "log")
		if err != nil || !ok {
			return nil, err
		}
		c, err := ec.arg(args[0])
		if err != nil {
			return nil, err
		}
		b, ok, err := numInput(c, "log")
		if err != nil || !ok {
			return nil, err
		}
		return fromFloat(math.Log(floatOf(v)) / math.Log(floatOf(b)))
	}},
	"power": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		v, ok, err := numInput(in, "power")
		if err != nil || !ok {
			return nil, err
		}
		c, err := ec.arg(args[0])
		if err != nil {
			return nil, err
		}
		e, ok, err := numInput(c, "power")
		if err != nil || !ok {
			return nil, err
		}
		if f := math.Pow(floatOf(v), floatOf(e)); math.IsInf(f, 0) || math.Abs(f) > 1e300 {
			return nil, nil // far outside any representable result
		}
		if v.k == kInt && e.k == kInt && e.n >= 0 {
			r := new(big.Int).Exp(big.NewInt(v.n), big.NewInt(e.n), nil)
			return intResult(r)
		}
		return fromFloat(math.Pow(floatOf(v), floatOf(e)))
	}},
	"round": {0, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		v, ok, err := numInput(in, "round")
		if err != nil || !ok {
			return nil, err
		}
		prec := int64(0)
		if len(args) == 1 {
			p, ok, err := ec.argInt(args[0])
			if err != nil {
				return nil, err
			}
			if ok {
				if p < 0 {
					return nil, fmt.Errorf("fhirpath: round() precision must be >= 0")
				}
				if p > 100 {
					return nil, nil
				}
				prec = p
			}
		}
		x, _, ok := numeric(v)
		if !ok {
			return nil, fmt.Errorf("fhirpath: round() expects a number, got %s", v.TypeName())
		}
		return decResult(roundRat(x, int(prec)), int(prec))
	}},
}
