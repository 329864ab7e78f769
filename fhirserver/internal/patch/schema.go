package patch

import (
	"strings"

	"github.com/kiln-fhir/kiln/profiles"
)

// fhirType is what the R4 definitions say about an element of a resource:
// the StructureDefinition and element path its children are defined at.
// The zero value means unknown; callers then fall back to the JSON shape.
type fhirType struct {
	sd   *profiles.StructureDefinition
	base string // e.g. "Patient", "HumanName", "Patient.contact"
}

func (t fhirType) known() bool { return t.sd != nil }

// elemInfo describes a child element of a type.
type elemInfo struct {
	ed     *profiles.ElementDefinition
	choice string // the base name of a choice element ("deceased"), "" otherwise
	code   string // the FHIR type of the child when it has a single one
}

func (e elemInfo) many() bool {
	if e.ed == nil {
		return false
	}
	if e.ed.Max != "" && e.ed.Max != "0" && e.ed.Max != "1" {
		return true
	}
	return e.ed.Base != nil && e.ed.Base.Max != "" && e.ed.Base.Max != "0" && e.ed.Base.Max != "1"
}

// typeCode returns the FHIR type code of an ElementType, mapping the
// System types of Element.id and friends to their FHIR primitive.
func typeCode(t *profiles.ElementType) string {
	if strings.HasPrefix(t.Code, "http://hl7.org/fhirpath/System.") {
		if ft := t.FHIRType(); ft != "" {
			return ft
		}
		return "string"
	}
	return t.Code
}

// typeNamed returns the type defined by the named StructureDefinition.
func typeNamed(name string) fhirType {
	if name == "" {
		return fhirType{}
	}
	sd, ok := profiles.TypeDefinition(name)
	if !ok || sd.Kind == "logical" {
		return fhirType{}
	}
	return fhirType{sd: sd, base: sd.Type}
}

// resourceType returns the type of a resource object from its resourceType.
func resourceType(m map[string]any) fhirType {
	rt, _ := m["resourceType"].(string)
	if rt == "" || !profiles.IsResourceType(rt) {
		return fhirType{}
	}
	return typeNamed(rt)
}

// upperFirst turns a type code into a choice suffix: dateTime → DateTime.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// suffixType turns a value[x] suffix back into a type code: DateTime →
// dateTime, HumanName → HumanName.
func suffixType(s string) string {
	if s == "" {
		return s
	}
	lower := strings.ToLower(s[:1]) + s[1:]
	if sd, ok := profiles.TypeDefinition(lower); ok && sd.Kind == "primitive-type" {
		return lower
	}
	return s
}

// elem finds the child of t stored under the JSON key (a plain name, or
// a choice element's name with its type suffix, e.g. deceasedBoolean).
func (t fhirType) elem(key string) (elemInfo, bool) {
	if !t.known() || key == "" {
		return elemInfo{}, false
	}
	if ed, ok := t.sd.Element(t.base + "." + key); ok {
		info := elemInfo{ed: ed}
		if len(ed.Type) == 1 {
			info.code = typeCode(&ed.Type[0])
		}
		return info, true
	}
	if ed, ok := t.sd.Element(t.base + "." + key + "[x]"); ok {
		return elemInfo{ed: ed, choice: key}, true
	}
	for i := len(key) - 1; i > 0; i-- {
		if key[i] < 'A' || key[i] > 'Z' {
			continue
		}
		ed, ok := t.sd.Element(t.base + "." + key[:i] + "[x]")
		if !ok {
			continue
		}
		for j := range ed.Type {
			if c := typeCode(&ed.Type[j]); upperFirst(c) == key[i:] {
				return elemInfo{ed: ed, choice: key[:i], code: c}, true
			}
		}
	}
	return elemInfo{}, false
}

// childType returns the type of a child element's value; node is that
// value (needed for contained resources, typed by their resourceType).
func (t fhirType) childType(info elemInfo, node any) fhirType {
	ed := info.ed
	if ed == nil {
		return fhirType{}
	}
	if ed.ContentReference != "" {
		ref := ed.ContentReference
		if i := strings.IndexByte(ref, '#'); i >= 0 {
			ref = ref[i+1:]
		}
		if _, ok := t.sd.Element(ref); ok {
			return fhirType{sd: t.sd, base: ref}
		}
		return fhirType{}
	}
	switch info.code {
	case "":
		return fhirType{}
	case "BackboneElement", "Element":
		if !strings.HasSuffix(ed.Path, "[x]") && t.hasChildren(ed.Path) {
			return fhirType{sd: t.sd, base: ed.Path}
		}
	case "Resource", "DomainResource":
		if m, ok := node.(map[string]any); ok {
			return resourceType(m)
		}
		return fhirType{}
	}
	return typeNamed(info.code)
}

func (t fhirType) hasChildren(path string) bool {
	for i := range t.sd.Elements {
		if strings.HasPrefix(t.sd.Elements[i].Path, path+".") {
			return true
		}
	}
	return false
}

// isPrimitiveType reports whether code names a FHIR primitive type.
func isPrimitiveType(code string) bool {
	if code == "" || code[0] < 'a' || code[0] > 'z' {
		return false
	}
	sd, ok := profiles.TypeDefinition(code)
	return ok && sd.Kind == "primitive-type"
}

// jsonKind is the JSON shape of a FHIR primitive type.
func jsonKind(code string) string {
	switch code {
	case "boolean":
		return "boolean"
	case "integer", "positiveInt", "unsignedInt", "decimal":
		return "number"
	}
	return "string"
}

// typeAt walks a location path from the root to find the type of the
// node it ends at. steps are object keys (string) and array indexes (int).
func typeAt(root map[string]any, steps []any) fhirType {
	t := resourceType(root)
	var node any = root
	var pending *elemInfo // a list element whose item type is still to resolve
	for _, s := range steps {
		if !t.known() {
			return fhirType{}
		}
		switch x := s.(type) {
		case int:
			l, ok := node.([]any)
			if !ok || x < 0 || x >= len(l) || pending == nil {
				return fhirType{}
			}
			node = l[x]
			t = t.childType(*pending, node)
			pending = nil
		case string:
			m, ok := node.(map[string]any)
			if !ok || pending != nil {
				return fhirType{}
			}
			node = m[x]
			var info elemInfo
			if strings.HasPrefix(x, "_") {
				// the id and extension of a primitive
				info = elemInfo{ed: &elementOfPrimitive, code: "Element"}
			} else if info, ok = t.elem(x); !ok {
				return fhirType{}
			}
			if _, isList := node.([]any); isList {
				pending = &info
				continue
			}
			t = t.childType(info, node)
		}
	}
	if pending != nil {
		return fhirType{}
	}
	return t
}

// elementOfPrimitive stands for the "_name" sibling of a primitive.
var elementOfPrimitive = profiles.ElementDefinition{Path: "Element", Max: "1"}
