package fhirpath

import (
	"fmt"
	"reflect"
	"unsafe"
)

// funcImpl implements a function: in is its input collection, args its
// unevaluated argument expressions (lambdas are evaluated per item).
type funcImpl func(ec *evalCtx, in Collection, args []node) (Collection, error)

type funcDef struct {
	min, max int
	fn       funcImpl
}

var functions map[string]funcDef

func init() {
	functions = map[string]funcDef{}
	for _, group := range []map[string]funcDef{existenceFuncs, filterFuncs, subsetFuncs, conversionFuncs, stringFuncs, mathFuncs, utilityFuncs, fhirFuncs, extraFuncs} {
		for k, v := range group {
			functions[k] = v
		}
	}
}

// callNode is a resolved function call.
type callNode struct {
	name string
	def  funcDef
	args []node
	ts   typeSpec // for is/as/ofType
}

func newCall(name string, args []node) (node, error) {
	def, ok := functions[name]
	if !ok {
		return nil, fmt.Errorf("unknown function %s()", name)
	}
	if len(args) < def.min || len(args) > def.max {
		return nil, fmt.Errorf("%s() takes %d to %d arguments, got %d", name, def.min, def.max, len(args))
	}
	c := &callNode{name: name, def: def, args: args}
	switch name {
	case "is", "as", "ofType":
		ts, err := typeSpecOf(args[0])
		if err != nil {
			return nil, fmt.Errorf("%s() expects a type name", name)
		}
		c.ts = ts
		if !knownType(ts) {
			return nil, fmt.Errorf("unknown type %s", ts.name)
		}
		t := ts
		c.def.fn = func(ec *evalCtx, in Collection, _ []node) (Collection, error) {
			return typeFunc(name, in, t)
		}
	}
	return c, nil
}

func (n *callNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	return n.def.fn(ec, in, n.args)
}

func typeFunc(name string, in Collection, ts typeSpec) (Collection, error) {
	switch name {
	case "is":
		if len(in) == 0 {
			return nil, nil
		}
		if len(in) > 1 {
			return nil, errSingleton(name + "()")
		}
		return boolColl(isType(in[0], ts)), nil
	}
	// as() filters like ofType(): the core invariant dom-3 applies it to
	// descendants(), so the singleton rule of the specification would
	// make every resource with contained resources fail.
	var out Collection
	for _, v := range in {
		if isTypeMode(v, ts, false) {
			out = append(out, v)
		}
	}
	return out, nil
}

// arg evaluates a non-lambda argument against the current term focus.
func (ec *evalCtx) arg(n node) (Collection, error) {
	return n.eval(ec, ec.base)
}

func (ec *evalCtx) argString(n node, fn string) (string, bool, error) {
	c, err := ec.arg(n)
	if err != nil {
		return "", false, err
	}
	return singletonString(c, fn+"()")
}

func (ec *evalCtx) argInt(n node) (int64, bool, error) {
	c, err := ec.arg(n)
	if err != nil {
		return 0, false, err
	}
	return singletonInt(c)
}

// inputString returns the single String input of a string function.
func inputString(in Collection, fn string) (string, bool, error) {
	v, ok, err := singleton(in, fn+"()")
	if !ok || err != nil {
		return "", false, err
	}
	v = toSystem(v)
	if v.k != kStr {
		return "", false, fmt.Errorf("fhirpath: %s() expects a String input, got %s", fn, v.TypeName())
	}
	return v.s, true, nil
}

// lambdaBool evaluates criteria for item as a Boolean (empty = false).
func (ec *evalCtx) lambdaBool(n node, item Value, i int, fn string) (bool, bool, error) {
	c, err := ec.withItem(n, item, i)
	if err != nil {
		return false, false, err
	}
	b, ok, err := singletonBool(c, fn)
	return b, ok, err
}

