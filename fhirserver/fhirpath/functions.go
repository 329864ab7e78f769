package fhirpath

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
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
	ts   value.TypeSpec // for is/as/ofType
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
		if !value.KnownType(ts) {
			return nil, fmt.Errorf("unknown type %s", ts.Name)
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

func typeFunc(name string, in Collection, ts value.TypeSpec) (Collection, error) {
	switch name {
	case "is":
		if len(in) == 0 {
			return nil, nil
		}
		if len(in) > 1 {
			return nil, value.ErrSingleton(name + "()")
		}
		return value.Bools(value.Is(in[0], ts)), nil
	}
	// as() filters like ofType(): the core invariant dom-3 applies it to
	// descendants(), so the singleton rule of the specification would
	// make every resource with contained resources fail.
	var out Collection
	for _, v := range in {
		if value.OfType(v, ts) {
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
	return value.SingletonString(c, fn+"()")
}

func (ec *evalCtx) argInt(n node) (int64, bool, error) {
	c, err := ec.arg(n)
	if err != nil {
		return 0, false, err
	}
	return value.SingletonInt(c)
}

// inputString returns the single String input of a string function.
func inputString(in Collection, fn string) (string, bool, error) {
	v, ok, err := value.Singleton(in, fn+"()")
	if !ok || err != nil {
		return "", false, err
	}
	v = value.ToSystem(v)
	s, ok := value.AsString(v)
	if !ok {
		return "", false, fmt.Errorf("fhirpath: %s() expects a String input, got %s", fn, v.TypeName())
	}
	return s, true, nil
}

// lambdaBool evaluates criteria for item as a Boolean (empty = false).
func (ec *evalCtx) lambdaBool(n node, item Value, i int, fn string) (bool, bool, error) {
	c, err := ec.withItem(n, item, i)
	if err != nil {
		return false, false, err
	}
	b, ok, err := value.SingletonBool(c, fn)
	return b, ok, err
}

var existenceFuncs = map[string]funcDef{
	"empty": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) { return value.Bools(len(in) == 0), nil }},
	"exists": {0, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		if len(args) == 0 {
			return value.Bools(len(in) > 0), nil
		}
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.lambdaBool(args[0], v, i, "exists")
			if err != nil {
				return nil, err
			}
			if ok && b {
				return value.Bools(true), nil
			}
		}
		return value.Bools(false), nil
	}},
	"all": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.lambdaBool(args[0], v, i, "all")
			if err != nil {
				return nil, err
			}
			if !ok || !b {
				return value.Bools(false), nil
			}
		}
		return value.Bools(true), nil
	}},
	"allTrue":    {0, 0, boolAgg(func(b bool) bool { return b }, true)},
	"anyTrue":    {0, 0, boolAgg(func(b bool) bool { return b }, false)},
	"allFalse":   {0, 0, boolAgg(func(b bool) bool { return !b }, true)},
	"anyFalse":   {0, 0, boolAgg(func(b bool) bool { return !b }, false)},
	"subsetOf":   {1, 1, subsetFunc(false)},
	"supersetOf": {1, 1, subsetFunc(true)},
	"count": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		return Collection{value.Int(int64(len(in)))}, nil
	}},
	"distinct": {0, 0, func(ec *evalCtx, in Collection, _ []node) (Collection, error) {
		return value.Union(ec, in, nil)
	}},
	"isDistinct": {0, 0, func(ec *evalCtx, in Collection, _ []node) (Collection, error) {
		d, err := value.Union(ec, in, nil)
		if err != nil {
			return nil, err
		}
		return value.Bools(len(d) == len(in)), nil
	}},
	"not": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		b, ok, err := value.SingletonBool(in, "not()")
		if err != nil || !ok {
			return nil, err
		}
		return value.Bools(!b), nil
	}},
}

func boolAgg(test func(bool) bool, all bool) funcImpl {
	return func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		for _, v := range in {
			v = value.ToSystem(v)
			b, ok := value.AsBool(v)
			if !ok {
				return nil, fmt.Errorf("fhirpath: expected Boolean items, got %s", v.TypeName())
			}
			t := test(b)
			if all && !t {
				return value.Bools(false), nil
			}
			if !all && t {
				return value.Bools(true), nil
			}
		}
		return value.Bools(all), nil
	}
}

var filterFuncs = map[string]funcDef{
	"where": {1, 1, func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		var out Collection
		for i, v := range in {
			if err := ec.Check(); err != nil {
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
			if err := ec.Check(); err != nil {
				return nil, err
			}
			c, err := ec.withItem(args[0], v, i)
			if err != nil {
				return nil, err
			}
			out = append(out, c...)
			if len(out) > ec.limits.MaxCollection {
				return nil, value.ErrTooLarge
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
				if err := ec.Check(); err != nil {
					return nil, err
				}
				c, err := ec.withItem(args[0], v, i)
				if err != nil {
					return nil, err
				}
				for _, w := range c {
					// Nodes of the input are distinct by identity; this
					// keeps repeat linear on deep trees.
					if m, ok := w.Raw().(map[string]any); ok && !w.IsSystem() {
						p := reflect.ValueOf(m).UnsafePointer()
						if seen[p] {
							continue
						}
						seen[p] = true
						out = append(out, w)
						next = append(next, w)
						continue
					}
					if !value.Contains(out, w) {
						out = append(out, w)
						next = append(next, w)
					}
				}
				if len(out) > ec.limits.MaxCollection {
					return nil, value.ErrTooLarge
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
			return nil, value.ErrSingleton("iif() input")
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
			return nil, value.ErrSingleton("iif() criterion")
		}
		b, ok := false, false
		if len(c) == 1 {
			if b, ok = value.AsBool(value.ToSystem(c[0])); !ok {
				return nil, fmt.Errorf("fhirpath: iif() criterion must be Boolean")
			}
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
			if err := ec.Check(); err != nil {
				return nil, err
			}
			ec.total = total
			c, err := ec.withItem(args[0], v, i)
			if err != nil {
				return nil, err
			}
			if len(c) > ec.limits.MaxCollection {
				return nil, value.ErrTooLarge
			}
			total = c
		}
		return total, nil
	}},
}

var subsetFuncs = map[string]funcDef{
	"single": {0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		if len(in) > 1 {
			return nil, value.ErrSingleton("single()")
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
	"intersect": {1, 1, setFunc(value.Intersect)},
	"exclude":   {1, 1, setFunc(value.Exclude)},
	"union":     {1, 1, setFunc(value.Union)},
	"combine": {1, 1, withOther(func(ec *evalCtx, in, other Collection) (Collection, error) {
		if err := ec.Check(); err != nil {
			return nil, err
		}
		if len(in)+len(other) > ec.limits.MaxCollection {
			return nil, value.ErrTooLarge
		}
		out := make(Collection, 0, len(in)+len(other))
		return append(append(out, in...), other...), nil
	})},
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

// setFunc adapts a set function of package value (intersect, exclude,
// union) to a function implementation.
func setFunc(f func(value.Checker, Collection, Collection) (Collection, error)) funcImpl {
	return withOther(func(ec *evalCtx, in, other Collection) (Collection, error) { return f(ec, in, other) })
}

// subsetFunc implements subsetOf (input ⊆ argument) and, with swap,
// supersetOf (argument ⊆ input).
func subsetFunc(swap bool) funcImpl {
	return withOther(func(ec *evalCtx, in, other Collection) (Collection, error) {
		a, b := in, other
		if swap {
			a, b = other, in
		}
		ok, err := value.Subset(ec, a, b)
		if err != nil {
			return nil, err
		}
		return value.Bools(ok), nil
	})
}
