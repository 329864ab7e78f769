package value

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
)

// Walk bounds a walk through the input: MaxCollection is the largest
// collection it may build; with Strict, a name the type does not have is
// an error rather than empty.
type Walk struct {
	MaxCollection int
	Strict        bool
}

// Node wraps a decoded JSON value as a FHIR node of type ti.
func Node(n any, ext map[string]any, ti *model.Type) Value {
	if ti != nil && (ti.Name() == "Resource" || ti.Name() == "DomainResource") {
		if m, ok := n.(map[string]any); ok {
			if rt := model.ResourceType(m); rt != nil {
				ti = rt
			}
		}
	}
	return Value{k: kNode, node: n, ext: ext, ti: ti}
}

// Children appends the values of the named child of v to out.
func Children(w Walk, out Collection, v Value, name string) (Collection, error) {
	if v.k != kNode {
		return out, nil
	}
	m, ok := v.node.(map[string]any)
	if !ok {
		// primitives: id and extension live in the _element sibling
		if v.ext != nil && (name == "extension" || name == "id") {
			return appendRaw(w, out, v.ext[name], nil, v.ti.ElemType(name, 0))
		}
		return out, nil
	}
	if v.ti == nil {
		return childrenUntyped(w, out, m, name)
	}
	e := v.ti.Elem(name)
	if e == nil {
		if v.ti.Kind() != "logical" && name != "" {
			if name[0] >= 'A' && name[0] <= 'Z' && !w.Strict {
				if model.Lookup(name) != nil {
					return out, nil // a type filter that does not match
				}
			}
			if w.Strict || v.ti.ChoiceType(name) != nil {
				return out, fmt.Errorf("fhirpath: %s has no element %q", v.ti.Name(), name)
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
func appendRaw(w Walk, out Collection, raw, ext any, t *model.Type) (Collection, error) {
	switch x := raw.(type) {
	case []any:
		exts, _ := ext.([]any)
		if len(out)+len(x) > w.MaxCollection {
			return out, ErrTooLarge
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
			out = append(out, Node(item, em, t))
		}
	case nil:
		switch y := ext.(type) {
		case map[string]any:
			out = append(out, Node(nil, y, t))
		case []any:
			for _, e := range y {
				if em, ok := e.(map[string]any); ok {
					out = append(out, Node(nil, em, t))
				}
			}
		}
	default:
		em, _ := ext.(map[string]any)
		out = append(out, Node(raw, em, t))
	}
	return out, nil
}

// childrenUntyped navigates JSON whose type is unknown: the key itself,
// or a choice key name+Type.
func childrenUntyped(w Walk, out Collection, m map[string]any, name string) (Collection, error) {
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
func AllChildren(w Walk, out Collection, v Value) (Collection, error) {
	if v.k != kNode {
		return out, nil
	}
	m, ok := v.node.(map[string]any)
	if !ok {
		if v.ext != nil {
			for _, k := range []string{"id", "extension"} {
				var err error
				if out, err = appendRaw(w, out, v.ext[k], nil, v.ti.ElemType(k, 0)); err != nil {
					return out, err
				}
			}
		}
		return out, nil
	}
	if v.ti != nil {
		// Typed: walk the definition, which gives a stable order without
		// sorting the keys.
		for _, e := range v.ti.Elements() {
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
		if v.ti != nil {
			if e := v.ti.Elem(name); e != nil {
				t = v.ti.ElemType(name, 0)
			} else {
				t = v.ti.ChoiceType(name)
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