var existenceFuncs = map[string]funcDef{
	"empty": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) { return boolColl(len(in) == 0), nil }},
	"exists": {0, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		if len(args) == 0 {
			return boolColl(len(in) > 0), nil
		}
		for i, v := range in {
			if err := ec.check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.lambdaBool(args[0], v, i, "exists")
			if err != nil {
				return nil, err
			}
			if ok && b {
				return trueColl, nil
			}
		}
		return falseColl, nil
	}},
	"all": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		for i, v := range in {
			if err := ec.check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.lambdaBool(args[0], v, i, "all")
			if err != nil {
				return nil, err
			}
			if !ok || !b {
				return falseColl, nil
			}
		}
		return trueColl, nil
	}},
	"allTrue":    {0, 0, boolAgg(func(b bool) bool { return b }, true)},
	"anyTrue":    {0, 0, boolAgg(func(b bool) bool { return b }, false)},
	"allFalse":   {0, 0, boolAgg(func(b bool) bool { return !b }, true)},
	"anyFalse":   {0, 0, boolAgg(func(b bool) bool { return !b }, false)},
	"subsetOf":   {1, 1, subsetFunc(false)},
	"supersetOf": {1, 1, subsetFunc(true)},
	"count": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		return Collection{intValue(int64(len(in)))}, nil
	}},
	"distinct": {0, 0, func(ec *evalCtx, in Collection, _ []node) (Collection, error) {
		return union(ec, in, nil)
	}},
	"isDistinct": {0, 0, func(ec *evalCtx, in Collection, _ []node) (Collection, error) {
		d, err := union(ec, in, nil)
		if err != nil {
			return nil, err
		}
		return boolColl(len(d) == len(in)), nil
	}},
	"not": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		b, ok, err := singletonBool(in, "not()")
		if err != nil || !ok {
			return nil, err
		}
		return boolColl(!b), nil
	}},
}

func boolAgg(test func(bool) bool, all bool) funcImpl {
	return func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		for _, v := range in {
			v = toSystem(v)
			if v.k != kBool {
				return nil, fmt.Errorf("fhirpath: expected Boolean items, got %s", v.TypeName())
			}
			t := test(v.n != 0)
			if all && !t {
				return falseColl, nil
			}
			if !all && t {
				return trueColl, nil
			}
		}
		return boolColl(all), nil
	}
}

