// Package ucum parses and converts UCUM unit expressions ("The Unified
// Code for Units of Measure", https://ucum.org/ucum) with exact rational
// arithmetic.
//
// Base dimensions are the UCUM base units m, g, s, rad, K, C, cd, plus mol
// (treated as a base unit rather than the dimensionless 6.0221367e23) and
// one dimension per arbitrary unit ([iU], [arb'U], ...), so arbitrary units
// are commensurable only with themselves. Special units Cel, [degF] and
// [degRe] convert with their offsets when used alone; other special units
// ([pH], B, Np, ...) are recognised by Valid but not converted.
package ucum

import (
	"math/big"

	lru "github.com/hashicorp/golang-lru/v2"
)

// parsedUnit is a parsed, cached unit expression. Immutable.
type parsedUnit struct {
	v     uval     // ratio unit (for special units: the base scale, K)
	canon string   // canonical unit string of v
	sp    int      // spNone for ratio units, else the special conversion
	pre   *big.Rat // metric prefix of a special unit, nil if none
	unsup bool     // recognised special unit without conversion support
}

const maxCache = 4096

// cache holds parsed unit expressions (a nil entry: invalid), least
// recently used out first: units come from data, so the set is bounded,
// and a new working set still gets cached once the cache is full.
var cache = func() *lru.Cache[string, *parsedUnit] {
	c, err := lru.New[string, *parsedUnit](maxCache)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}()

// lookupUnit parses unit expression s, caching the result.
func lookupUnit(s string) *parsedUnit {
	if u, ok := cache.Get(s); ok {
		return u
	}
	u := parseUnit(s)
	if len(s) <= maxExprLen {
		cache.Add(s, u)
	}
	return u
}

func parseUnit(s string) *parsedUnit {
	// A special unit is only valid as the whole expression, possibly with
	// a metric prefix.
	if a, pre := specialAtom(s); a != nil {
		if a.kind == kUnsupported {
			return &parsedUnit{unsup: true}
		}
		return &parsedUnit{v: a.v, canon: canonString(a.v.dims), sp: a.sp, pre: pre}
	}
	v, err := parseExpr(s, lookupAtom)
	if err != nil {
		return nil
	}
	return &parsedUnit{v: v, canon: canonString(v.dims)}
}

// specialAtom returns the special atom s consists of, with its prefix
// value (nil when unprefixed).
func specialAtom(s string) (*atom, *big.Rat) {
	isSpecial := func(a *atom) bool { return a.kind == kSpecial || a.kind == kUnsupported }
	if a, ok := atoms[s]; ok {
		if isSpecial(a) {
			return a, nil
		}
		return nil, nil
	}
	for i, p := range prefixDefs {
		if len(s) > len(p.sym) && s[:len(p.sym)] == p.sym {
			if a, ok := atoms[s[len(p.sym):]]; ok && a.metric && isSpecial(a) {
				return a, prefixVals[i]
			}
		}
	}
	return nil, nil
}

// Valid reports whether unit parses as a UCUM expression with known atoms.
func Valid(unit string) bool {
	return lookupUnit(unit) != nil
}

var (
	k27315 = big.NewRat(27315, 100)
	k45967 = big.NewRat(45967, 100)
	r5_9   = big.NewRat(5, 9)
	r5_4   = big.NewRat(5, 4)
)

// toBase converts x in unit u to u's canonical base unit. The result is a
// new value.
func (u *parsedUnit) toBase(x *big.Rat) *big.Rat {
	out := new(big.Rat)
	if u.sp == spNone {
		return out.Mul(x, u.v.mag)
	}
	out.Set(x)
	if u.pre != nil {
		out.Mul(out, u.pre)
	}
	switch u.sp {
	case spCel:
		out.Add(out, k27315)
	case spDegF:
		out.Add(out, k45967)
		out.Mul(out, r5_9)
	case spDegRe:
		out.Mul(out, r5_4)
		out.Add(out, k27315)
	}
	return out
}

// fromBase converts x (in canonical base units) to unit u. x may be
// modified and returned.
func (u *parsedUnit) fromBase(x *big.Rat) *big.Rat {
	switch u.sp {
	case spNone:
		return x.Quo(x, u.v.mag)
	case spCel:
		x.Sub(x, k27315)
	case spDegF:
		x.Quo(x, r5_9)
		x.Sub(x, k45967)
	case spDegRe:
		x.Sub(x, k27315)
		x.Quo(x, r5_4)
	}
	if u.pre != nil {
		x.Quo(x, u.pre)
	}
	return x
}

// Convert converts value from unit `from` to unit `to` (UCUM case-sensitive
// codes). ok=false when a unit is unknown or malformed, or the two are not
// commensurable. The argument is not modified.
func Convert(value *big.Rat, from, to string) (*big.Rat, bool) {
	if value == nil {
		return nil, false
	}
	f, t := lookupUnit(from), lookupUnit(to)
	if f == nil || t == nil {
		return nil, false
	}
	if f.unsup || t.unsup {
		if from == to {
			return new(big.Rat).Set(value), true
		}
		return nil, false
	}
	if f.canon != t.canon {
		return nil, false
	}
	if f.sp == spNone && t.sp == spNone {
		out := new(big.Rat).Mul(value, f.v.mag)
		return out.Quo(out, t.v.mag), true
	}
	return t.fromBase(f.toBase(value)), true
}

// Canonical converts value to the canonical form in base units (m, g, s,
// rad, K, C, cd, mol, and arbitrary units as their own base), e.g.
// 5 "mg" -> 1/200 "g"; 1 "km/h" -> 5/18 "m.s-1". The canonical unit string
// lists base units in ASCII order with integer exponents ("g.m-1.s-2"),
// "1" when dimensionless, so commensurable units give equal strings.
// ok=false when the unit is unknown, malformed or an unsupported special
// unit. The argument is not modified.
func Canonical(value *big.Rat, unit string) (*big.Rat, string, bool) {
	if value == nil {
		return nil, "", false
	}
	u := lookupUnit(unit)
	if u == nil || u.unsup {
		return nil, "", false
	}
	return u.toBase(value), u.canon, true
}
