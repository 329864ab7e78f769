package functions

import (
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// Functions from the later FHIRPath drafts that the R4 test suite uses:
// sort, precision, lowBoundary, highBoundary, comparable.
var extraFuncs = map[string]funcDef{
	"sort": {0, 8, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		type key struct {
			vals []*value.Value // nil for an empty key
		}
		keys := make([]key, len(in))
		for i, v := range in {
			if err := ec.Check(); err != nil {
				return nil, err
			}
			if len(args) == 0 {
				keys[i].vals = []*value.Value{&in[i]}
				continue
			}
			for _, a := range args {
				if operand, ok := eval.Negated(a); ok {
					a = operand
				}
				c, err := ec.WithItem(a, v, i)
				if err != nil {
					return nil, err
				}
				if len(c) > 1 {
					return nil, value.ErrSingleton("sort() key")
				}
				var kv *value.Value
				if len(c) == 1 {
					kv = &c[0]
				}
				keys[i].vals = append(keys[i].vals, kv)
			}
		}
		idx := make([]int, len(in))
		for i := range idx {
			idx[i] = i
		}
		var sortErr error
		slices.SortStableFunc(idx, func(x, y int) int {
			for j := range keys[x].vals {
				a, b := keys[x].vals[j], keys[y].vals[j]
				desc := false
				if j < len(args) {
					_, desc = eval.Negated(args[j])
				}
				var c int
				// Empty keys sort first in both directions.
				switch {
				case a == nil && b == nil:
					continue
				case a == nil:
					return -1
				case b == nil:
					return 1
				default:
					var err error
					c, _, err = value.Compare(*a, *b)
					if err != nil {
						sortErr = err
					}
				}
				if desc {
					c = -c
				}
				if c != 0 {
					return c
				}
			}
			return 0
		})
		if sortErr != nil {
			return nil, sortErr
		}
		out := make(value.Collection, len(in))
		for i, j := range idx {
			out[i] = in[j]
		}
		return out, nil
	}},
	"precision": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		v, ok, err := value.Singleton(in, "precision()")
		if err != nil || !ok {
			return nil, err
		}
		if p, ok := value.Precision(v); ok {
			return one(p)
		}
		return nil, nil
	}},
	"lowBoundary":  {0, 1, boundary(false)},
	"highBoundary": {0, 1, boundary(true)},
	"comparable": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		v, ok, err := value.Singleton(in, "comparable()")
		if err != nil || !ok {
			return nil, err
		}
		c, err := ec.Arg(args[0])
		if err != nil {
			return nil, err
		}
		w, ok, err := value.Singleton(c, "comparable()")
		if err != nil || !ok {
			return nil, err
		}
		conv, ok := value.Comparable(v, w)
		if !ok {
			return nil, nil
		}
		return value.Bools(conv), nil
	}},
}

// boundary implements lowBoundary() and, with high, highBoundary().
func boundary(high bool) eval.Func {
	return func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		v, ok, err := value.Singleton(in, "boundary")
		if err != nil || !ok {
			return nil, err
		}
		p := int64(-1)
		if len(args) == 1 {
			n, ok, err := ec.ArgInt(args[0])
			if err != nil {
				return nil, err
			}
			if ok {
				p = n
			}
		}
		if b, ok := value.Boundary(v, p, len(args) == 0, high); ok {
			return one(b)
		}
		return nil, nil
	}
}