// subset reports whether every item of a equals (=) some item of b.
func subset(ec *evalCtx, a, b Collection) (bool, error) {
	inB, err := memberTest(ec, b, len(a))
	if err != nil {
		return false, err
	}
	for _, v := range a {
		if err := ec.check(); err != nil {
			return false, err
		}
		if ok, err := inB(v); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

var filterFuncs = map[string]funcDef{
	"where": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		var out Collection
		for i, v := range in {
			if err := ec.check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.lambdaBool(args[0], v, i, "where")
			if err != nil {
				return nil, err
			}
			if ok && b {
				out = append(out, v)
			}
		}
		return out, nil
	}},
	"select": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		var out Collection
		for i, v := range in {
			if err := ec.check(); err != nil {
				return nil, err
			}
			c, err := ec.withItem(args[0], v, i)
			if err != nil {
				return nil, err
			}
			out = append(out, c...)
			if len(out) > ec.limits.MaxCollection {
				return nil, errTooLarge
			}
		}
		return out, nil
	}},
	"repeat": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		var out Collection
		seen := map[unsafe.Pointer]bool{}
		queue := append(Collection(nil), in...)
		depth := 0
		for len(queue) > 0 {
			depth++
			if depth > ec.limits.MaxDepth {
				return nil, errTooDeep
			}
			var next Collection
			for i, v := range queue {
				if err := ec.check(); err != nil {
					return nil, err
				}
				c, err := ec.withItem(args[0], v, i)
				if err != nil {
					return nil, err
				}
				for _, w := range c {
					// Nodes of the input are distinct by identity; this
					// keeps repeat linear on deep trees.
					if m, ok := w.node.(map[string]any); ok && w.k == kNode {
						p := reflect.ValueOf(m).UnsafePointer()
						if seen[p] {
							continue
						}
						seen[p] = true
						out = append(out, w)
						next = append(next, w)
						continue
					}
					if !containsValue(out, w) {
						out = append(out, w)
						next = append(next, w)
					}
				}
				if len(out) > ec.limits.MaxCollection {
					return nil, errTooLarge
				}
			}
			queue = next
		}
		return out, nil
	}},
	"ofType": {1, 1, nil},
	"as":     {1, 1, nil},
	"is":     {1, 1, nil},
	"iif": {2, 3, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		if len(in) > 1 {
			return nil, errSingleton("iif() input")
		}
		if len(in) == 1 {
			// The arguments see the input item as $this.
			saveBase, saveThis, saveHas := ec.base, ec.this, ec.hasThis
			ec.base, ec.this, ec.hasThis = in, in[0], true
			defer func() { ec.base, ec.this, ec.hasThis = saveBase, saveThis, saveHas }()
		}
		c, err := ec.arg(args[0])
		if err != nil {
			return nil, err
		}
		if len(c) > 1 {
			return nil, errSingleton("iif() criterion")
		}
		b, ok := false, false
		if len(c) == 1 {
			v := toSystem(c[0])
			if v.k != kBool {
				return nil, fmt.Errorf("fhirpath: iif() criterion must be Boolean")
			}
			b, ok = v.n != 0, true
		}
		if ok && b {
			return ec.arg(args[1])
		}
		if len(args) == 3 {
			return ec.arg(args[2])
		}
		return nil, nil
	}},
	"aggregate": {1, 2, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		var total Collection
		if len(args) == 2 {
			var err error
			if total, err = ec.arg(args[1]); err != nil {
				return nil, err
			}
		}
		save := ec.total
		defer func() { ec.total = save }()
		for i, v := range in {
			// Each step can be as costly as building a collection of the
			// maximum size, so cancellation is checked every time.
			if err := ec.ctx.Err(); err != nil {
				return nil, err
			}
			if err := ec.check(); err != nil {
				return nil, err
			}
			ec.total = total
			c, err := ec.withItem(args[0], v, i)
			if err != nil {
				return nil, err
			}
			if len(c) > ec.limits.MaxCollection {
				return nil, errTooLarge
			}
			total = c
		}
		return total, nil
	}},
}

var subsetFuncs = map[string]funcDef{
	"single": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		if len(in) > 1 {
			return nil, errSingleton("single()")
		}
		return in, nil
	}},
	"first": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		if len(in) == 0 {
			return nil, nil
		}
		return in[:1:1], nil
	}},
	"last": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		if len(in) == 0 {
			return nil, nil
		}
		return in[len(in)-1:], nil
	}},
	"tail": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		if len(in) <= 1 {
			return nil, nil
		}
		return in[1:], nil
	}},
	"skip": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		n, ok, err := ec.argInt(args[0])
		if err != nil || !ok {
			return nil, err
		}
		if n <= 0 {
			return in, nil
		}
		if n >= int64(len(in)) {
			return nil, nil
		}
		return in[n:], nil
	}},
	"take": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		n, ok, err := ec.argInt(args[0])
		if err != nil || !ok || n <= 0 {
			return nil, err
		}
		if n >= int64(len(in)) {
			return in, nil
		}
		return in[:n:n], nil
	}},
	"intersect": {1, 1, withOther(intersect)},
	"exclude":   {1, 1, withOther(exclude)},
	"union":     {1, 1, withOther(union)},
	"combine": {1, 1, withOther(func(ec *evalCtx, in, other Collection) (Collection, error) {
		if err := ec.check(); err != nil {
			return nil, err
		}
		if len(in)+len(other) > ec.limits.MaxCollection {
			return nil, errTooLarge
		}
		out := make(Collection, 0, len(in)+len(other))
		return append(append(out, in...), other...), nil
	})},
}

// smallSetOp is the combined size up to which the set functions compare
// items pairwise; above it they index the other collection (eqSet).
const smallSetOp = 64

