package ucum

import (
	"errors"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Parsing of UCUM unit expressions (UCUM §2.1 grammar):
//
//	mainTerm   ::= "/" term | term
//	term       ::= term "." component | term "/" component | component
//	component  ::= annotatable annotation | annotatable | annotation
//	             | factor | "(" term ")"
//	annotatable::= simpleUnit exponent | simpleUnit
//	simpleUnit ::= ATOM | PREFIX ATOM(metric)
//	exponent   ::= ["+"|"-"] DIGITS
//	factor     ::= DIGITS
//
// Special (non-ratio) units are only accepted as the whole expression; that
// check lives in lookupUnit (convert.go), so here they are an error.

// Limits that keep parsing of hostile input cheap.
const (
	maxExprLen  = 512   // bytes in an expression
	maxDepth    = 32    // parenthesis nesting
	maxExponent = 1000  // |exponent| of one simple unit
	maxMagBits  = 16384 // bit length of a magnitude's numerator or denominator
)

var (
	errSyntax      = errors.New("ucum: malformed unit expression")
	errUnknownAtom = errors.New("ucum: unknown unit atom")
	errSpecial     = errors.New("ucum: special unit used in a compound expression")
	errRange       = errors.New("ucum: magnitude out of range")
	errTooLong     = errors.New("ucum: expression too long")
)

// dimExp is one base dimension with its exponent.
type dimExp struct {
	name string
	exp  int
}

// uval is a parsed ratio unit: mag × Π base^exp. Values are immutable
// once built; mag must never be modified after construction.
type uval struct {
	mag  *big.Rat
	dims []dimExp // sorted by name, no zero exponents
}

var ratOne = big.NewRat(1, 1)

func unity() uval { return uval{mag: ratOne} }

func magTooBig(r *big.Rat) bool {
	return r.Num().BitLen() > maxMagBits || r.Denom().BitLen() > maxMagBits
}

// mul returns a × b^sign, sign being +1 or -1.
func mul(a, b uval, sign int) (uval, error) {
	m := new(big.Rat)
	if sign < 0 {
		m.Quo(a.mag, b.mag)
	} else {
		m.Mul(a.mag, b.mag)
	}
	if magTooBig(m) {
		return uval{}, errRange
	}
	dims := mergeDims(a.dims, b.dims, sign)
	if !dimsInRange(dims) {
		return uval{}, errRange
	}
	return uval{mag: m, dims: dims}, nil
}

// dimsInRange keeps every base exponent within ±maxExponent so that the
// canonical unit string is itself a parseable expression.
func dimsInRange(dims []dimExp) bool {
	for _, d := range dims {
		if d.exp > maxExponent || d.exp < -maxExponent {
			return false
		}
	}
	return true
}

func mergeDims(a, b []dimExp, sign int) []dimExp {
	if len(b) == 0 {
		return a
	}
	out := make([]dimExp, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].name < b[j].name):
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j].name < a[i].name:
			out = append(out, dimExp{b[j].name, sign * b[j].exp})
			j++
		default:
			if e := a[i].exp + sign*b[j].exp; e != 0 {
				out = append(out, dimExp{a[i].name, e})
			}
			i++
			j++
		}
	}
	return out
}

// pow returns v^e.
func pow(v uval, e int) (uval, error) {
	if e == 1 {
		return v, nil
	}
	if e == 0 {
		return unity(), nil
	}
	ae := e
	if ae < 0 {
		ae = -ae
	}
	nb, db := v.mag.Num().BitLen(), v.mag.Denom().BitLen()
	if (nb-1)*ae > maxMagBits || (db-1)*ae > maxMagBits {
		return uval{}, errRange
	}
	x := big.NewInt(int64(ae))
	num := new(big.Int).Exp(v.mag.Num(), x, nil)
	den := new(big.Int).Exp(v.mag.Denom(), x, nil)
	if e < 0 {
		num, den = den, num
	}
	m := new(big.Rat).SetFrac(num, den)
	if magTooBig(m) {
		return uval{}, errRange
	}
	dims := make([]dimExp, len(v.dims))
	for i, d := range v.dims {
		dims[i] = dimExp{d.name, d.exp * e}
	}
	if !dimsInRange(dims) {
		return uval{}, errRange
	}
	return uval{mag: m, dims: dims}, nil
}

// canonString renders dims as a UCUM expression in base units, e.g.
// "g.m-1.s-2"; "1" for a dimensionless value.
func canonString(dims []dimExp) string {
	if len(dims) == 0 {
		return "1"
	}
	var b strings.Builder
	for i, d := range dims {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(d.name)
		if d.exp != 1 {
			b.WriteString(strconv.Itoa(d.exp))
		}
	}
	return b.String()
}

func sortDims(d []dimExp) {
	sort.Slice(d, func(i, j int) bool { return d[i].name < d[j].name })
}

// atomLookup resolves an atom symbol (without prefix).
type atomLookup func(sym string) (*atom, error)

type parser struct {
	s      string
	pos    int
	depth  int
	lookup atomLookup
}

