// Package model is the FHIR R4 type model FHIRPath navigates by: each type
// (and each anonymous BackboneElement) compiled once, on first use, from
// the StructureDefinitions of package profiles into its elements, their
// JSON keys and their types, and its place in the type hierarchy.
package model

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/profiles"
)

// Primitive is the System type a FHIR primitive implicitly converts to.
type Primitive uint8

const (
	NotPrimitive Primitive = iota // complex types, resources, backbones
	Boolean
	Integer
	Decimal
	String
	Date
	DateTime
	Time
)

// Type is the compiled form of a FHIR type (or of an anonymous
// BackboneElement) from the R4 StructureDefinitions.
type Type struct {
	name       string // FHIR type name; "BackboneElement" for anonymous ones
	path       string // defining path, e.g. "Patient.contact" for backbones
	kind       string // primitive-type, complex-type, resource
	baseName   string
	base       atomic.Pointer[Type]
	sys        Primitive // System type a primitive converts to
	isQuantity bool
	elems      map[string]*Element
	all        atomic.Pointer[map[string]*Element] // elems including inherited ones
	order      []*Element                          // own elems in definition order
	allOrder   atomic.Pointer[[]*Element]          // inherited first, then own
}

// Element describes one child element of a type.
type Element struct {
	name      string
	choice    bool
	many      bool
	typeNames []string // FHIR type codes, in definition order
	keys      []string // JSON keys: name, or name+Type for choices
	extKeys   []string // "_"+key, the primitive extension siblings
	anon      *Type
	contRef   string // contentReference path (e.g. "Questionnaire.item")
	resolved  atomic.Pointer[[]*Type]
}

var typeCache struct {
	sync.RWMutex
	m map[string]*Type // by type name and by backbone path
}

// systemOf maps FHIR primitive type names to the System type they
// implicitly convert to.
var systemOf = map[string]Primitive{
	"boolean": Boolean, "integer": Integer, "positiveInt": Integer, "unsignedInt": Integer, "integer64": Integer,
	"decimal": Decimal, "string": String, "code": String, "id": String, "markdown": String, "uri": String,
	"url": String, "canonical": String, "oid": String, "uuid": String, "base64Binary": String, "xhtml": String,
	"date": Date, "dateTime": DateTime, "instant": DateTime, "time": Time,
}

// Lookup returns the type with the given FHIR name (or backbone path).
func Lookup(name string) *Type {
	typeCache.RLock()
	t, ok := typeCache.m[name]
	typeCache.RUnlock()
	if ok {
		return t
	}
	if strings.IndexByte(name, '.') >= 0 {
		root := name[:strings.IndexByte(name, '.')]
		if Lookup(root) == nil {
			return nil
		}
		typeCache.RLock()
		t = typeCache.m[name]
		typeCache.RUnlock()
		return t
	}
	sd, ok := profiles.TypeDefinition(name)
	if !ok || sd.Kind == "logical" {
		// Misses are not cached: names can come from input data, and
		// the definitions lookup is a map access anyway.
		return nil
	}
	built := buildType(name, sd)
	typeCache.Lock()
	defer typeCache.Unlock()
	if typeCache.m == nil {
		typeCache.m = map[string]*Type{}
	}
	if t, ok := typeCache.m[name]; ok && t != nil {
		return t
	}
	for k, v := range built {
		typeCache.m[k] = v
	}
	return built[name]
}

// buildType compiles a StructureDefinition into Types: the type and
// its backbone elements keyed by path.
func buildType(name string, sd *profiles.StructureDefinition) map[string]*Type {
	root := &Type{name: name, path: sd.Type, kind: sd.Kind, elems: map[string]*Element{}}
	if i := strings.LastIndexByte(sd.BaseDefinition, '/'); i >= 0 {
		root.baseName = sd.BaseDefinition[i+1:]
	}
	root.sys = systemOf[name]
	switch name {
	case "Quantity", "SimpleQuantity", "Age", "Distance", "Duration", "Count", "MoneyQuantity":
		root.isQuantity = true
	}
	out := map[string]*Type{name: root}
	byPath := map[string]*Type{sd.Type: root}
	for i := range sd.Elements {
		e := &sd.Elements[i]
		if e.SliceName != "" || strings.Contains(e.ID, ":") {
			continue
		}
		dot := strings.LastIndexByte(e.Path, '.')
		if dot < 0 {
			continue
		}
		owner := byPath[e.Path[:dot]]
		if owner == nil {
			continue
		}
		en := e.Path[dot+1:]
		ei := &Element{name: en, many: e.Max != "0" && e.Max != "1"}
		if e.Base != nil && e.Base.Max != "" && e.Base.Max != "0" && e.Base.Max != "1" {
			ei.many = true
		}
		if strings.HasSuffix(en, "[x]") {
			ei.choice = true
			ei.name = strings.TrimSuffix(en, "[x]")
		}
		for _, t := range e.Type {
			code := t.Code
			if strings.HasPrefix(code, "http://hl7.org/fhirpath/System.") {
				if ft := t.FHIRType(); ft != "" && !(sd.Kind == "primitive-type" && en == "value") {
					// Resource.id, Element.id, Extension.url: FHIR
					// primitives whose definition names the System type
					code = ft
				} else {
					// the value of a primitive: keep the FHIR type of the primitive
					code = "System." + strings.TrimPrefix(code, "http://hl7.org/fhirpath/System.")
				}
			}
			ei.typeNames = append(ei.typeNames, code)
			if ei.choice {
				ei.keys = append(ei.keys, ei.name+strings.ToUpper(code[:1])+code[1:])
			}
		}
		if !ei.choice {
			ei.keys = []string{ei.name}
		}
		for _, k := range ei.keys {
			ei.extKeys = append(ei.extKeys, "_"+k)
		}
		if e.ContentReference != "" {
			ei.contRef = strings.TrimPrefix(e.ContentReference, "#")
			if i := strings.IndexByte(ei.contRef, '#'); i >= 0 {
				ei.contRef = ei.contRef[i+1:]
			}
		} else if len(ei.typeNames) == 1 && (ei.typeNames[0] == "BackboneElement" || ei.typeNames[0] == "Element") && strings.Count(e.Path, ".") >= 1 && name != "Element" && name != "BackboneElement" {
			bb := &Type{name: ei.typeNames[0], path: sd.Type + e.Path[strings.IndexByte(e.Path, '.'):], kind: "complex-type", baseName: ei.typeNames[0], elems: map[string]*Element{}}
			ei.anon = bb
			byPath[e.Path] = bb
			out[name+e.Path[strings.IndexByte(e.Path, '.'):]] = bb
		}
		owner.elems[ei.name] = ei
		owner.order = append(owner.order, ei)
	}
	return out
}