// memberTest returns a test for "some item of coll equals (=) v": a plain
// scan when coll and the number of probes are small, an eqSet index
// otherwise, so set functions stay linear on large collections.
func memberTest(ec *evalCtx, coll Collection, probes int) (func(Value) (bool, error), error) {
	if len(coll)+probes <= smallSetOp {
		return func(v Value) (bool, error) { return containsValue(coll, v), nil }, nil
	}
	set, err := newEqSet(ec, coll)
	if err != nil {
		return nil, err
	}
	return func(v Value) (bool, error) { return set.has(ec, v) }, nil
}

// intersect returns the distinct items of in that equal (=) an item of
// other, in the order of in.
func intersect(ec *evalCtx, in, other Collection) (Collection, error) {
	inOther, err := memberTest(ec, other, len(in))
	if err != nil {
		return nil, err
	}
	var out Collection
	dedup := &eqSet{}
	for _, v := range in {
		if err := ec.check(); err != nil {
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

// exclude returns the items of in (duplicates and order kept) that equal
// (=) no item of other.
func exclude(ec *evalCtx, in, other Collection) (Collection, error) {
	inOther, err := memberTest(ec, other, len(in))
	if err != nil {
		return nil, err
	}
	var out Collection
	for _, v := range in {
		if err := ec.check(); err != nil {
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
// (eqBucket); a hit is confirmed with equalValues, so the answer is
// exactly that of containsValue. Complex nodes of the input are found by
// identity first, and they and unkeyed values (quantities) by comparison.
type eqSet struct {
	buckets map[string]Collection
	nodes   map[unsafe.Pointer]bool
	others  Collection
}

func newEqSet(ec *evalCtx, c Collection) (*eqSet, error) {
	s := &eqSet{buckets: make(map[string]Collection, len(c))}
	for _, v := range c {
		if err := ec.check(); err != nil {
			return nil, err
		}
		if _, err := s.add(ec, v); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// complexNode returns the identity of a complex (non-primitive) node.
func complexNode(v Value) (unsafe.Pointer, bool) {
	if m, ok := v.node.(map[string]any); ok && v.k == kNode && !isPrimitiveNode(v) {
		return reflect.ValueOf(m).UnsafePointer(), true
	}
	return nil, false
}

func (s *eqSet) has(ec *evalCtx, v Value) (bool, error) {
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
func (s *eqSet) add(ec *evalCtx, v Value) (bool, error) {
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

// containsChecked is containsValue honouring cancellation.
func containsChecked(ec *evalCtx, c Collection, v Value) (bool, error) {
	for _, w := range c {
		if err := ec.check(); err != nil {
			return false, err
		}
		if eq, ok := equalValues(w, v); ok && eq {
			return true, nil
		}
	}
	return false, nil
}

// eqBucket is a key shared by all values equal (=) to v; ok=false when
// the value has none (quantities, complex values). Dates and times are
// keyed by their datetime.EqualityKey, so that 10:00:00 and 10:00:00.000,
// or a Date and a DateTime of the same day, share a bucket; other kinds
// use valueKey.
func eqBucket(v Value) (string, bool) {
	w := toSystem(v)
	if !isDateKind(w.k) || w.d == nil {
		return valueKey(v)
	}
	return w.d.EqualityKey(), true
}

// withOther adapts a function of the input and its one collection argument
// (the set functions) to a function implementation.
func withOther(f func(ec *evalCtx, in, other Collection) (Collection, error)) funcImpl {
	return func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		other, err := ec.arg(args[0])
		if err != nil {
			return nil, err
		}
		return f(ec, in, other)
	}
}

// subsetFunc implements subsetOf (input ⊆ argument) and, with swap,
// supersetOf (argument ⊆ input).
func subsetFunc(swap bool) funcImpl {
	return withOther(func(ec *evalCtx, in, other Collection) (Collection, error) {
		a, b := in, other
		if swap {
			a, b = other, in
		}
		ok, err := subset(ec, a, b)
		if err != nil {
			return nil, err
		}
		return boolColl(ok), nil
	})
}
