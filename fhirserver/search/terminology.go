package search

import (
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/terminology"
	"github.com/kiln-fhir/kiln/profiles"
)

// Terminology gives the ValueSets and CodeSystems a server holds (written
// to it as resources). :in, :not-in, :above and :below look there first,
// then in the definitions built into Kiln (the R4 core terminology).
type Terminology interface {
	ValueSet(url string) (*profiles.ValueSet, bool)
	CodeSystem(url string) (*profiles.CodeSystem, bool)
}

// terms looks up opt.Terminology, then the built-in.
func (ps *parser) terms() terminology.Terms { return terminology.New(ps.opt.Terminology) }
