// Package navigate walks decoded FHIR JSON by the type model: the
// children of a node by name (choice elements by their base name,
// primitives with their "_name" siblings, untyped JSON by its keys) and
// all its children in definition order, as the nodes of package value.
package navigate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// Walk bounds a walk through the input: MaxCollection is the largest
// collection it may build; with Strict, a name the type does not have is
// an error rather than empty.
type Walk struct {
	MaxCollection int
	Strict        bool
}

// Children appends the values of the named child of v to out.
func Children(w Walk, out value.Collection, v value.Value, name string) (value.Collection, error) {
	if v.IsSystem() {
		return out, nil
	}
	vt := value.NodeType(v)
	m, ok := v.Raw().(map[string]any)
	if !ok {
		// primitives: id and extension live in the _element sibling
		if ext := v.Sibling(); ext != nil && (name == "extension" || name == "id") {
			return appendRaw(w, out, ext[name], nil, vt.ElemType(name, 0))
		}
		return out, nil
	}
	if vt == nil {
		return childrenUntyped(w, out, m, name)
	}
	e := vt.Elem(name)
	if e == nil {
		if vt.Kind() != "logical" && name != "" {
			if name[0] >= 'A' && name[0] <= 'Z' && !w.Strict {
				if model.Lookup(name) != nil {
					return out, nil // a type filter that does not match
				}
			}
			if w.Strict || vt.ChoiceType(name) != nil {
				return out, fmt.Errorf("fhirpath: %s has no element %q", vt.Name(), name)
			}
		}
		return out, nil
	}
	ts := e.Types()
	for i, key := range e.Keys() {
		var t *model.Type
		if i < len(ts) {
			t = ts[i]
		} else if len(ts) > 0 {
			t = ts[0]
		}
		raw, ok := m[key]
		var ext any
		// Only primitives have _name siblings; skip the lookup otherwise.
		if t == nil || t.Primitive() != model.NotPrimitive {
			ext = m[e.ExtKeys()[i]]
		}
		if !ok && ext == nil {
			continue
		}
		return appendRaw(w, out, raw, ext, t)
	}
	return out, nil
}

// appendRaw appends a JSON value (array or single) with its aligned
// _element sibling.
func appendRaw(w Walk, out value.Collection, raw, ext any, t *model.Type) (value.Collection, error) {
	switch x := raw.(type) {
	case []any:
		exts, _ := ext.([]any)
		if len(out)+len(x) > w.MaxCollection {
			return out, value.ErrTooLarge
		}
		if cap(out)-len(out) < len(x) {
			// grow once for the whole array (doubling keeps long walks linear)
			out = append(make(value.Collection, 0, max(len(out)+len(x), 2*cap(out))), out...)
		}
		for i, item := range x {
			var em map[string]any
			if i < len(exts) {
				em, _ = exts[i].(map[string]any)
			}
			if item == nil && em == nil {
				continue
			}
			out = append(out, value.Node(item, em, t))
		}
	case nil:
		switch y := ext.(type) {
		case map[string]any:
			out = append(out, value.Node(nil, y, t))
		case []any:
			for _, e := range y {
				if em, ok := e.(map[string]any); ok {
					out = append(out, value.Node(nil, em, t))
				}
			}
		}
	default:
		em, _ := ext.(map[string]any)
		out = append(out, value.Node(raw, em, t))
	}
	return out, nil
}

// childrenUntyped navigates JSON whose type is unknown: the key itself,
// or a choice key name+Type.
func childrenUntyped(w Walk, out value.Collection, m map[string]any, name string) (value.Collection, error) {
	if raw, ok := m[name]; ok {
		return appendRaw(w, out, raw, m["_"+name], untypedGuess(raw))
	}
	if ext, ok := m["_"+name]; ok {
		return appendRaw(w, out, nil, ext, nil)
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
	var t *model.Type
	if tn := key[len(name):]; strings.IndexByte(tn, '.') < 0 {
		// only plain type names: a key must not reach backbone paths
		t = model.Lookup(tn)
		if t == nil {
			t = model.Lookup(strings.ToLower(tn[:1]) + tn[1:])
		}
	}
	return appendRaw(w, out, m[key], m["_"+key], t)
}

func untypedGuess(raw any) *model.Type {
	if m, ok := raw.(map[string]any); ok {
		return model.ResourceType(m)
	}
	return nil
}

// AllChildren appends every child element of v, in JSON key order of the
// definition when typed (map order otherwise is random, so keys are sorted).
func AllChildren(w Walk, out value.Collection, v value.Value) (value.Collection, error) {
	if v.IsSystem() {
		return out, nil
	}
	vt := value.NodeType(v)
	m, ok := v.Raw().(map[string]any)
	if !ok {
		if ext := v.Sibling(); ext != nil {
			for _, k := range []string{"id", "extension"} {
				var err error
				if out, err = appendRaw(w, out, ext[k], nil, vt.ElemType(k, 0)); err != nil {
					return out, err
				}
			}
		}
		return out, nil
	}
	if vt != nil {
		// Typed: walk the definition, which gives a stable order without
		// sorting the keys.
		for _, e := range vt.Elements() {
			ts := e.Types()
			for i, key := range e.Keys() {
				raw, ok := m[key]
				ext, okExt := m[e.ExtKeys()[i]]
				if !ok && !okExt {
					continue
				}
				var t *model.Type
				if i < len(ts) {
					t = ts[i]
				} else if len(ts) > 0 {
					t = ts[0]
				}
				var err error
				if out, err = appendRaw(w, out, raw, ext, t); err != nil {
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
		var t *model.Type
		if vt != nil {
			if e := vt.Elem(name); e != nil {
				t = vt.ElemType(name, 0)
			} else {
				t = vt.ChoiceType(name)
			}
		} else {
			t = untypedGuess(m[name])
		}
		var err error
		if out, err = appendRaw(w, out, m[name], m["_"+name], t); err != nil {
			return out, err
		}
	}
	return out, nil
}

// sortedKeys returns map keys in order, for deterministic output.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
