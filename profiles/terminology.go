package profiles

import (
	"encoding/json"
	"sync"
)

// The embedded terminology covers the ValueSets that elements of the core
// StructureDefinitions bind to with strength required, the ValueSets those
// include, and the CodeSystems they draw codes from, where the
// specification defines them. External systems such as UCUM, BCP-13 (MIME
// types) and ISO 4217 (currencies) are not included.

// CodeSystem is a trimmed FHIR CodeSystem.
type CodeSystem struct {
	ID      string `json:"id"`
	URL     string `json:"url"`
	Version string `json:"version,omitempty"`
	Name    string `json:"name"`
	// Content is complete, example, fragment, not-present or supplement.
	Content          string    `json:"content"`
	CaseSensitive    bool      `json:"caseSensitive,omitempty"`
	HierarchyMeaning string    `json:"hierarchyMeaning,omitempty"`
	Concept          []Concept `json:"concept,omitempty"`

	byCode map[string]*Concept // every concept, nested ones included
}

// Concept is a code of a CodeSystem, with the codes nested under it.
type Concept struct {
	Code    string    `json:"code"`
	Display string    `json:"display,omitempty"`
	Concept []Concept `json:"concept,omitempty"`
}

// Lookup returns the concept with the given code, searching nested
// concepts too. Codes are compared exactly, even where the CodeSystem is
// not CaseSensitive.
func (cs *CodeSystem) Lookup(code string) (*Concept, bool) {
	c, ok := cs.byCode[code]
	return c, ok
}

func (cs *CodeSystem) index() {
	cs.byCode = make(map[string]*Concept)
	var walk func([]Concept)
	walk = func(list []Concept) {
		for i := range list {
			c := &list[i]
			if _, dup := cs.byCode[c.Code]; !dup {
				cs.byCode[c.Code] = c
			}
			walk(c.Concept)
		}
	}
	walk(cs.Concept)
}

// ValueSet is a trimmed FHIR ValueSet.
type ValueSet struct {
	ID        string             `json:"id"`
	URL       string             `json:"url"`
	Version   string             `json:"version,omitempty"`
	Name      string             `json:"name"`
	Compose   *ValueSetCompose   `json:"compose,omitempty"`
	Expansion *ValueSetExpansion `json:"expansion,omitempty"`
}

// ValueSetCompose is ValueSet.compose.
type ValueSetCompose struct {
	Include []ConceptSet `json:"include,omitempty"`
	Exclude []ConceptSet `json:"exclude,omitempty"`
}

// ConceptSet is one ValueSet.compose.include or exclude: codes of System
// (all of them, those listed in Concept, or those matching Filter),
// intersected with the ValueSets listed in ValueSet.
type ConceptSet struct {
	System   string             `json:"system,omitempty"`
	Version  string             `json:"version,omitempty"`
	Concept  []ConceptReference `json:"concept,omitempty"`
	Filter   []ConceptFilter    `json:"filter,omitempty"`
	ValueSet []string           `json:"valueSet,omitempty"`
}

// ConceptReference is a code listed in a ConceptSet.
type ConceptReference struct {
	Code    string `json:"code"`
	Display string `json:"display,omitempty"`
}

// ConceptFilter selects codes of a ConceptSet's system by property, e.g.
// {"concept", "is-a", "_ActCode"}.
type ConceptFilter struct {
	Property string `json:"property"`
	Op       string `json:"op"`
	Value    string `json:"value"`
}

// ValueSetExpansion is ValueSet.expansion, reduced to its codes.
type ValueSetExpansion struct {
	Contains []ExpansionContains `json:"contains,omitempty"`
}

// ExpansionContains is a code of an expansion, with nested codes.
type ExpansionContains struct {
	System   string              `json:"system,omitempty"`
	Code     string              `json:"code,omitempty"`
	Display  string              `json:"display,omitempty"`
	Contains []ExpansionContains `json:"contains,omitempty"`
}

// termSet indexes the embedded terminology.
type termSet struct {
	valueSets   map[string]*ValueSet
	codeSystems map[string]*CodeSystem
}

var loadTerminology = sync.OnceValues(decodeTerminology)

// decodeTerminology decodes and indexes the embedded ValueSets and
// CodeSystems.
func decodeTerminology() (*termSet, error) {
	var raw struct {
		CodeSystems []*CodeSystem `json:"codeSystems"`
		ValueSets   []*ValueSet   `json:"valueSets"`
	}
	if err := decodeGzip("terminology.json.gz", &raw); err != nil {
		return nil, err
	}
	t := &termSet{
		valueSets:   make(map[string]*ValueSet, len(raw.ValueSets)),
		codeSystems: make(map[string]*CodeSystem, len(raw.CodeSystems)),
	}
	for _, vs := range raw.ValueSets {
		t.valueSets[vs.URL] = vs
	}
	for _, cs := range raw.CodeSystems {
		cs.index()
		t.codeSystems[cs.URL] = cs
	}
	return t, nil
}

// ParseCodeSystem reads a CodeSystem resource (as a server stores one),
// ready for Lookup.
func ParseCodeSystem(b []byte) (*CodeSystem, error) {
	var cs CodeSystem
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, err
	}
	cs.index()
	return &cs, nil
}

// ParseValueSet reads a ValueSet resource (as a server stores one).
func ParseValueSet(b []byte) (*ValueSet, error) {
	var vs ValueSet
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, err
	}
	return &vs, nil
}

// ValueSetByURL returns the embedded ValueSet with the given canonical URL,
// e.g. "http://hl7.org/fhir/ValueSet/administrative-gender". A |version
// suffix, as in binding canonicals, is ignored: one version of each
// ValueSet is embedded.
func ValueSetByURL(url string) (*ValueSet, bool) {
	t, err := loadTerminology()
	if err != nil {
		return nil, false
	}
	vs, ok := t.valueSets[stripVersion(url)]
	return vs, ok
}

// CodeSystemByURL returns the embedded CodeSystem with the given URL (a
// ConceptSet's System), e.g. "http://hl7.org/fhir/administrative-gender".
// A |version suffix is ignored.
func CodeSystemByURL(url string) (*CodeSystem, bool) {
	t, err := loadTerminology()
	if err != nil {
		return nil, false
	}
	cs, ok := t.codeSystems[stripVersion(url)]
	return cs, ok
}
