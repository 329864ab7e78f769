package search

import (
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// tokenForm is the key form of a token value: "code", "system|code",
// "|code" (no system) or "system|" (any code of the system), as
// tokenForms of package index stores them.
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
	return Match{Op: OpKeyPrefix, Prefix: index.Key(param, f)}, true
}

// codedKeys are the keys of the token form f under param. When f is
// system|code for a CodeSystem this server holds that defines code, the
// no-system form "|code" is added: elements of type code (Patient.gender,
// Observation.status) are stored without a system, which their required
// binding implies, and gender=http://hl7.org/fhir/administrative-gender|male
// must find them.
func codedKeys(param, f string) []string {
	keys := []string{index.Key(param, f)}
	system, code, ok := strings.Cut(f, "|")
	if !ok || system == "" || code == "" {
		return keys
	}
	if cs, found := profiles.CodeSystemByURL(system); found {
		if _, defined := cs.Lookup(code); defined {
			keys = append(keys, index.Key(param, "|"+code))
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
			out = append(out, Match{Op: OpKeyPrefix, Prefix: index.Key(p.Code+":text", t)})
		case "of-type":
			parts := syntax.Split(v, '|')
			if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
				return nil, errf(name, ":of-type takes system|code|value: "+syntax.Quote(v))
			}
			f := syntax.Unescape(parts[0]) + "|" + syntax.Unescape(parts[1]) + "|" + syntax.Unescape(parts[2])
			out = append(out, Match{Op: OpKey, Keys: []string{index.Key(p.Code+":of-type", f)}})
		case "in", "not-in":
			codes, err := ps.terms().ExpandValueSet(syntax.Unescape(v))
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
			codes, err := ps.hierarchy(name, mod, v)
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
func (ps *parser) hierarchy(name, mod, v string) ([]string, error) {
	parts := syntax.Split(v, '|')
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return nil, errf(name, ":"+mod+" takes system|code: "+syntax.Quote(v))
	}
	codes, err := ps.terms().Hierarchy(mod, syntax.Unescape(parts[0]), syntax.Unescape(parts[1]))
	if err != nil {
		return nil, errf(name, err.Error())
	}
	return codes, nil
}
