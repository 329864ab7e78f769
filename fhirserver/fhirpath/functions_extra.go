package fhirpath

import (
	"math/big"
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// Functions from the later FHIRPath drafts that the R4 test suite uses:
// sort, precision, lowBoundary, highBoundary, comparable.
var extraFuncs = map[string]funcDef{
	"sort": {0, 8, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		type key struct {
			vals []Value
		}
		keys := make([]key, len(in))
		for i, v := range in {
			if err := ec.check(); err != nil {
				return nil, err
			}
			if len(args) == 0 {
				keys[i].vals = []Value{v}
				continue
			}
			for _, a := range args {
				if neg, ok := a.(*negNode); ok {
					a = neg.operand
				}
				c, err := ec.withItem(a, v, i)
				if err != nil {
					return nil, err
				}
				if len(c) > 1 {
					return nil, errSingleton("sort() key")
				}
				var kv Value
				if len(c) == 1 {
					kv = c[0]
				}
				keys[i].vals = append(keys[i].vals, kv)
			}
		}
		idx := make([]int, len(in))
		for i := range idx {
			idx[i] = i
		}
		var sortErr error
		slices.SortStableFunc(idx, func(x, y int) int {
			for j := range keys[x].vals {
				a, b := keys[x].vals[j], keys[y].vals[j]
				desc := false
				if j < len(args) {
					_, desc = args[j].(*negNode)
				}
				var c int
				// Empty keys sort first in both directions.
				switch {
				case a.k == kNone && b.k == kNone:
					continue
				case a.k == kNone:
					return -1
				case b.k == kNone:
					return 1
				default:
					var err error
					c, _, err = compareValues(a, b)
					if err != nil {
						sortErr = err
					}
				}
				if desc {
					c = -c
				}
				if c != 0 {
					return c
				}
			}
			return 0
		})
		if sortErr != nil {
			return nil, sortErr
		}
		out := make(Collection, len(in))
		for i, j := range idx {
			out[i] = in[j]
		}
		return out, nil
	}},
	"precision": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		v, ok, err := singleton(in, "precision()")
		if err != nil || !ok {
			return nil, err
		}
		v = toSystem(v)
		switch v.k {
		case kDec, kQty:
			return one(intValue(v.n))
		case kInt:
			return one(intValue(0))
		case kDate, kDateTime, kTime:
			return one(intValue(int64(v.d.Digits())))
		}
		return nil, nil
	}},
	"lowBoundary":  {0, 1, boundary(false)},
	"highBoundary": {0, 1, boundary(true)},
	"comparable": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		v, ok, err := singleton(in, "comparable()")
		if err != nil || !ok {
			return nil, err
		}
		c, err := ec.arg(args[0])
		if err != nil {
			return nil, err
		}
		w, ok, err := singleton(c, "comparable()")
		if err != nil || !ok {
			return nil, err
		}
		v, w = toSystem(v), toSystem(w)
		if v.k != kQty || w.k != kQty {
			return nil, nil
		}
		ua, _ := units.Normalize(v.s)
		ub, _ := units.Normalize(w.s)
		_, conv := units.Convert(big.NewRat(1, 1), ub, ua)
		return boolColl(conv), nil
	}},
}

func boundary(high bool) funcImpl {
	return func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		v, ok, err := singleton(in, "boundary")
		if err != nil || !ok {
			return nil, err
		}
		v = toSystem(v)
		p := int64(-1)
		if len(args) == 1 {
			n, ok, err := ec.argInt(args[0])
			if err != nil {
				return nil, err
			}
			if ok {
				p = n
			}
		}
		switch v.k {
		case kInt, kDec, kQty:
			if p == -1 && len(args) == 0 {
				p = 8
			}
			if p < 0 || p > 31 {
				return nil, nil
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
			return one(out)
		case kDate, kDateTime, kTime:
			if p == -1 && len(args) == 0 {
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
				return nil, nil
			}
			return one(dateValue(d))
		}
		return nil, nil
	}
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
