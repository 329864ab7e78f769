package patch

import "strings"

// A repeating primitive is stored as two aligned lists, the values at
// obj[key] and their ids and extensions at obj["_"+key], with nulls where
// one side has nothing. These helpers keep the two aligned; a list that
// ends up empty is removed, and so is a sibling list of nulls only.

// lists returns both lists padded to the same length; exts stays nil when
// there is no sibling list.
func lists(obj map[string]any, key string) (vals, exts []any) {
	vals, _ = obj[key].([]any)
	exts, _ = obj["_"+key].([]any)
	n := max(len(vals), len(exts))
	vals = pad(vals, n)
	if exts != nil {
		exts = pad(exts, n)
	}
	return vals, exts
}

func pad(l []any, n int) []any {
	if len(l) >= n {
		return l
	}
	return append(l, make([]any, n-len(l))...)
}

func listLen(obj map[string]any, key string) int {
	vals, _ := obj[key].([]any)
	exts, _ := obj["_"+key].([]any)
	return max(len(vals), len(exts))
}

// store writes both lists back, dropping what is empty.
func store(obj map[string]any, key string, vals, exts []any) {
	allNil := func(l []any) bool {
		for _, v := range l {
			if v != nil {
				return false
			}
		}
		return true
	}
	if len(vals) == 0 || (allNil(vals) && allNil(exts)) {
		delete(obj, key)
		delete(obj, "_"+key)
		return
	}
	obj[key] = vals
	if allNil(exts) {
		delete(obj, "_"+key)
	} else {
		obj["_"+key] = exts
	}
}

func insertAt(l []any, i int, v any) []any {
	l = append(l, nil)
	copy(l[i+1:], l[i:])
	l[i] = v
	return l
}

func removeAt(l []any, i int) []any {
	return append(l[:i:i], l[i+1:]...)
}

// extValue turns a sibling map into a list item (nil stays an untyped nil).
func extValue(ext map[string]any) any {
	if ext == nil {
		return nil
	}
	return ext
}

func insertAligned(obj map[string]any, key string, i int, v any, ext map[string]any) {
	vals, exts := lists(obj, key)
	vals = insertAt(vals, i, v)
	if exts != nil || ext != nil {
		exts = insertAt(pad(exts, len(vals)-1), i, extValue(ext))
	}
	store(obj, key, vals, exts)
}

func removeAligned(obj map[string]any, key string, i int) {
	vals, exts := lists(obj, key)
	if i >= len(vals) {
		return
	}
	vals = removeAt(vals, i)
	if exts != nil {
		exts = removeAt(exts, i)
	}
	store(obj, key, vals, exts)
}

// setAligned sets the item at i, or the single value when i < 0.
func setAligned(obj map[string]any, key string, i int, v any, ext map[string]any) {
	if i < 0 {
		if v != nil {
			obj[key] = v
		} else {
			delete(obj, key)
		}
		if ext != nil {
			obj["_"+key] = ext
		} else {
			delete(obj, "_"+key)
		}
		return
	}
	vals, exts := lists(obj, key)
	if i >= len(vals) {
		return
	}
	vals[i] = v
	if exts != nil || ext != nil {
		exts = pad(exts, len(vals))
		exts[i] = extValue(ext)
	}
	store(obj, key, vals, exts)
}

func moveAligned(obj map[string]any, key string, from, to int) {
	vals, exts := lists(obj, key)
	if from >= len(vals) || to >= len(vals) || from == to {
		return
	}
	v := vals[from]
	vals = insertAt(removeAt(vals, from), to, v)
	if exts != nil {
		e := exts[from]
		exts = insertAt(removeAt(exts, from), to, e)
	}
	store(obj, key, vals, exts)
}

// siblingOf returns the "_name" object of the primitive at s, creating it
// when create is set.
func siblingOf(s *slot, create bool) map[string]any {
	ek := "_" + s.key
	if s.index < 0 {
		m, ok := s.parent[ek].(map[string]any)
		if !ok && create {
			m = map[string]any{}
			s.parent[ek] = m
		}
		return m
	}
	vals, exts := lists(s.parent, s.key)
	if s.index >= len(vals) {
		return nil
	}
	exts = pad(exts, len(vals))
	m, ok := exts[s.index].(map[string]any)
	if !ok && create {
		m = map[string]any{}
		exts[s.index] = m
		s.parent[ek] = exts
	}
	return m
}

// deleteSlot removes the element at s (a primitive with its sibling),
// then removes the objects the deletion left empty, up to the resource.
func deleteSlot(s *slot) {
	if s.isRoot() {
		return
	}
	obj := s.parent
	if base, isSibling := strings.CutPrefix(s.key, "_"); isSibling && !s.prim {
		// the id and extensions of a primitive, emptied by a deletion
		// inside them: drop them, and the primitive if it has no value
		if s.index < 0 {
			delete(obj, s.key)
		} else if vals, exts := lists(obj, base); s.index < len(vals) {
			if vals[s.index] == nil {
				removeAligned(obj, base, s.index)
			} else if exts != nil {
				exts[s.index] = nil
				store(obj, base, vals, exts)
			}
		}
	} else if s.index < 0 {
		delete(obj, s.key)
		delete(obj, "_"+s.key)
	} else {
		removeAligned(obj, s.key, s.index)
	}
	if len(obj) == 0 && s.up != nil && !s.up.isRoot() {
		deleteSlot(s.up)
	}
}
