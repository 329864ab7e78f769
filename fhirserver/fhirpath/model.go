package fhirpath

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/profiles"
)

// typeInfo is the compiled form of a FHIR type (or of an anonymous
// BackboneElement) from the R4 StructureDefinitions.
type typeInfo struct {
	name       string // FHIR type name; "BackboneElement" for anonymous ones
	path       string // defining path, e.g. "Patient.contact" for backbones
	kind       string // primitive-type, complex-type, resource
	baseName   string
	base       atomic.Pointer[typeInfo]
	sys        kind // System type a primitive converts to, kNone otherwise
	isQuantity bool
	elems      map[string]*elemInfo
	all        atomic.Pointer[map[string]*elemInfo] // elems including inherited ones
	order      []*elemInfo                          // own elems in definition order
	allOrder   atomic.Pointer[[]*elemInfo]          // inherited first, then own
}

// elemInfo describes one child element of a type.
type elemInfo struct {
	name      string
	choice    bool
	many      bool
	typeNames []string // FHIR type codes, in definition order
	keys      []string // JSON keys: name, or name+Type for choices
	extKeys   []string // "_"+key, the primitive extension siblings
	anon      *typeInfo
	contRef   string // contentReference path (e.g. "Questionnaire.item")
	resolved  atomic.Pointer[[]*typeInfo]
}

var typeCache struct {
	sync.RWMutex
	m map[string]*typeInfo // by type name and by backbone path
}

// systemOf maps FHIR primitive type names to the System type they
// implicitly convert to.
var systemOf = map[string]kind{
	"boolean": kBool, "integer": kInt, "positiveInt": kInt, "unsignedInt": kInt, "integer64": kInt,
	"decimal": kDec, "string": kStr, "code": kStr, "id": kStr, "markdown": kStr, "uri": kStr,
	"url": kStr, "canonical": kStr, "oid": kStr, "uuid": kStr, "base64Binary": kStr, "xhtml": kStr,
	"date": kDate, "dateTime": kDateTime, "instant": kDateTime, "time": kTime,
}

// lookupType returns the type with the given FHIR name (or backbone path).
func lookupType(name string) *typeInfo {
	typeCache.RLock()
	t, ok := typeCache.m[name]
	typeCache.RUnlock()
	if ok {
		return t
	}
	if strings.IndexByte(name, '.') >= 0 {
		root := name[:strings.IndexByte(name, '.')]
		if lookupType(root) == nil {
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
		typeCache.m = map[string]*typeInfo{}
	}
	if t, ok := typeCache.m[name]; ok && t != nil {
		return t
	}
	for k, v := range built {
		typeCache.m[k] = v
	}
	return built[name]
}

// buildType compiles a StructureDefinition into typeInfos: the type and
// its backbone elements keyed by path.
func buildType(name string, sd *profiles.StructureDefinition) map[string]*typeInfo {
	root := &typeInfo{name: name, path: sd.Type, kind: sd.Kind, elems: map[string]*elemInfo{}}
	if i := strings.LastIndexByte(sd.BaseDefinition, '/'); i >= 0 {
		root.baseName = sd.BaseDefinition[i+1:]
	}
	root.sys = systemOf[name]
	switch name {
	case "Quantity", "SimpleQuantity", "Age", "Distance", "Duration", "Count", "MoneyQuantity":
		root.isQuantity = true
	}
	out := map[string]*typeInfo{name: root}
	byPath := map[string]*typeInfo{sd.Type: root}
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
		ei := &elemInfo{name: en, many: e.Max != "0" && e.Max != "1"}
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
			bb := &typeInfo{name: ei.typeNames[0], path: sd.Type + e.Path[strings.IndexByte(e.Path, '.'):], kind: "complex-type", baseName: ei.typeNames[0], elems: map[string]*elemInfo{}}
			ei.anon = bb
			byPath[e.Path] = bb
			out[name+e.Path[strings.IndexByte(e.Path, '.'):]] = bb
		}
		owner.elems[ei.name] = ei
		owner.order = append(owner.order, ei)
	}
	return out
}

// baseType returns the parent in the type hierarchy.
func (t *typeInfo) baseType() *typeInfo {
	if b := t.base.Load(); b != nil {
		return b
	}
	if t.baseName == "" || t.baseName == t.name {
		return nil
	}
	b := lookupType(t.baseName)
	if b != nil {
		t.base.Store(b)
	}
	return b
}