// Name is the FHIR type name; "BackboneElement" (or "Element") for an
// anonymous backbone.
func (t *Type) Name() string { return t.name }

// Kind is the kind of the definition: primitive-type, complex-type or
// resource.
func (t *Type) Kind() string { return t.kind }

// Primitive is the System type values of t convert to (NotPrimitive for
// all but the FHIR primitives).
func (t *Type) Primitive() Primitive { return t.sys }

// IsQuantity reports Quantity and its specializations (Age, Duration…),
// which convert to System.Quantity.
func (t *Type) IsQuantity() bool { return t.isQuantity }

// baseType returns the parent in the type hierarchy.
func (t *Type) baseType() *Type {
	if b := t.base.Load(); b != nil {
		return b
	}
	if t.baseName == "" || t.baseName == t.name {
		return nil
	}
	b := Lookup(t.baseName)
	if b != nil {
		t.base.Store(b)
	}
	return b
}

// Elem finds a child element definition, looking through base types.
func (t *Type) Elem(name string) *Element {
	if p := t.all.Load(); p != nil {
		return (*p)[name]
	}
	// Merge the inherited elements once, so later lookups are one map
	// access; the types are immutable, so racing builders agree.
	all := map[string]*Element{}
	for x := t; x != nil; x = x.baseType() {
		for k, e := range x.elems {
			if _, dup := all[k]; !dup {
				all[k] = e
			}
		}
	}
	t.all.Store(&all)
	return all[name]
}

// Elements returns all elements, inherited ones first, in definition order.
func (t *Type) Elements() []*Element {
	if p := t.allOrder.Load(); p != nil {
		return *p
	}
	var chain []*Type
	for x := t; x != nil; x = x.baseType() {
		chain = append(chain, x)
	}
	var list []*Element
	seen := map[string]bool{}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, e := range chain[i].order {
			if !seen[e.name] {
				seen[e.name] = true
				list = append(list, e)
			}
		}
	}
	t.allOrder.Store(&list)
	return list
}

// DerivesFrom reports whether t is name or a specialization of it.
func (t *Type) DerivesFrom(name string) bool {
	for x := t; x != nil; x = x.baseType() {
		if x.name == name {
			return true
		}
	}
	return false
}

// Types resolves the element's types (by position, aligned with Keys).
func (e *Element) Types() []*Type {
	if p := e.resolved.Load(); p != nil {
		return *p
	}
	ts := make([]*Type, len(e.typeNames))
	for i, n := range e.typeNames {
		switch {
		case e.anon != nil:
			ts[i] = e.anon
		case e.contRef != "":
			ts[i] = Lookup(e.contRef)
		case strings.HasPrefix(n, "System."):
			ts[i] = nil
		default:
			ts[i] = Lookup(n)
		}
	}
	if len(ts) == 0 && e.contRef != "" {
		ts = []*Type{Lookup(e.contRef)}
	}
	e.resolved.Store(&ts)
	return ts
}

// Keys are the JSON keys the element takes: its name, or for a choice
// element name+Type for each of its types.
func (e *Element) Keys() []string { return e.keys }

// ExtKeys are the "_"-prefixed keys of the primitive extension siblings,
// aligned with Keys.
func (e *Element) ExtKeys() []string { return e.extKeys }

// ResourceType types a JSON object by its resourceType.
func ResourceType(m map[string]any) *Type {
	if rt, ok := m["resourceType"].(string); ok && profiles.IsResourceType(rt) {
		return Lookup(rt)
	}
	return nil
}

// ElemType is the i-th type of the named element of t (nil when t is
// nil or has no such element).
func (t *Type) ElemType(name string, i int) *Type {
	if t == nil {
		return nil
	}
	e := t.Elem(name)
	if e == nil {
		return nil
	}
	ts := e.Types()
	if i < len(ts) {
		return ts[i]
	}
	return nil
}

// ChoiceType finds the type of a choice key such as valueQuantity.
func (t *Type) ChoiceType(key string) *Type {
	for i := len(key) - 1; i > 0; i-- {
		if key[i] >= 'A' && key[i] <= 'Z' {
			if e := t.Elem(key[:i]); e != nil && e.choice {
				for j, k := range e.keys {
					if k == key {
						return e.Types()[j]
					}
				}
			}
		}
	}
	return nil
}
