// Package terminology expands ValueSets and walks CodeSystem hierarchies
// for the token modifiers of search (:in, :not-in, :above, :below): in the
// terminology a server holds first, then in the R4 core definitions built
// into Kiln. Codes are returned as "system|code" forms.
package terminology

import (
	"errors"
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// Held gives the ValueSets and CodeSystems a server holds (search.Terminology).
type Held interface {
	ValueSet(url string) (*profiles.ValueSet, bool)
	CodeSystem(url string) (*profiles.CodeSystem, bool)
}

// Terms looks up held terminology, then the built-in.
type Terms struct{ held Held }

// New looks up held (nil: none) before the built-in terminology.
func New(held Held) Terms { return Terms{held} }

func (t Terms) valueSet(url string) (*profiles.ValueSet, bool) {
	if t.held != nil {
		if vs, ok := t.held.ValueSet(url); ok {
			return vs, true
		}
	}
	return profiles.ValueSetByURL(url)
}

func (t Terms) codeSystem(url string) (*profiles.CodeSystem, bool) {
	if t.held != nil {
		if cs, ok := t.held.CodeSystem(url); ok {
			return cs, true
		}
	}
	return profiles.CodeSystemByURL(url)
}

// Hierarchy resolves system|code for :above and :below (mod) in a
// CodeSystem this server holds: the code and its ancestors, or the code
// and its descendants, as "system|code" forms.
func (t Terms) Hierarchy(mod, system, code string) ([]string, error) {
	cs, ok := t.codeSystem(system)
	if !ok {
		return nil, errors.New(":" + mod + " needs a CodeSystem known to this server, not " + syntax.Quote(system))
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