// parseExpr parses a full ratio-unit expression.
func parseExpr(s string, lookup atomLookup) (uval, error) {
	if s == "" {
		return uval{}, errSyntax
	}
	if len(s) > maxExprLen {
		return uval{}, errTooLong
	}
	p := &parser{s: s, lookup: lookup}
	var (
		v   uval
		err error
	)
	if s[0] == '/' {
		p.pos++
		v, err = p.component()
		if err == nil {
			v, err = mul(unity(), v, -1)
		}
		if err == nil {
			v, err = p.termRest(v)
		}
	} else {
		v, err = p.term()
	}
	if err != nil {
		return uval{}, err
	}
	if p.pos != len(p.s) {
		return uval{}, errSyntax
	}
	return v, nil
}

func (p *parser) term() (uval, error) {
	v, err := p.component()
	if err != nil {
		return uval{}, err
	}
	return p.termRest(v)
}

// termRest applies the remaining ". component" and "/ component" operators
// left to right.
func (p *parser) termRest(v uval) (uval, error) {
	for p.pos < len(p.s) {
		op := p.s[p.pos]
		if op != '.' && op != '/' {
			break
		}
		p.pos++
		c, err := p.component()
		if err != nil {
			return uval{}, err
		}
		sign := 1
		if op == '/' {
			sign = -1
		}
		if v, err = mul(v, c, sign); err != nil {
			return uval{}, err
		}
	}
	return v, nil
}

func (p *parser) component() (uval, error) {
	if p.pos >= len(p.s) {
		return uval{}, errSyntax
	}
	switch p.s[p.pos] {
	case '(':
		if p.depth >= maxDepth {
			return uval{}, errSyntax
		}
		p.depth++
		p.pos++
		v, err := p.term()
		if err != nil {
			return uval{}, err
		}
		if p.pos >= len(p.s) || p.s[p.pos] != ')' {
			return uval{}, errSyntax
		}
		p.pos++
		p.depth--
		return v, nil
	case '{':
		if err := p.annotation(); err != nil {
			return uval{}, err
		}
		return unity(), nil
	}
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '.' || c == '/' || c == '(' || c == ')' || c == '{' {
			break
		}
		if c <= ' ' || c > '~' || c == '}' {
			return uval{}, errSyntax
		}
		if c == '[' {
			end := strings.IndexByte(p.s[p.pos+1:], ']')
			if end < 0 {
				return uval{}, errSyntax
			}
			for _, b := range []byte(p.s[p.pos+1 : p.pos+1+end]) {
				if b <= ' ' || b > '~' || b == '[' {
					return uval{}, errSyntax
				}
			}
			p.pos += end + 2
			continue
		}
		p.pos++
	}
	tok := p.s[start:p.pos]
	if tok == "" {
		return uval{}, errSyntax
	}
	v, err := p.simple(tok)
	if err != nil {
		return uval{}, err
	}
	if p.pos < len(p.s) && p.s[p.pos] == '{' {
		if err := p.annotation(); err != nil {
			return uval{}, err
		}
	}
	return v, nil
}

// annotation consumes "{...}"; annotations carry no meaning for conversion.
func (p *parser) annotation() error {
	end := strings.IndexByte(p.s[p.pos+1:], '}')
	if end < 0 {
		return errSyntax
	}
	for _, b := range []byte(p.s[p.pos+1 : p.pos+1+end]) {
		if b < ' ' || b > '~' || b == '{' {
			return errSyntax
		}
	}
	p.pos += end + 2
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// simple evaluates a factor or a simple unit with optional exponent.
func (p *parser) simple(tok string) (uval, error) {
	if allDigits(tok) {
		f, ok := new(big.Int).SetString(tok, 10)
		if !ok || f.Sign() == 0 {
			return uval{}, errSyntax
		}
		m := new(big.Rat).SetInt(f)
		if magTooBig(m) {
			return uval{}, errRange
		}
		return uval{mag: m}, nil
	}
	sym, exp := tok, 1
	i := len(tok)
	for i > 0 && tok[i-1] >= '0' && tok[i-1] <= '9' {
		i--
	}
	if i < len(tok) {
		digits := tok[i:]
		j := i
		if j > 0 && (tok[j-1] == '+' || tok[j-1] == '-') {
			j--
		}
		if j == 0 || len(digits) > 4 {
			return uval{}, errSyntax
		}
		e, err := strconv.Atoi(digits)
		if err != nil || e > maxExponent {
			return uval{}, errSyntax
		}
		if tok[j] == '-' {
			e = -e
		}
		sym, exp = tok[:j], e
	}
	v, err := p.simpleUnit(sym)
	if err != nil {
		return uval{}, err
	}
	return pow(v, exp)
}

// simpleUnit resolves an atom, possibly preceded by a metric prefix.
func (p *parser) simpleUnit(sym string) (uval, error) {
	if a, err := p.lookup(sym); err == nil {
		return a.ratio()
	} else if err != errUnknownAtom {
		return uval{}, err
	}
	for i := range prefixDefs {
		pd := &prefixDefs[i]
		if len(sym) <= len(pd.sym) || !strings.HasPrefix(sym, pd.sym) {
			continue
		}
		a, err := p.lookup(sym[len(pd.sym):])
		if err == errUnknownAtom {
			continue
		}
		if err != nil {
			return uval{}, err
		}
		if !a.metric {
			continue
		}
		v, err := a.ratio()
		if err != nil {
			return uval{}, err
		}
		return mul(uval{mag: prefixVals[i]}, v, 1)
	}
	return uval{}, errUnknownAtom
}
