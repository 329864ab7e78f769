package search

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// tokenForm is the key form of a token value: "code", "system|code",
// "|code" (no system) or "system|" (any code of the system), as
// tokenForms in entry.go stores them.
func tokenForm(name, v string) (string, error) {
	parts := syntax.Split(v, '|')
	switch len(parts) {
	case 1:
		code := syntax.Unescape(parts[0])
		if code == "" {
			return "", errf(name, "empty token")
		}
		return code, nil
	case 2:
		system, code := syntax.Unescape(parts[0]), syntax.Unescape(parts[1])
		if system == "" && code == "" {
			return "", errf(name, "empty token")
		}
		return system + "|" + code, nil
	}
	return "", errf(name, "a token is code, system|code, |code or system|: "+syntax.Quote(v))
}

// systemOnly is the match of the form "system|" (any code of the system):
// the keys that start with it, as tokenForms stores no key for it.
func systemOnly(param, f string) (Match, bool) {
	if len(f) < 2 || !strings.HasSuffix(f, "|") {
		return Match{}, false
	}
	return Match{Op: OpKeyPrefix, Prefix: key(param, f)}, true
}

// codedKeys are the keys of the token form f under param. When f is
// system|code for a CodeSystem this server holds that defines code, the
// no-system form "|code" is added: elements of type code (Patient.gender,
// Observation.status) are stored without a system, which their required
// binding implies, and gender=http://hl7.org/fhir/administrative-gender|male
// must find them.
func codedKeys(param, f string) []string {
	keys := []string{key(param, f)}
	system, code, ok := strings.Cut(f, "|")
	if !ok || system == "" || code == "" {
		return keys
	}
	if cs, found := profiles.CodeSystemByURL(system); found {
		if _, defined := cs.Lookup(code); defined {
			keys = append(keys, key(param, "|"+code))
		}
	}
	return keys
}

// tokenMatches makes the matches of a token parameter. Each comma value
// is a match of its own, but the negated modifiers (:not, :not-in) make
// one match over all the values: "none of these", which is what a client
// asking gender:not=male,female means (an OR of negations would match
// everything).
func (ps *parser) tokenMatches(p *Param, name, mod string, vals []string) ([]Match, error) {
	var out []Match
	var negated []string
	for _, v := range vals {
		switch mod {
		case "", "not":
			f, err := tokenForm(name, v)
			if err != nil {
				return nil, err
			}
			if m, ok := systemOnly(p.Code, f); ok {
				m.Not = mod == "not"
				out = append(out, m)
				continue
			}
			keys := codedKeys(p.Code, f)
			if mod == "not" {
				negated = append(negated, keys...)
				continue
			}
			out = append(out, Match{Op: OpKey, Keys: keys})
		case "text":
			t := Normalize(syntax.Unescape(v))
			out = append(out, Match{Op: OpKeyPrefix, Prefix: key(p.Code+":text", t)})
		case "of-type":
			parts := syntax.Split(v, '|')
			if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
				return nil, errf(name, ":of-type takes system|code|value: "+syntax.Quote(v))
			}
			f := syntax.Unescape(parts[0]) + "|" + syntax.Unescape(parts[1]) + "|" + syntax.Unescape(parts[2])
			out = append(out, Match{Op: OpKey, Keys: []string{key(p.Code+":of-type", f)}})
		case "in", "not-in":
			codes, err := ps.terms().expandValueSet(syntax.Unescape(v), 0)
			if err != nil {
				return nil, errf(name, err.Error())
			}
			var keys []string
			for _, c := range codes {
				keys = append(keys, codedKeys(p.Code, c)...)
			}
			if mod == "not-in" {
				negated = append(negated, keys...)
				continue
			}
			out = append(out, Match{Op: OpKey, Keys: keys})
		case "above", "below":
			codes, err := ps.terms().hierarchy(name, mod, v)
			if err != nil {
				return nil, err
			}
			var keys []string
			for _, c := range codes {
				keys = append(keys, codedKeys(p.Code, c)...)
			}
			out = append(out, Match{Op: OpKey, Keys: keys})
		}
	}
	if negated != nil {
		slices.Sort(negated)
		out = append(out, Match{Op: OpKey, Not: true, Keys: slices.Compact(negated)})
	}
	return out, nil
}

// hierarchy resolves system|code for :above and :below in a CodeSystem
// this server holds: the code and its ancestors, or the code and its
// descendants, as "system|code" forms.
func (t terms) hierarchy(name, mod, v string) ([]string, error) {
	parts := syntax.Split(v, '|')
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return nil, errf(name, ":"+mod+" takes system|code: "+syntax.Quote(v))
	}
	system, code := syntax.Unescape(parts[0]), syntax.Unescape(parts[1])
	cs, ok := t.codeSystem(system)
	if !ok {
		return nil, errf(name, ":"+mod+" needs a CodeSystem known to this server, not "+syntax.Quote(system))
	}
	var codes []string
	if mod == "below" {
		if c, ok := cs.Lookup(code); ok {
			codes = descendants(c, nil)
		} else {
			codes = []string{code}
		}
	} else {
		codes = ancestors(cs.Concept, code, nil)
		if codes == nil {
			codes = []string{code}
		}
	}
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = system + "|" + c
	}
	return out, nil
}

// descendants lists c's code and those of every concept nested under it.
func descendants(c *profiles.Concept, out []string) []string {
	out = append(out, c.Code)
	for i := range c.Concept {
		out = descendants(&c.Concept[i], out)
	}
	return out
}

