package search

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/internal/decimal"
	"github.com/kiln-fhir/kiln/fhirserver/internal/fhirtime"
	"github.com/kiln-fhir/kiln/fhirserver/internal/ucum"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// values splits a parameter value at its unescaped commas, dropping
// empty items.
func values(name, raw string) ([]string, error) {
	var out []string
	for _, v := range syntax.Split(raw, ',') {
		if v != "" {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, errf(name, "no value")
	}
	if len(out) > maxValues {
		return nil, errf(name, "too many values")
	}
	return out, nil
}

// modifiers lists the modifiers of each parameter type besides missing
// (reference parameters also take a target type name).
var modifiers = map[string][]string{
	"string":    {"exact", "contains"},
	"token":     {"not", "text", "of-type", "in", "not-in", "above", "below"},
	"reference": {"identifier"},
	"uri":       {"above", "below"},
}

func validModifier(p *Param, mod string) bool {
	if mod == "" || mod == "missing" {
		return true
	}
	for _, m := range modifiers[p.Type] {
		if m == mod {
			return true
		}
	}
	return p.Type == "reference" && isTargetType(p, mod)
}

// isTargetType reports whether t is a resource type p may refer to (any
// resource type when p declares no targets).
func isTargetType(p *Param, t string) bool {
	if !profiles.IsResourceType(t) {
		return false
	}
	if len(p.Targets) == 0 {
		return true
	}
	for _, x := range p.Targets {
		if x == t {
			return true
		}
	}
	return false
}

// valueMatches makes the matches of name=raw for parameter p.
func (ps *parser) valueMatches(p *Param, name, mod, raw string) ([]Match, error) {
	if !validModifier(p, mod) {
		return nil, errf(name, "modifier :"+mod+" is not valid for "+p.Type+" parameter "+p.Code)
	}
	vals, err := values(name, raw)
	if err != nil {
		return nil, err
	}
	if mod == "missing" {
		var out []Match
		for _, v := range vals {
			if v != "true" && v != "false" {
				return nil, errf(name, ":missing takes true or false, not "+syntax.Quote(v))
			}
			out = append(out, Match{Op: OpMissing, Param: p.Code, Missing: v == "true"})
		}
		return out, nil
	}
	switch p.Type {
	case "token":
		return ps.tokenMatches(p, name, mod, vals)
	case "reference":
		return ps.referenceMatches(p, name, mod, vals)
	}
	out := make([]Match, 0, len(vals))
	for _, v := range vals {
		var m Match
		var err error
		switch p.Type {
		case "string":
			m, err = stringMatch(p.Code, name, mod, v)
		case "uri":
			ms, err := uriMatches(p.Code, name, mod, syntax.Unescape(v))
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
			continue
		case "number":
			m, err = numberMatch(p.Code, name, v)
		case "date":
			m, err = ps.dateMatch(p.Code, name, v)
		case "quantity":
			m, err = quantityMatch(p.Code, name, v)
		case "composite":
			m, err = ps.compositeMatch(p, name, v)
		default:
			return nil, errf(name, "parameters of type "+p.Type+" are not supported")
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func stringMatch(code, name, mod, v string) (Match, error) {
	v = syntax.Unescape(v)
	switch mod {
	case "exact":
		return Match{Op: OpKey, Keys: []string{index.Key(code+":exact", v)}}, nil
	case "contains":
		return Match{Op: OpKeyContains, Prefix: code + index.KeySep, Contains: Normalize(v)}, nil
	}
	return Match{Op: OpKeyPrefix, Prefix: index.Key(code, Normalize(v))}, nil
}

// uriMatches are the matches of a uri value. :below and :above follow the
// path of a URL, segment by segment ("http://a.org/fhir" is below itself
// and above "http://a.org/fhir/x", not "http://a.org/fhirx"); a URN has no
// path to follow, so they refuse one.
func uriMatches(code, name, mod, v string) ([]Match, error) {
	if (mod == "below" || mod == "above") && !strings.Contains(v, "://") {
		return nil, errf(name, ":"+mod+" follows the path of a URL; "+syntax.Quote(v)+" is not a URL")
	}
	switch mod {
	case "below":
		if strings.HasSuffix(v, "/") {
			return []Match{{Op: OpKeyPrefix, Prefix: index.Key(code, v)}}, nil
		}
		return []Match{{Op: OpKey, Keys: []string{index.Key(code, v)}}, {Op: OpKeyPrefix, Prefix: index.Key(code, v+"/")}}, nil
	case "above":
		var keys []string
		for _, u := range uriAbove(v) {
			keys = append(keys, index.Key(code, u))
		}
		return []Match{{Op: OpKey, Keys: keys}}, nil
	}
	return []Match{{Op: OpKey, Keys: []string{index.Key(code, v)}}}, nil
}

// uriAbove lists v and every prefix of it that ends just before or at a
// '/' of its path: "http://a.org/x/y" gives http://a.org, http://a.org/,
// http://a.org/x, http://a.org/x/ and the value itself. Prefixes inside
// the scheme and authority are not URIs of anything.
func uriAbove(v string) []string {
	start := 0
	if i := strings.Index(v, "://"); i >= 0 {
		start = i + 3
		j := strings.IndexByte(v[start:], '/')
		if j < 0 {
			return []string{v}
		}
		start += j
	} else {
		return []string{v}
	}
	var out []string
	for i := start; i < len(v); i++ {
		if v[i] == '/' {
			out = append(out, v[:i], v[:i+1])
		}
	}
	if out[len(out)-1] != v {
		out = append(out, v)
	}
	return out
}

// prefixes are the search comparators.
var prefixes = map[string]Cmp{
	"eq": CmpEq, "ne": CmpNe, "gt": CmpGt, "lt": CmpLt, "ge": CmpGe,
	"le": CmpLe, "sa": CmpSa, "eb": CmpEb, "ap": CmpAp,
}

// splitPrefix takes the comparator off a number, date or quantity value.
func splitPrefix(name, v string) (Cmp, string, error) {
	if len(v) >= 2 && isLetter(v[0]) && isLetter(v[1]) {
		c, ok := prefixes[v[:2]]
		if !ok {
			return 0, "", errf(name, "unknown prefix "+syntax.Quote(v[:2]))
		}
		return c, v[2:], nil
	}
	return CmpEq, v, nil
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// ucumSystem is the code system of UCUM units.
const ucumSystem = "http://unitsofmeasure.org"

// number is a parsed query number: the value and its precision range.
type number struct{ val, low, high *big.Rat }

func parseNumber(name, lit string) (number, error) {
	// A '+' sign arrives as a space when the client did not encode it.
	lit = strings.TrimSpace(lit)
	if !syntax.IsDecimal(lit) {
		return number{}, errf(name, "not a number: "+syntax.Quote(lit))
	}
	d, ok := decimal.Parse(strings.TrimPrefix(lit, "+"))
	var val, low, high *big.Rat
	if ok {
		val, low, high, ok = d.Range() // as the index takes a stored value's
	}
	if !ok {
		return number{}, errf(name, "not a number: "+syntax.Quote(lit))
	}
	n := number{val, low, high}
	if !n.finite() {
		return number{}, errf(name, "number out of range: "+syntax.Quote(lit))
	}
	return n, nil
}

// finite: every bound is a finite float64, as the index stores them.
func (n number) finite() bool {
	for _, r := range []*big.Rat{n.val, n.low, n.high} {
		if f, _ := r.Float64(); math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// prefixedNumber parses [prefix]number.
func prefixedNumber(name, v string) (Cmp, number, error) {
	c, lit, err := splitPrefix(name, v)
	if err != nil {
		return 0, number{}, err
	}
	n, err := parseNumber(name, syntax.Unescape(lit))
	return c, n, err
}

// ratFloat is r as a float64, the form in which index rows hold numbers.
func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// numberRange fills the OpNumber fields of m from n and the comparator:
// eq, ne and ap use the precision range, the others the exact value; ap
// widens by 10% of the value.
func numberRange(m *Match, n number) {
	v := ratFloat(n.val)
	switch m.Cmp {
	case CmpEq, CmpNe, CmpAp:
		m.NumLow, m.NumHigh = ratFloat(n.low), ratFloat(n.high)
	default:
		m.NumLow, m.NumHigh = v, v
	}
	if m.Cmp == CmpAp {
		m.Approx = math.Abs(v) / 10
	}
}

func numberMatch(param, name, v string) (Match, error) {
	c, n, err := prefixedNumber(name, v)
	if err != nil {
		return Match{}, err
	}
	m := Match{Op: OpNumber, Param: param, Cmp: c}
	numberRange(&m, n)
	return m, nil
}

func (ps *parser) dateMatch(param, name, v string) (Match, error) {
	c, lit, err := splitPrefix(name, v)
	if err != nil {
		return Match{}, err
	}
	d, err := fhirtime.Parse(syntax.Unescape(lit))
	if err != nil {
		return Match{}, errf(name, "not a date: "+syntax.Quote(lit))
	}
	m := Match{Op: OpDate, Param: param, Cmp: c, Low: d.Low.UnixMicro(), High: d.High.UnixMicro()}
	if c == CmpAp {
		gap := ps.now.UnixMicro() - m.Low
		if gap < 0 {
			gap = -gap
		}
		m.Approx = float64(gap) / 10
	}
	return m, nil
}

// quantityMatch parses [prefix]number[|system|code]. Without a unit the
// row of any unit is searched; "||code" searches the code (or unit text)
// in any system; a UCUM unit that converts searches the canonical rows
// with the bounds converted.
func quantityMatch(param, name, v string) (Match, error) {
	parts := syntax.Split(v, '|')
	if len(parts) != 1 && len(parts) != 3 {
		return Match{}, errf(name, "a quantity is number, or number|system|code: "+syntax.Quote(v))
	}
	c, n, err := prefixedNumber(name, parts[0])
	if err != nil {
		return Match{}, err
	}
	m := Match{Op: OpNumber, Param: param, Cmp: c}
	if len(parts) == 3 {
		system, code := syntax.Unescape(parts[1]), syntax.Unescape(parts[2])
		switch {
		case code == "" && system == "":
		case code == "":
			return Match{}, errf(name, "a quantity system needs a code: "+syntax.Quote(v))
		case system == ucumSystem:
			if cn, unit, ok := canonicalNumber(n, code); ok {
				n = cn
				m.Param = param + index.KeySep + "ucum:" + unit
			} else {
				m.Param = param + index.KeySep + system + "|" + code
			}
		default:
			m.Param = param + index.KeySep + system + "|" + code
		}
	}
	numberRange(&m, n)
	return m, nil
}

// canonicalNumber converts n to canonical UCUM units, bound by bound.
func canonicalNumber(n number, code string) (number, string, bool) {
	val, unit, ok := ucum.Canonical(n.val, code)
	if !ok {
		return n, "", false
	}
	low, _, ok1 := ucum.Canonical(n.low, code)
	high, _, ok2 := ucum.Canonical(n.high, code)
	if !ok1 || !ok2 {
		return n, "", false
	}
	if low.Cmp(high) > 0 {
		low, high = high, low
	}
	cn := number{val, low, high}
	if !cn.finite() {
		return n, "", false
	}
	return cn, unit, true
}

// compositeMatch parses comp1$comp2…: equality on every component is a
// key lookup of the "$"-joined component keys; a last component that is a
// date, number or quantity is a range match on the rows stored under the
// composite's code and the other components' keys (compositeRows).
func (ps *parser) compositeMatch(p *Param, name, v string) (Match, error) {
	parts := syntax.Split(v, '$')
	n := len(p.Components)
	if n < 2 || len(parts) != n {
		return Match{}, errf(name, "composite value needs "+strconv.Itoa(n)+" components separated by $: "+syntax.Quote(v))
	}
	heads := make([]string, 0, n)
	for i, c := range p.Components {
		part := parts[i]
		var k string
		switch c.Type {
		case "token":
			var err error
			if k, err = tokenForm(name, part); err != nil {
				return Match{}, err
			}
		case "string":
			k = Normalize(syntax.Unescape(part))
		case "uri":
			k = syntax.Unescape(part)
		case "reference":
			k = ps.stripBase(syntax.Unescape(part))
		case "date", "number", "quantity":
			if i != n-1 {
				return Match{}, errf(name, "composite parameters with a "+c.Type+" component before the last are not supported")
			}
			for _, h := range heads {
				if strings.HasSuffix(h, "|") {
					// Rows are stored only under heads naming a code.
					return Match{}, errf(name, "a composite component before a "+c.Type+" needs a code, not only a system: "+syntax.Quote(v))
				}
			}
			param := p.Code + "$" + strings.Join(heads, "$")
			switch c.Type {
			case "date":
				return ps.dateMatch(param, name, part)
			case "number":
				return numberMatch(param, name, part)
			default:
				return quantityMatch(param, name, part)
			}
		default:
			return Match{}, errf(name, "composite component of type "+c.Type+" is not supported")
		}
		if k == "" {
			return Match{}, errf(name, "empty composite component in "+syntax.Quote(v))
		}
		heads = append(heads, k)
	}
	return Match{Op: OpKey, Keys: []string{index.Key(p.Code, strings.Join(heads, "$"))}}, nil
}
