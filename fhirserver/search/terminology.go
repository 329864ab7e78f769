package search

import "github.com/kiln-fhir/kiln/profiles"

// Terminology gives the ValueSets and CodeSystems a server holds (written
// to it as resources). :in, :not-in, :above and :below look there first,
// then in the definitions built into Kiln (the R4 core terminology).
type Terminology interface {
	ValueSet(url string) (*profiles.ValueSet, bool)
	CodeSystem(url string) (*profiles.CodeSystem, bool)
}

// terms looks up held terminology, then the built-in.
type terms struct{ held Terminology }

func (ps *parser) terms() terms { return terms{ps.opt.Terminology} }

func (t terms) valueSet(url string) (*profiles.ValueSet, bool) {
	if t.held != nil {
		if vs, ok := t.held.ValueSet(url); ok {
			return vs, true
		}
	}
	return profiles.ValueSetByURL(url)
}

func (t terms) codeSystem(url string) (*profiles.CodeSystem, bool) {
	if t.held != nil {
		if cs, ok := t.held.CodeSystem(url); ok {
			return cs, true
		}
	}
	return profiles.CodeSystemByURL(url)
}