// ancestors returns the codes from a root of list down to code
// (inclusive), or nil when code is not in list.
func ancestors(list []profiles.Concept, code string, path []string) []string {
	for i := range list {
		c := &list[i]
		p := append(slices.Clip(path), c.Code)
		if c.Code == code {
			return p
		}
		if r := ancestors(c.Concept, code, p); r != nil {
			return r
		}
	}
	return nil
}

// maxExpansion bounds the codes of a ValueSet expansion.
const maxExpansion = 10000

type expandError string

func (e expandError) Error() string { return string(e) }

// maxValueSetDepth bounds how deep ValueSets include one another, which
// also ends a cycle.
const maxValueSetDepth = 8

// expandValueSet returns the codes of the ValueSet url as sorted
// "system|code" forms: from its expansion when it has one, else from its
// compose over CodeSystems this server holds. A ValueSet that is unknown,
// or that draws on a CodeSystem or filter this server cannot evaluate, is
// an error: answering with fewer codes would be silently wrong.
func (t terms) expandValueSet(url string, depth int) ([]string, error) {
	if depth > maxValueSetDepth {
		return nil, expandError("ValueSet " + syntax.Quote(url) + " is included more than " + strconv.Itoa(maxValueSetDepth) +
			" levels deep (or includes itself); this server expands ValueSets up to that depth")
	}
	vs, ok := t.valueSet(url)
	if !ok {
		return nil, expandError("unknown ValueSet " + syntax.Quote(url))
	}
	set := map[string]bool{}
	if vs.Expansion != nil && len(vs.Expansion.Contains) > 0 {
		var walk func([]profiles.ExpansionContains)
		walk = func(list []profiles.ExpansionContains) {
			for _, c := range list {
				if c.Code != "" {
					set[c.System+"|"+c.Code] = true
				}
				walk(c.Contains)
			}
		}
		walk(vs.Expansion.Contains)
	} else if vs.Compose != nil {
		for _, inc := range vs.Compose.Include {
			codes, err := t.conceptSet(url, inc, depth)
			if err != nil {
				return nil, err
			}
			for _, c := range codes {
				set[c] = true
			}
		}
		for _, exc := range vs.Compose.Exclude {
			codes, err := t.conceptSet(url, exc, depth)
			if err != nil {
				return nil, err
			}
			for _, c := range codes {
				delete(set, c)
			}
		}
	}
	if len(set) == 0 {
		return nil, expandError("ValueSet " + syntax.Quote(url) + " cannot be expanded by this server")
	}
	if len(set) > maxExpansion {
		return nil, expandError("ValueSet " + syntax.Quote(url) + " is too large to search with")
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// conceptSet evaluates one compose include or exclude.
func (t terms) conceptSet(url string, cs profiles.ConceptSet, depth int) ([]string, error) {
	var codes []string
	have := false
	if cs.System != "" {
		have = true
		if len(cs.Concept) > 0 && len(cs.Filter) == 0 {
			for _, c := range cs.Concept {
				codes = append(codes, cs.System+"|"+c.Code)
			}
		} else {
			sys, ok := t.codeSystem(cs.System)
			if !ok || sys.Content == "not-present" {
				return nil, expandError("ValueSet " + syntax.Quote(url) + " draws on CodeSystem " + syntax.Quote(cs.System) + ", which this server does not hold")
			}
			var err error
			if codes, err = filterCodes(url, sys, cs); err != nil {
				return nil, err
			}
		}
	}
	for _, ref := range cs.ValueSet {
		sub, err := t.expandValueSet(ref, depth+1)
		if err != nil {
			return nil, err
		}
		if !have {
			codes, have = sub, true
			continue
		}
		codes = slices.DeleteFunc(codes, func(c string) bool {
			_, found := slices.BinarySearch(sub, c)
			return !found
		})
	}
	return codes, nil
}

// filterCodes lists the codes of sys selected by the filters of cs (all
// of them without filters): is-a, descendent-of, is-not-a and in on the
// concept property.
func filterCodes(url string, sys *profiles.CodeSystem, cs profiles.ConceptSet) ([]string, error) {
	var all []string
	for i := range sys.Concept {
		all = descendants(&sys.Concept[i], all)
	}
	keep := all
	for _, f := range cs.Filter {
		if f.Property != "concept" && f.Property != "code" {
			return nil, expandError("ValueSet " + syntax.Quote(url) + " uses a filter on " + syntax.Quote(f.Property) + ", which this server cannot evaluate")
		}
		sel := map[string]bool{}
		switch f.Op {
		case "is-a", "descendent-of", "is-not-a":
			if c, ok := sys.Lookup(f.Value); ok {
				for i, d := range descendants(c, nil) {
					if i > 0 || f.Op != "descendent-of" {
						sel[d] = true
					}
				}
			}
		case "in", "=":
			for _, c := range strings.Split(f.Value, ",") {
				sel[c] = true
			}
		default:
			return nil, expandError("ValueSet " + syntax.Quote(url) + " uses filter op " + syntax.Quote(f.Op) + ", which this server cannot evaluate")
		}
		negate := f.Op == "is-not-a"
		keep = slices.DeleteFunc(slices.Clone(keep), func(c string) bool { return sel[c] == negate })
	}
	if len(cs.Concept) > 0 {
		listed := map[string]bool{}
		for _, r := range cs.Concept {
			listed[r.Code] = true
		}
		keep = slices.DeleteFunc(keep, func(c string) bool { return !listed[c] })
	}
	out := make([]string, len(keep))
	for i, c := range keep {
		out[i] = sys.URL + "|" + c
	}
	return out, nil
}
