// Package functions is FHIRPath's function library, by family: existence,
// filtering and projection, subsetting and combining (functions.go),
// conversion, string, math, utility and FHIR functions, and the functions
// of later drafts that the R4 suite uses (drafts.go). The rules for single
// values are package value's; here are the arguments, the collections and
// the evaluation of lambdas.
package functions

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// funcDef is a function of the library: how many arguments it takes,
// and its implementation.
type funcDef struct {
	min, max int
	fn       eval.Func
}

// library is every function, by name.
var library eval.Library

func init() {
	library = eval.Library{}
	for _, group := range []map[string]funcDef{existenceFuncs, filterFuncs, subsetFuncs, conversionFuncs, stringFuncs, mathFuncs, utilityFuncs, fhirFuncs, extraFuncs} {
		for name, f := range group {
			library[name] = eval.Def{Min: f.min, Max: f.max, Fn: f.fn}
		}
	}
}

// Library returns the function library. It is shared: callers must not
// modify it.
func Library() eval.Library { return library }

// inputString returns the single String input of a string function.
func inputString(in value.Collection, fn string) (string, bool, error) {
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

var existenceFuncs = map[string]funcDef{
	"empty": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		return value.Bools(len(in) == 0), nil
	}},
	"exists": {0, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		if len(args) == 0 {
			return value.Bools(len(in) > 0), nil
		}
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.LambdaBool(args[0], v, i, "exists")
			if err != nil {
				return nil, err
			}
			if ok && b {
				return value.Bools(true), nil
			}
		}
		return value.Bools(false), nil
	}},
	"all": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.LambdaBool(args[0], v, i, "all")
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
	"count": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		return value.Collection{value.Int(int64(len(in)))}, nil
	}},
	"distinct": {0, 0, func(ec *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		return value.Union(ec, in, nil)
	}},
	"isDistinct": {0, 0, func(ec *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		d, err := value.Union(ec, in, nil)
		if err != nil {
			return nil, err
		}
		return value.Bools(len(d) == len(in)), nil
	}},
	"not": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		b, ok, err := value.SingletonBool(in, "not()")
		if err != nil || !ok {
			return nil, err
		}
		return value.Bools(!b), nil
	}},
}

func boolAgg(test func(bool) bool, all bool) eval.Func {
	return func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
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
	"where": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		var out value.Collection
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			b, ok, err := ec.LambdaBool(args[0], v, i, "where")
			if err != nil {
				return nil, err
			}
			if ok && b {
				out = append(out, v)
			}
		}
		return out, nil
	}},
	"select": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		var out value.Collection
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			c, err := ec.WithItem(args[0], v, i)
			if err != nil {
				return nil, err
			}
			out = append(out, c...)
			if len(out) > ec.MaxCollection {
				return nil, value.ErrTooLarge
			}
		}
		return out, nil
	}},
	"repeat": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		var out value.Collection
		seen := map[unsafe.Pointer]bool{}
		queue := append(value.Collection(nil), in...)
		depth := 0
		for len(queue) > 0 {
			depth++
			if depth > ec.MaxDepth {
				return nil, eval.ErrTooDeep
			}
			var next value.Collection
			for i, v := range queue {
				if err := ec.Check(); err != nil {
					return nil, err
				}
				c, err := ec.WithItem(args[0], v, i)
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
				if len(out) > ec.MaxCollection {
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
	"iif": {2, 3, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		if len(in) > 1 {
			return nil, value.ErrSingleton("iif() input")
		}
		if len(in) == 1 {
			// The arguments see the input item as $this.
			defer ec.Restore(ec.Focus(in))
		}
		c, err := ec.Arg(args[0])
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
			return ec.Arg(args[1])
		}
		if len(args) == 3 {
			return ec.Arg(args[2])
		}
		return nil, nil
	}},
	"aggregate": {1, 2, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		var total value.Collection
		if len(args) == 2 {
			var err error
			if total, err = ec.Arg(args[1]); err != nil {
				return nil, err
			}
		}
		for i, v := range in {
			// Each step can be as costly as building a collection of the
			// maximum size, so cancellation is checked every time.
			if err := ec.Ctx().Err(); err != nil {
				return nil, err
			}
			if err := ec.Check(); err != nil {
				return nil, err
			}
			c, err := ec.WithTotal(args[0], v, i, total)
			if err != nil {
				return nil, err
			}
			if len(c) > ec.MaxCollection {
				return nil, value.ErrTooLarge
			}
			total = c
		}
		return total, nil
	}},
}

var subsetFuncs = map[string]funcDef{
	"single": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) > 1 {
			return nil, value.ErrSingleton("single()")
		}
		return in, nil
	}},
	"first": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) == 0 {
			return nil, nil
		}
		return in[:1:1], nil
	}},
	"last": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) == 0 {
			return nil, nil
		}
		return in[len(in)-1:], nil
	}},
	"tail": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) <= 1 {
			return nil, nil
		}
		return in[1:], nil
	}},
	"skip": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		n, ok, err := ec.ArgInt(args[0])
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
	"take": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		n, ok, err := ec.ArgInt(args[0])
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
	"combine": {1, 1, withOther(func(ec *eval.Context, in, other value.Collection) (value.Collection, error) {
		if err := ec.Check(); err != nil {
			return nil, err
		}
		if len(in)+len(other) > ec.MaxCollection {
			return nil, value.ErrTooLarge
		}
		out := make(value.Collection, 0, len(in)+len(other))
		return append(append(out, in...), other...), nil
	})},
}

// withOther adapts a function of the input and its one collection argument
// (the set functions) to a function implementation.
func withOther(f func(ec *eval.Context, in, other value.Collection) (value.Collection, error)) eval.Func {
	return func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		other, err := ec.Arg(args[0])
		if err != nil {
			return nil, err
		}
		return f(ec, in, other)
	}
}

// setFunc adapts a set function of package value (intersect, exclude,
// union) to a function implementation.
func setFunc(f func(value.Checker, value.Collection, value.Collection) (value.Collection, error)) eval.Func {
	return withOther(func(ec *eval.Context, in, other value.Collection) (value.Collection, error) { return f(ec, in, other) })
}

// subsetFunc implements subsetOf (input ⊆ argument) and, with swap,
// supersetOf (argument ⊆ input).
func subsetFunc(swap bool) eval.Func {
	return withOther(func(ec *eval.Context, in, other value.Collection) (value.Collection, error) {
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
