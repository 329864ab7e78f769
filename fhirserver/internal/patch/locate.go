package patch

import (
	"reflect"
	"strings"
	"unsafe"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
)

// slot is where a node of the document lives: parent[key], or
// parent[key][index] when that member is a list. For a primitive (prim),
// key is the element's name: the value is at parent[key] and its id and
// extensions at parent["_"+key] (both at index when they are lists).
type slot struct {
	parent map[string]any // nil for the resource itself
	key    string
	index  int   // -1 when parent[key] is not a list
	up     *slot // the slot of parent
	prim   bool
}

func (s *slot) isRoot() bool { return s.parent == nil }

// steps returns the keys and indexes leading from the root to the node.
func (s *slot) steps() []any {
	var rev []any
	for x := s; x != nil && x.parent != nil; x = x.up {
		if x.index >= 0 {
			rev = append(rev, x.index)
		}
		rev = append(rev, x.key)
	}
	out := make([]any, len(rev))
	for i, v := range rev {
		out[len(rev)-1-i] = v
	}
	return out
}

// value returns the JSON at the slot (for a primitive, its value).
func (s *slot) value() any {
	v := s.parent[s.key]
	if s.index >= 0 {
		l, ok := v.([]any)
		if !ok || s.index >= len(l) {
			return nil
		}
		return l[s.index]
	}
	return v
}

// docIndex maps the objects of a document to their slots: complex
// elements by their own identity, primitives by the identity of their
// "_name" sibling object.
type docIndex struct {
	nodes map[unsafe.Pointer]*slot
	prims map[unsafe.Pointer]*slot
	undo  []func()
	work  *int
}

func identity(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// errTooMuchWork stops an index walk that exceeds the work budget.
type errTooMuchWork struct{}

func (errTooMuchWork) Error() string { return "the patch needs too much work" }

// indexDocument walks root. With inject, every primitive without a
// "_name" sibling gets an empty one for the time of one evaluation, so
// that the FHIRPath engine hands back an object whose identity locates
// it; restore removes them again. An empty sibling changes no FHIRPath
// result: it holds neither id nor extension.
func indexDocument(root map[string]any, inject bool, work *int) (*docIndex, error) {
	ix := &docIndex{nodes: map[unsafe.Pointer]*slot{}, prims: map[unsafe.Pointer]*slot{}, work: work}
	if err := ix.walk(root, &slot{index: -1}, inject); err != nil {
		ix.restore()
		return nil, err
	}
	return ix, nil
}

func (ix *docIndex) restore() {
	for i := len(ix.undo) - 1; i >= 0; i-- {
		ix.undo[i]()
	}
	ix.undo = nil
}

func (ix *docIndex) charge(n int) error {
	*ix.work += n
	if *ix.work > maxWork {
		return errTooMuchWork{}
	}
	return nil
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any, nil:
		return false
	}
	return true
}

func (ix *docIndex) walk(m map[string]any, s *slot, inject bool) error {
	if err := ix.charge(len(m) + 1); err != nil {
		return err
	}
	ix.nodes[identity(m)] = s
	var scalars []string // keys whose primitives need a sibling
	for k, v := range m {
		if base, ok := strings.CutPrefix(k, "_"); ok && base != "" {
			// the siblings of primitives: objects, or lists of them
			switch x := v.(type) {
			case map[string]any:
				ix.prims[identity(x)] = &slot{parent: m, key: base, index: -1, up: s, prim: true}
				if err := ix.walk(x, &slot{parent: m, key: k, index: -1, up: s}, false); err != nil {
					return err
				}
			case []any:
				for i, e := range x {
					if em, ok := e.(map[string]any); ok {
						ix.prims[identity(em)] = &slot{parent: m, key: base, index: i, up: s, prim: true}
						if err := ix.walk(em, &slot{parent: m, key: k, index: i, up: s}, false); err != nil {
							return err
						}
					}
				}
			}
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			if err := ix.walk(x, &slot{parent: m, key: k, index: -1, up: s}, inject); err != nil {
				return err
			}
		case []any:
			hasScalar := false
			for i, e := range x {
				switch em := e.(type) {
				case map[string]any:
					if err := ix.walk(em, &slot{parent: m, key: k, index: i, up: s}, inject); err != nil {
						return err
					}
				default:
					hasScalar = hasScalar || isScalar(em)
				}
			}
			if inject && hasScalar {
				scalars = append(scalars, k)
			}
		default:
			if inject && isScalar(x) && k != "resourceType" {
				scalars = append(scalars, k)
			}
		}
	}
	for _, k := range scalars {
		ix.inject(m, k, s)
	}
	return nil
}

// inject gives the primitives at m[k] the siblings they lack.
func (ix *docIndex) inject(m map[string]any, k string, s *slot) {
	ek := "_" + k
	old, had := m[ek]
	switch x := m[k].(type) {
	case []any:
		var sibs []any
		switch o := old.(type) {
		case nil:
			if had {
				return
			}
		case []any:
			sibs = o
		default:
			return // not FHIR JSON: leave it alone
		}
		list := make([]any, max(len(x), len(sibs)))
		copy(list, sibs)
		for i, e := range x {
			if isScalar(e) && list[i] == nil {
				marker := map[string]any{}
				ix.prims[identity(marker)] = &slot{parent: m, key: k, index: i, up: s, prim: true}
				list[i] = marker
			}
		}
		m[ek] = list
	default:
		if had {
			return // an object (already indexed) or not FHIR JSON
		}
		marker := map[string]any{}
		ix.prims[identity(marker)] = &slot{parent: m, key: k, index: -1, up: s, prim: true}
		m[ek] = marker
	}
	if had {
		ix.undo = append(ix.undo, func() { m[ek] = old })
	} else {
		ix.undo = append(ix.undo, func() { delete(m, ek) })
	}
}

// slotOf returns where a value of an evaluation lives in the document.
func (ix *docIndex) slotOf(v fhirpath.Value) *slot {
	if v.IsSystem() {
		return nil
	}
	if m, ok := v.Raw().(map[string]any); ok {
		return ix.nodes[identity(m)]
	}
	if sib := v.Sibling(); sib != nil {
		return ix.prims[identity(sib)]
	}
	return nil
}

// splitLastMember splits "Patient.name.where(use='old').given" into
// "Patient.name.where(use='old')" and "given": the expression before the
// last top-level member access and that member's name. ok is false when
// the expression does not end with a member name.
func splitLastMember(expr string) (prefix, name string, ok bool) {
	depth := 0
	last := -1
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '\'', '`', '"':
			// skip a quoted string or identifier, honouring escapes
			for i++; i < len(expr) && expr[i] != c; i++ {
				if expr[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '.':
			if depth == 0 {
				last = i
			}
		case '/':
			if i+1 < len(expr) && (expr[i+1] == '/' || expr[i+1] == '*') {
				return "", "", false // comments: do not guess
			}
		}
	}
	if last <= 0 || depth != 0 {
		return "", "", false
	}
	prefix, name = strings.TrimSpace(expr[:last]), strings.TrimSpace(expr[last+1:])
	if len(name) >= 2 && name[0] == '`' && name[len(name)-1] == '`' {
		name = name[1 : len(name)-1]
	}
	if name == "" || prefix == "" {
		return "", "", false
	}
	for _, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", "", false
		}
	}
	return prefix, name, true
}
