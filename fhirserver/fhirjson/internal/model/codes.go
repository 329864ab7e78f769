package model

import (
	"strings"

	"github.com/kiln-fhir/kiln/profiles"
)

// CodeSet is the codes of a required binding's value set.
type CodeSet struct {
	Name  string // the ValueSet's name, e.g. "AdministrativeGender"
	codes map[string]struct{}
}

// Has reports whether code is in the set; codes are case-sensitive.
func (c *CodeSet) Has(code []byte) bool {
	_, ok := c.codes[string(code)]
	return ok
}

// Codes returns the codes (for tests).
func (c *CodeSet) Codes() []string {
	out := make([]string, 0, len(c.codes))
	for k := range c.codes {
		out = append(out, k)
	}
	return out
}

// codeSet returns the codes of the value set at url, or nil when the
// embedded terminology cannot enumerate it (MIME types, currencies):
// such codes are only checked for the code format.
func (b *builder) codeSet(url string) *CodeSet {
	url = stripVersion(url)
	if c, ok := b.codes[url]; ok {
		return c
	}
	b.codes[url] = nil // a value set that includes itself expands to nothing
	vs, ok := profiles.ValueSetByURL(url)
	var c *CodeSet
	if ok {
		if codes, ok := b.expand(vs); ok && len(codes) > 0 {
			c = &CodeSet{Name: vs.Name, codes: codes}
		}
	}
	b.codes[url] = c
	return c
}

// expand lists the codes of vs; false when some part of it cannot be
// enumerated from the embedded terminology.
func (b *builder) expand(vs *profiles.ValueSet) (map[string]struct{}, bool) {
	out := map[string]struct{}{}
	if vs.Compose == nil || len(vs.Compose.Include) == 0 {
		if vs.Expansion == nil {
			return nil, false
		}
		var walk func([]profiles.ExpansionContains)
		walk = func(list []profiles.ExpansionContains) {
			for _, c := range list {
				if c.Code != "" {
					out[c.Code] = struct{}{}
				}
				walk(c.Contains)
			}
		}
		walk(vs.Expansion.Contains)
		return out, true
	}
	for i := range vs.Compose.Include {
		codes, ok := b.conceptSet(&vs.Compose.Include[i])
		if !ok {
			return nil, false
		}
		for c := range codes {
			out[c] = struct{}{}
		}
	}
	for i := range vs.Compose.Exclude {
		codes, ok := b.conceptSet(&vs.Compose.Exclude[i])
		if !ok {
			return nil, false
		}
		for c := range codes {
			delete(out, c)
		}
	}
	return out, true
}

// conceptSet lists the codes of one include or exclude.
func (b *builder) conceptSet(cs *profiles.ConceptSet) (map[string]struct{}, bool) {
	var out map[string]struct{}
	if cs.System != "" {
		out = map[string]struct{}{}
		switch {
		case len(cs.Concept) > 0:
			for _, c := range cs.Concept {
				out[c.Code] = struct{}{}
			}
		default:
			sys, ok := profiles.CodeSystemByURL(cs.System)
			if !ok || sys.Content != "complete" {
				return nil, false
			}
			if !filtered(sys, cs.Filter, out) {
				return nil, false
			}
		}
	}
	for _, u := range cs.ValueSet {
		imp := b.codeSet(u)
		if imp == nil {
			return nil, false
		}
		if out == nil {
			out = map[string]struct{}{}
			for c := range imp.codes {
				out[c] = struct{}{}
			}
			continue
		}
		for c := range out {
			if _, ok := imp.codes[c]; !ok {
				delete(out, c)
			}
		}
	}
	return out, out != nil
}

// filtered adds to out the codes of sys that pass every filter; false for a
// filter it cannot evaluate. Only the hierarchy filters core value sets
// use are known.
func filtered(sys *profiles.CodeSystem, filters []profiles.ConceptFilter, out map[string]struct{}) bool {
	if len(filters) == 0 {
		walkConcepts(sys.Concept, func(c *profiles.Concept) { out[c.Code] = struct{}{} })
		return true
	}
	first := true
	for _, f := range filters {
		if f.Property != "concept" {
			return false
		}
		root, ok := sys.Lookup(f.Value)
		if !ok {
			return false
		}
		sel := map[string]struct{}{}
		switch f.Op {
		case "is-a":
			sel[root.Code] = struct{}{}
			walkConcepts(root.Concept, func(c *profiles.Concept) { sel[c.Code] = struct{}{} })
		case "descendent-of":
			walkConcepts(root.Concept, func(c *profiles.Concept) { sel[c.Code] = struct{}{} })
		case "is-not-a":
			excluded := map[string]struct{}{root.Code: {}}
			walkConcepts(root.Concept, func(c *profiles.Concept) { excluded[c.Code] = struct{}{} })
			walkConcepts(sys.Concept, func(c *profiles.Concept) {
				if _, ok := excluded[c.Code]; !ok {
					sel[c.Code] = struct{}{}
				}
			})
		default:
			return false
		}
		if first {
			for c := range sel {
				out[c] = struct{}{}
			}
			first = false
			continue
		}
		for c := range out {
			if _, ok := sel[c]; !ok {
				delete(out, c)
			}
		}
	}
	return true
}

func walkConcepts(list []profiles.Concept, f func(*profiles.Concept)) {
	for i := range list {
		f(&list[i])
		walkConcepts(list[i].Concept, f)
	}
}

func stripVersion(url string) string {
	if i := strings.IndexByte(url, '|'); i >= 0 {
		return url[:i]
	}
	return url
}