// elem finds a child element definition, looking through base types.
func (t *typeInfo) elem(name string) *elemInfo {
	if p := t.all.Load(); p != nil {
		return (*p)[name]
	}
	// Merge the inherited elements once, so later lookups are one map
	// access; the types are immutable, so racing builders agree.
	all := map[string]*elemInfo{}
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

// ordered returns all elements, inherited ones first, in definition order.
func (t *typeInfo) ordered() []*elemInfo {
	if p := t.allOrder.Load(); p != nil {
		return *p
	}
	var chain []*typeInfo
	for x := t; x != nil; x = x.baseType() {
		chain = append(chain, x)
	}
	var list []*elemInfo
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

// derivesFrom reports whether t is name or a specialization of it.
func (t *typeInfo) derivesFrom(name string) bool {
	for x := t; x != nil; x = x.baseType() {
		if x.name == name {
			return true
		}
	}
	return false
}

// types resolves the element's types (by position, aligned with keys).
func (e *elemInfo) types() []*typeInfo {
	if p := e.resolved.Load(); p != nil {
		return *p
	}
	ts := make([]*typeInfo, len(e.typeNames))
	for i, n := range e.typeNames {
		switch {
		case e.anon != nil:
			ts[i] = e.anon
		case e.contRef != "":
			ts[i] = lookupType(e.contRef)
		case strings.HasPrefix(n, "System."):
			ts[i] = nil
		default:
			ts[i] = lookupType(n)
		}
	}
	if len(ts) == 0 && e.contRef != "" {
		ts = []*typeInfo{lookupType(e.contRef)}
	}
	e.resolved.Store(&ts)
	return ts
}

// resourceTypeOf types a JSON object by its resourceType.
func resourceTypeOf(m map[string]any) *typeInfo {
	if rt, ok := m["resourceType"].(string); ok && profiles.IsResourceType(rt) {
		return lookupType(rt)
	}
	return nil
}

// nodeValue wraps a decoded JSON value as a FHIR node of type ti.
func nodeValue(n any, ext map[string]any, ti *typeInfo) Value {
	if ti != nil && (ti.name == "Resource" || ti.name == "DomainResource") {
		if m, ok := n.(map[string]any); ok {
			if rt := resourceTypeOf(m); rt != nil {
				ti = rt
			}
		}
	}
	return Value{k: kNode, node: n, ext: ext, ti: ti}
}

// children appends the values of the named child of v to out.
func children(ec *evalCtx, out Collection, v Value, name string) (Collection, error) {
	if v.k != kNode {
		return out, nil
	}
	m, ok := v.node.(map[string]any)
	if !ok {
		// primitives: id and extension live in the _element sibling
		if v.ext != nil && (name == "extension" || name == "id") {
			return appendRaw(ec, out, v.ext[name], nil, v.ti.elemType(name, 0))
		}
		return out, nil
	}
	if v.ti == nil {
		return childrenUntyped(ec, out, m, name)
	}
	e := v.ti.elem(name)
	if e == nil {
		if ec != nil && v.ti.kind != "logical" && name != "" {
			if name[0] >= 'A' && name[0] <= 'Z' && !ec.strict {
				if lookupType(name) != nil {
					return out, nil // a type filter that does not match
				}
			}
			if ec.strict || choiceType(v.ti, name) != nil {
				return out, fmt.Errorf("fhirpath: %s has no element %q", v.ti.name, name)
			}
		}
		return out, nil
	}
	ts := e.types()
	for i, key := range e.keys {
		var t *typeInfo
		if i < len(ts) {
			t = ts[i]
		} else if len(ts) > 0 {
			t = ts[0]
		}
		raw, ok := m[key]
		var ext any
		// Only primitives have _name siblings; skip the lookup otherwise.
		if t == nil || t.sys != kNone {
			ext = m[e.extKeys[i]]
		}
		if !ok && ext == nil {
			continue
		}
		return appendRaw(ec, out, raw, ext, t)
	}
	return out, nil
}

func (t *typeInfo) elemType(name string, i int) *typeInfo {
	if t == nil {
		return nil
	}
	e := t.elem(name)
	if e == nil {
		return nil
	}
	ts := e.types()
	if i < len(ts) {
		return ts[i]
	}
	return nil
}

// appendRaw appends a JSON value (array or single) with its aligned
// _element sibling.
func appendRaw(ec *evalCtx, out Collection, raw, ext any, t *typeInfo) (Collection, error) {
	switch x := raw.(type) {
	case []any:
		exts, _ := ext.([]any)
		if ec != nil && len(out)+len(x) > ec.limits.MaxCollection {
			return out, errTooLarge
		}
		if cap(out)-len(out) < len(x) {
			// grow once for the whole array (doubling keeps long walks linear)
			out = append(make(Collection, 0, max(len(out)+len(x), 2*cap(out))), out...)
		}
		for i, item := range x {
			var em map[string]any
			if i < len(exts) {
				em, _ = exts[i].(map[string]any)
			}
			if item == nil && em == nil {
				continue
			}
			out = append(out, nodeValue(item, em, t))
		}
	case nil:
		switch y := ext.(type) {
		case map[string]any:
			out = append(out, nodeValue(nil, y, t))
		case []any:
			for _, e := range y {
				if em, ok := e.(map[string]any); ok {
					out = append(out, nodeValue(nil, em, t))
				}
			}
		}
	default:
		em, _ := ext.(map[string]any)
		out = append(out, nodeValue(raw, em, t))
	}
	return out, nil
}

// childrenUntyped navigates JSON whose type is unknown: the key itself,
// or a choice key name+Type.
func childrenUntyped(ec *evalCtx, out Collection, m map[string]any, name string) (Collection, error) {
	if raw, ok := m[name]; ok {
		return appendRaw(ec, out, raw, m["_"+name], untypedGuess(raw))
	}
	if ext, ok := m["_"+name]; ok {
		return appendRaw(ec, out, nil, ext, nil)
	}
	// Several matching choice keys are invalid FHIR; take the first in
	// sorted order so the result does not depend on map iteration.
	key := ""
	for k := range m {
		if len(k) > len(name) && strings.HasPrefix(k, name) && k[len(name)] >= 'A' && k[len(name)] <= 'Z' && (key == "" || k < key) {
			key = k
		}
	}
	if key == "" {
		return out, nil
	}
	var t *typeInfo
	if tn := key[len(name):]; strings.IndexByte(tn, '.') < 0 {
		// only plain type names: a key must not reach backbone paths
		t = lookupType(tn)
		if t == nil {
			t = lookupType(strings.ToLower(tn[:1]) + tn[1:])
		}
	}
	return appendRaw(ec, out, m[key], m["_"+key], t)
}

func untypedGuess(raw any) *typeInfo {
	if m, ok := raw.(map[string]any); ok {
		return resourceTypeOf(m)
	}
	return nil
}

// allChildren appends every child element of v, in JSON key order of the
// definition when typed (map order otherwise is random, so keys are sorted).
func allChildren(ec *evalCtx, out Collection, v Value) (Collection, error) {
	if v.k != kNode {
		return out, nil
	}
	m, ok := v.node.(map[string]any)
	if !ok {
		if v.ext != nil {
			for _, k := range []string{"id", "extension"} {
				var err error
				if out, err = appendRaw(ec, out, v.ext[k], nil, v.ti.elemType(k, 0)); err != nil {
					return out, err
				}
			}
		}
		return out, nil
	}
	if v.ti != nil {
		// Typed: walk the definition, which gives a stable order without
		// sorting the keys.
		for _, e := range v.ti.ordered() {
			ts := e.types()
			for i, key := range e.keys {
				raw, ok := m[key]
				ext, okExt := m[e.extKeys[i]]
				if !ok && !okExt {
					continue
				}
				var t *typeInfo
				if i < len(ts) {
					t = ts[i]
				} else if len(ts) > 0 {
					t = ts[0]
				}
				var err error
				if out, err = appendRaw(ec, out, raw, ext, t); err != nil {
					return out, err
				}
			}
		}
		return out, nil
	}
	keys := sortedKeys(m)
	for _, k := range keys {
		if k == "resourceType" || k == "fhir_comments" {
			continue
		}
		name := k
		if name[0] == '_' {
			if _, dup := m[name[1:]]; dup {
				continue
			}
			name = name[1:]
		}
		var t *typeInfo
		if v.ti != nil {
			if e := v.ti.elem(name); e != nil {
				t = v.ti.elemType(name, 0)
			} else {
				t = choiceType(v.ti, name)
			}
		} else {
			t = untypedGuess(m[name])
		}
		var err error
		if out, err = appendRaw(ec, out, m[name], m["_"+name], t); err != nil {
			return out, err
		}
	}
	return out, nil
}

// choiceType finds the type of a choice key such as valueQuantity.
func choiceType(t *typeInfo, key string) *typeInfo {
	for i := len(key) - 1; i > 0; i-- {
		if key[i] >= 'A' && key[i] <= 'Z' {
			if e := t.elem(key[:i]); e != nil && e.choice {
				for j, k := range e.keys {
					if k == key {
						return e.types()[j]
					}
				}
			}
		}
	}
	return nil
}
