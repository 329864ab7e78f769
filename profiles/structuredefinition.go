package profiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// StructureDefinition is a trimmed FHIR StructureDefinition: its identity,
// its place in the type hierarchy and its snapshot elements. It decodes from
// FHIR JSON; encoding it with encoding/json does not give FHIR JSON back.
type StructureDefinition struct {
	ResourceType   string `json:"resourceType"`
	ID             string `json:"id"`
	URL            string `json:"url"`
	Version        string `json:"version,omitempty"`
	Name           string `json:"name"`
	Kind           string `json:"kind"` // primitive-type, complex-type, resource or logical
	Abstract       bool   `json:"abstract"`
	Type           string `json:"type"`
	BaseDefinition string `json:"baseDefinition,omitempty"`
	Derivation     string `json:"derivation,omitempty"` // specialization or constraint
	FHIRVersion    string `json:"fhirVersion,omitempty"`

	// Context lists where an extension defined by this StructureDefinition
	// may be used (StructureDefinition.context); empty for other kinds.
	Context []ExtensionContext `json:"context,omitempty"`
	// ContextInvariant holds FHIRPath invariants an extension's context
	// must satisfy.
	ContextInvariant []string `json:"contextInvariant,omitempty"`

	// Elements are the snapshot elements, in order.
	Elements []ElementDefinition `json:"-"`
	// Differential holds the differential elements, in order, as
	// published. The embedded core definitions carry none.
	Differential []ElementDefinition `json:"-"`
	// SnapshotGenerated reports that Elements were generated from
	// Differential and the base definition when the Set was built, rather
	// than read from the published snapshot.
	SnapshotGenerated bool `json:"-"`

	byPath map[string]int // first element of each path
}

