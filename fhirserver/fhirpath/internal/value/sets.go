package value

import (
	"reflect"
	"unsafe"
)

// Checker is asked between steps of long loops; an error (cancellation)
// ends them.
type Checker interface {
	Check() error
}

// Union merges two collections removing duplicates (by equality).
func Union(ec Checker, l, r Collection) (Collection, error) {
	if len(l)+len(r) <= 1 {
		if len(l) == 1 {
			return l, nil
		}
		return r, nil
	}
	if (len(l) == 0 || len(r) == 0) && len(l)+len(r) <= 64 {
		// one side only (a|b where b is empty, distinct()): when it has
		// no duplicates it is the result, without a copy
		c := l
		if len(c) == 0 {
			c = r
		}
		dup := false
		for i := 1; i < len(c) && !dup; i++ {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			dup = containsNode(c[:i], c[i]) || Contains(c[:i], c[i])
		}
		if !dup {
			return c, nil
		}
	}
	out := make(Collection, 0, len(l)+len(r))
	if len(l)+len(r) > 64 {
		return unionLarge(ec, out, l, r)
	}
	for _, c := range [2]Collection{l, r} {
		for _, v := range c {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			if !containsNode(out, v) && !Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// unionLarge de-duplicates big collections in linear time: simple values
// by a normalized key, nodes of the input by identity, and only the rest
// (quantities, values equal across representations) by comparison.
func unionLarge(ec Checker, out, l, r Collection) (Collection, error) {
	keys := make(map[string]bool, len(l)+len(r))
	nodes := map[unsafe.Pointer]bool{}
	var others Collection
	for _, c := range [2]Collection{l, r} {
		for _, v := range c {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			if m, ok := v.node.(map[string]any); ok && v.k == kNode && !isPrimitiveNode(v) {
				p := reflect.ValueOf(m).UnsafePointer()
				if nodes[p] {
					continue
				}
				nodes[p] = true
				if Contains(others, v) {
					continue
				}
				others = append(others, v)
				out = append(out, v)
				continue
			}
			if v.k == kNode && v.ext != nil && v.node == nil {
				// a primitive with only an _element: identity of that element
				p := reflect.ValueOf(v.ext).UnsafePointer()
				if nodes[p] {
					continue
				}
				nodes[p] = true
			}
			if k, ok := valueKey(v); ok {
				if keys[k] {
					continue
				}
				keys[k] = true
				out = append(out, v)
				continue
			}
			if Contains(others, v) {
				continue
			}
			others = append(others, v)
			out = append(out, v)
		}
	}
	return out, nil
}

// Subset reports whether every item of a equals (=) some item of b.
func Subset(ec Checker, a, b Collection) (bool, error) {
	inB, err := memberTest(ec, b, len(a))
	if err != nil {
		return false, err
	}
	for _, v := range a {
		if err := ec.Check(); err != nil {
			return false, err
		}
		if ok, err := inB(v); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// smallSetOp is the combined size up to which the set functions compare
// items pairwise; above it they index the other collection (eqSet).
const smallSetOp = 64

// memberTest returns a test for "some item of coll equals (=) v": a plain
// scan when coll and the number of probes are small, an eqSet index
// otherwise, so set functions stay linear on large collections.
func memberTest(ec Checker, coll Collection, probes int) (func(Value) (bool, error), error) {
	if len(coll)+probes <= smallSetOp {
		return func(v Value) (bool, error) { return Contains(coll, v), nil }, nil
	}
	set, err := newEqSet(ec, coll)
	if err != nil {
		return nil, err
	}
	return func(v Value) (bool, error) { return set.has(ec, v) }, nil
}

// Intersect returns the distinct items of in that equal (=) an item of
// other, in the order of in.
func Intersect(ec Checker, in, other Collection) (Collection, error) {
	inOther, err := memberTest(ec, other, len(in))
	if err != nil {
		return nil, err
	}
	var out Collection
	dedup := &eqSet{}
	for _, v := range in {
		if err := ec.Check(); err != nil {
			return nil, err
		}
		has, err := inOther(v)
		if err != nil {
			return nil, err
		}
		if !has {
			continue
		}
		added, err := dedup.add(ec, v)
		if err != nil {
			return nil, err
		}
		if added {
			out = append(out, v)
		}
	}
	return out, nil
}

// Exclude returns the items of in (duplicates and order kept) that equal
// (=) no item of other.
func Exclude(ec Checker, in, other Collection) (Collection, error) {
	inOther, err := memberTest(ec, other, len(in))
	if err != nil {
		return nil, err
	}
	var out Collection
	for _, v := range in {
		if err := ec.Check(); err != nil {
			return nil, err
		}
		has, err := inOther(v)
		if err != nil {
			return nil, err
		}
		if !has {
			out = append(out, v)
		}
	}
	return out, nil
}

// eqSet answers "is there an item equal (=) to v" without comparing v to
// every item. Values are bucketed by a key that equal values share
// (eqBucket); a hit is confirmed with Equal, so the answer is
// exactly that of Contains. Complex nodes of the input are found by
// identity first, and they and unkeyed values (quantities) by comparison.
type eqSet struct {
	buckets map[string]Collection
	nodes   map[unsafe.Pointer]bool
	others  Collection
}

func newEqSet(ec Checker, c Collection) (*eqSet, error) {
	s := &eqSet{buckets: make(map[string]Collection, len(c))}
	for _, v := range c {
		if err := ec.Check(); err != nil {
			return nil, err
		}
		if _, err := s.add(ec, v); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *eqSet) has(ec Checker, v Value) (bool, error) {
	if p, ok := complexNode(v); ok {
		if s.nodes[p] {
			return true, nil
		}
		return containsChecked(ec, s.others, v)
	}
	if k, ok := eqBucket(v); ok {
		return containsChecked(ec, s.buckets[k], v)
	}
	return containsChecked(ec, s.others, v)
}

// add inserts v unless an equal item is present; it reports whether v
// was new. Buckets thus hold items that are not equal to each other.
func (s *eqSet) add(ec Checker, v Value) (bool, error) {
	has, err := s.has(ec, v)
	if err != nil || has {
		return false, err
	}
	if p, ok := complexNode(v); ok {
		if s.nodes == nil {
			s.nodes = map[unsafe.Pointer]bool{}
		}
		s.nodes[p] = true
		s.others = append(s.others, v)
		return true, nil
	}
	if k, ok := eqBucket(v); ok {
		if s.buckets == nil {
			s.buckets = map[string]Collection{}
		}
		s.buckets[k] = append(s.buckets[k], v)
		return true, nil
	}
	s.others = append(s.others, v)
	return true, nil
}

// containsChecked is Contains honouring cancellation.
func containsChecked(ec Checker, c Collection, v Value) (bool, error) {
	for _, w := range c {
		if err := ec.Check(); err != nil {
			return false, err
		}
		if eq, ok := Equal(w, v); ok && eq {
			return true, nil
		}
	}
	return false, nil
}
