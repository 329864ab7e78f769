// Package decimal holds the one decimal number type shared by FHIRPath,
// search and patch: a number read from its text (a JSON number, a FHIRPath
// literal, a search value) that keeps the precision it was written with.
//
// FHIR decimals are exact and their precision is part of their meaning:
// FHIRPath keeps 1.50 as 1.50, search reads "5.4" as [5.35, 5.45), and
// patch compares 1.50 and 15e-1 as equal. Reading the text never expands
// its exponent, so 1e999999999 costs nothing until a caller asks for the
// exact value.
package decimal

import (
	"math/big"
	"strings"
)

// Decimal is a parsed decimal number. The zero Decimal is not valid; get
// one from Parse.
type Decimal struct {
	text  string // as written, without a leading '+'
	neg   bool
	int   string // digits before the point
	frac  string // digits after the point
	exp   string // the exponent's text after 'e' ("" without one)
	valid bool
}

// Parse reads decimal text: an optional sign, digits with an optional
// point (at least one digit in all), and an optional exponent. It accepts
// what JSON, FHIRPath and FHIR search write, and nothing else (no
// fractions, hexadecimal, infinities).
func Parse(s string) (Decimal, bool) {
	d := Decimal{text: s}
	if strings.HasPrefix(s, "+") {
		s = s[1:]
		d.text = s
	} else if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, d.exp = s[:i], s[i+1:]
		e := strings.TrimLeft(d.exp, "+-")
		if len(e) == 0 || len(d.exp)-len(e) > 1 || !allDigits(e) {
			return Decimal{}, false
		}
	}
	d.int, d.frac, _ = strings.Cut(mant, ".")
	if len(d.int)+len(d.frac) == 0 || !allDigits(d.int) || !allDigits(d.frac) {
		return Decimal{}, false
	}
	d.valid = true
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String returns the text as written (without a leading '+').
func (d Decimal) String() string { return d.text }

// Scale is the number of digits written after the point: FHIRPath's
// precision of a Decimal (1.50 has scale 2).
func (d Decimal) Scale() int { return len(d.frac) }

// Rat returns the exact value. It expands the exponent: callers that take
// untrusted text bound the exponent first.
func (d Decimal) Rat() (*big.Rat, bool) {
	if !d.valid {
		return nil, false
	}
	return new(big.Rat).SetString(d.text)
}

// maxRangeExp bounds the exponent for which Range computes a precision
// range; beyond it the value is treated as exact.
const maxRangeExp = 1000

// Range returns the value and the range its implicit precision denotes:
// half a unit of the last stated digit either side, [v-h, v+h). The FHIR
// search page: "5.4" means [5.35, 5.45), "100" means [99.5, 100.5), "1e2"
// means [50, 150). An absurd exponent gives an exact range.
func (d Decimal) Range() (val, low, high *big.Rat, ok bool) {
	val, ok = d.Rat()
	if !ok {
		return nil, nil, nil, false
	}
	exp := 0
	if d.exp != "" {
		e, ok := new(big.Int).SetString(strings.TrimPrefix(d.exp, "+"), 10)
		if !ok || !e.IsInt64() || e.Int64() > maxRangeExp || e.Int64() < -maxRangeExp {
			return val, val, val, true
		}
		exp = int(e.Int64())
	}
	half := halfUnit(exp - len(d.frac)) // the last digit is worth 10^(exp-frac)
	low = new(big.Rat).Sub(val, half)
	high = new(big.Rat).Add(val, half)
	return val, low, high, true
}

// halves caches 5·10^(place-1) for common places: building it is most of
// the cost of a precision range.
var halves = func() [41]*big.Rat {
	var t [41]*big.Rat
	for i := range t {
		t[i] = computeHalf(i - 20)
	}
	return t
}()

// halfUnit returns half of 10^place; the result must not be modified.
func halfUnit(place int) *big.Rat {
	if place >= -20 && place <= 20 {
		return halves[place+20]
	}
	return computeHalf(place)
}

func computeHalf(place int) *big.Rat {
	half := new(big.Rat).SetInt64(5)
	p := place - 1
	if p < 0 {
		p = -p
	}
	ten := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
	if place-1 >= 0 {
		return half.Mul(half, new(big.Rat).SetInt(ten))
	}
	return half.Quo(half, new(big.Rat).SetInt(ten))
}

// Equal reports whether a and b have the same value, whatever their
// precision (1.50 == 1.5 == 15e-1). It never expands an exponent.
func Equal(a, b Decimal) bool {
	if !a.valid || !b.valid {
		return false
	}
	if a.text == b.text {
		return true
	}
	x, y := a.canonical(), b.canonical()
	return x.neg == y.neg && x.digits == y.digits && x.exp.Cmp(y.exp) == 0
}

// canon is a value as ±digits × 10^exp with no leading or trailing zeros
// in digits (empty digits is zero, never negative).
type canon struct {
	neg    bool
	digits string
	exp    *big.Int
}

func (d Decimal) canonical() canon {
	c := canon{neg: d.neg, exp: new(big.Int)}
	if d.exp != "" {
		c.exp.SetString(strings.TrimPrefix(d.exp, "+"), 10)
	}
	digits := strings.TrimLeft(d.int+d.frac, "0")
	c.exp.Sub(c.exp, big.NewInt(int64(len(d.frac))))
	trimmed := strings.TrimRight(digits, "0")
	c.exp.Add(c.exp, big.NewInt(int64(len(digits)-len(trimmed))))
	c.digits = trimmed
	if c.digits == "" {
		c.neg = false
		c.exp.SetInt64(0)
	}
	return c
}