// UnmarshalJSON decodes a StructureDefinition, taking Elements from
// snapshot.element.
func (sd *StructureDefinition) UnmarshalJSON(data []byte) error {
	type plain StructureDefinition
	aux := struct {
		*plain
		Snapshot struct {
			Element []ElementDefinition `json:"element"`
		} `json:"snapshot"`
		Differential struct {
			Element []ElementDefinition `json:"element"`
		} `json:"differential"`
	}{plain: (*plain)(sd)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	sd.Elements = aux.Snapshot.Element
	sd.Differential = aux.Differential.Element
	sd.index()
	return nil
}

// unmarshalPlain decodes like UnmarshalJSON but ignores the choice elements
// (fixed[x], pattern[x], minValue[x], maxValue[x]). It avoids the custom
// UnmarshalJSON methods, whose extra scans of the input make decoding
// nearly twice as slow.
func (sd *StructureDefinition) unmarshalPlain(data []byte) error {
	type plain StructureDefinition
	type plainElement ElementDefinition
	aux := struct {
		*plain
		Snapshot struct {
			Element []plainElement `json:"element"`
		} `json:"snapshot"`
	}{plain: (*plain)(sd)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	sd.Elements = make([]ElementDefinition, len(aux.Snapshot.Element))
	for i, e := range aux.Snapshot.Element {
		sd.Elements[i] = ElementDefinition(e)
	}
	sd.index()
	return nil
}

// index records the first element of each path.
func (sd *StructureDefinition) index() {
	sd.byPath = make(map[string]int, len(sd.Elements))
	for i, e := range sd.Elements {
		if _, dup := sd.byPath[e.Path]; !dup {
			sd.byPath[e.Path] = i
		}
	}
}

// ExtensionContext is one StructureDefinition.context: where an extension
// may appear.
type ExtensionContext struct {
	// Type is fhirpath, element or extension.
	Type string `json:"type"`
	// Expression is the FHIRPath expression, element path (e.g.
	// "Patient" or "Patient.address") or extension URL.
	Expression string `json:"expression"`
}

// Element returns the first snapshot element with the given path, such as
// "Patient.birthDate" or "Patient.deceased[x]". Slices share the path of
// the element they slice; look them up in Elements by ID.
func (sd *StructureDefinition) Element(path string) (*ElementDefinition, bool) {
	i, ok := sd.byPath[path]
	if !ok {
		return nil, false
	}
	return &sd.Elements[i], true
}

// ElementDefinition is a trimmed FHIR ElementDefinition.
type ElementDefinition struct {
	ID               string        `json:"id"`
	Path             string        `json:"path"`
	SliceName        string        `json:"sliceName,omitempty"`
	Min              int           `json:"min"`
	Max              string        `json:"max"` // a number or "*"
	Base             *ElementBase  `json:"base,omitempty"`
	Type             []ElementType `json:"type,omitempty"`
	ContentReference string        `json:"contentReference,omitempty"`
	MaxLength        int           `json:"maxLength,omitempty"`
	Condition        []string      `json:"condition,omitempty"`
	Constraint       []Constraint  `json:"constraint,omitempty"`
	IsModifier       bool          `json:"isModifier,omitempty"`
	IsSummary        bool          `json:"isSummary,omitempty"`
	Binding          *Binding      `json:"binding,omitempty"`
	Slicing          *Slicing      `json:"slicing,omitempty"`
	Representation   []string      `json:"representation,omitempty"`
	MustSupport      bool          `json:"mustSupport,omitempty"`

	// The choice elements fixed[x], pattern[x], minValue[x] and maxValue[x]:
	// the JSON key as it appears (e.g. "fixedCode") and the raw value.
	FixedKey    string          `json:"-"`
	Fixed       json.RawMessage `json:"-"`
	PatternKey  string          `json:"-"`
	Pattern     json.RawMessage `json:"-"`
	MinValueKey string          `json:"-"`
	MinValue    json.RawMessage `json:"-"`
	MaxValueKey string          `json:"-"`
	MaxValue    json.RawMessage `json:"-"`
}

// choicePrefixes are the JSON key prefixes of the choice elements kept as
// raw values; quoted, they are also a cheap test for their presence.
var choicePrefixes = [...]string{"fixed", "pattern", "minValue", "maxValue"}

// UnmarshalJSON decodes an ElementDefinition including its choice elements.
func (e *ElementDefinition) UnmarshalJSON(data []byte) error {
	type plain ElementDefinition
	if err := json.Unmarshal(data, (*plain)(e)); err != nil {
		return err
	}
	if !mayHaveChoice(data) {
		return nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	for key, v := range all {
		switch {
		case strings.HasPrefix(key, "fixed"):
			e.FixedKey, e.Fixed = key, v
		case strings.HasPrefix(key, "pattern"):
			e.PatternKey, e.Pattern = key, v
		case strings.HasPrefix(key, "minValue"):
			e.MinValueKey, e.MinValue = key, v
		case strings.HasPrefix(key, "maxValue"):
			e.MaxValueKey, e.MaxValue = key, v
		}
	}
	return nil
}

// mayHaveChoice reports whether data may hold a choice key. False
// positives (the text inside a string) only cost a second decode.
func mayHaveChoice(data []byte) bool {
	for _, p := range choicePrefixes {
		if bytes.Contains(data, []byte(`"`+p)) {
			return true
		}
	}
	return false
}

// ElementBase is ElementDefinition.base: where the element is first defined.
type ElementBase struct {
	Path string `json:"path"`
	Min  int    `json:"min"`
	Max  string `json:"max"`
}

// ElementType is one entry of ElementDefinition.type.
type ElementType struct {
	Code          string      `json:"code"`
	Profile       []string    `json:"profile,omitempty"`
	TargetProfile []string    `json:"targetProfile,omitempty"`
	Extension     []Extension `json:"extension,omitempty"`
}

// Extension is a kept extension of an ElementType.
type Extension struct {
	URL         string `json:"url"`
	ValueURL    string `json:"valueUrl,omitempty"`
	ValueURI    string `json:"valueUri,omitempty"`
	ValueString string `json:"valueString,omitempty"`
}

// Extension URLs kept on ElementDefinition.type.
const (
	// ExtFHIRType gives the FHIR type of a primitive's value element, whose
	// code is a FHIRPath system type such as
	// http://hl7.org/fhirpath/System.String.
	ExtFHIRType = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"
	// ExtRegex gives the regular expression a primitive value must match.
	ExtRegex = "http://hl7.org/fhir/StructureDefinition/regex"
)

func (t *ElementType) extension(url string) string {
	for _, x := range t.Extension {
		if x.URL == url {
			return x.ValueURL + x.ValueURI + x.ValueString
		}
	}
	return ""
}

// FHIRType returns the value of the structuredefinition-fhir-type
// extension, or "" if there is none.
func (t *ElementType) FHIRType() string { return t.extension(ExtFHIRType) }

// Regex returns the value of the regex extension, or "" if there is none.
func (t *ElementType) Regex() string { return t.extension(ExtRegex) }

// Constraint is an invariant of an element, with its FHIRPath expression.
type Constraint struct {
	Key        string `json:"key"`
	Severity   string `json:"severity"` // error or warning
	Human      string `json:"human"`
	Expression string `json:"expression,omitempty"`
	Source     string `json:"source,omitempty"`
}

// Binding is ElementDefinition.binding. ValueSet is a canonical URL that
// may carry a |version suffix; ValueSetByURL accepts it as it is.
type Binding struct {
	Strength string `json:"strength"` // required, extensible, preferred or example
	ValueSet string `json:"valueSet,omitempty"`
}

// Slicing is ElementDefinition.slicing.
type Slicing struct {
	Discriminator []Discriminator `json:"discriminator,omitempty"`
	Rules         string          `json:"rules"`
	Ordered       bool            `json:"ordered,omitempty"`
}

// Discriminator is one ElementDefinition.slicing.discriminator.
type Discriminator struct {
	Type string `json:"type"`
	Path string `json:"path"`
}

// sdSet indexes the embedded StructureDefinitions.
type sdSet struct {
	list   []*StructureDefinition
	byURL  map[string]*StructureDefinition
	byType map[string]*StructureDefinition
}

var loadStructureDefinitions = sync.OnceValues(decodeStructureDefinitions)

// decodeStructureDefinitions decodes and indexes the embedded
// StructureDefinitions.
func decodeStructureDefinitions() (*sdSet, error) {
	data, err := readGzip(sdFile)
	if err != nil {
		return nil, err
	}
	list, err := decodeStructureDefinitionList(data)
	if err != nil {
		return nil, fmt.Errorf("profiles: %s: %w", sdFile, err)
	}
	s := &sdSet{
		list:   list,
		byURL:  make(map[string]*StructureDefinition, len(list)),
		byType: make(map[string]*StructureDefinition, len(list)),
	}
	for _, sd := range list {
		s.byURL[sd.URL] = sd
		// The base definition of a type, not a profile constraining it
		// (SimpleQuantity and MoneyQuantity constrain Quantity).
		if sd.Derivation != "constraint" {
			s.byType[sd.Type] = sd
		}
	}
	return s, nil
}

const sdFile = "structuredefinitions.json.gz"

// decodeStructureDefinitionList decodes a JSON array of
// StructureDefinitions. The generator writes one per line, so the lines are
// decoded in parallel, and each is checked for choice elements: most have
// none and take the fast path. Any other layout is decoded as a whole.
func decodeStructureDefinitionList(data []byte) ([]*StructureDefinition, error) {
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	n := len(lines)
	if n < 2 || string(lines[0]) != "[" || string(lines[n-1]) != "]" {
		var list []*StructureDefinition
		err := json.Unmarshal(data, &list)
		return list, err
	}
	items := lines[1 : n-1]
	list := make([]*StructureDefinition, len(items))
	errs := make([]error, len(items))
	workers := min(runtime.GOMAXPROCS(0), len(items))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(items); i += workers {
				item := bytes.TrimSuffix(items[i], []byte(","))
				sd := new(StructureDefinition)
				if mayHaveChoice(item) {
					errs[i] = json.Unmarshal(item, sd)
				} else {
					errs[i] = sd.unmarshalPlain(item)
				}
				list[i] = sd
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return list, nil
}

// StructureDefinitions returns all embedded StructureDefinitions: resources,
// data types, primitive types, the logical MetadataResource and the type
// profiles SimpleQuantity and MoneyQuantity. The caller owns the slice but
// not the StructureDefinitions.
func StructureDefinitions() ([]*StructureDefinition, error) {
	s, err := loadStructureDefinitions()
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.list), nil
}

// StructureDefinitionByURL returns the StructureDefinition with the given
// canonical URL, e.g. "http://hl7.org/fhir/StructureDefinition/Patient".
// A |version suffix is ignored.
func StructureDefinitionByURL(url string) (*StructureDefinition, bool) {
	s, err := loadStructureDefinitions()
	if err != nil {
		return nil, false
	}
	sd, ok := s.byURL[stripVersion(url)]
	return sd, ok
}

// TypeDefinition returns the StructureDefinition that defines the named
// type, e.g. "Patient", "HumanName" or "string".
func TypeDefinition(name string) (*StructureDefinition, bool) {
	s, err := loadStructureDefinitions()
	if err != nil {
		return nil, false
	}
	sd, ok := s.byType[name]
	return sd, ok
}

// stripVersion removes a |version suffix from a canonical URL.
func stripVersion(url string) string {
	if i := strings.IndexByte(url, '|'); i >= 0 {
		return url[:i]
	}
	return url
}
