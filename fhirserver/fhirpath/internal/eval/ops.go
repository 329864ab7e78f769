package eval

import (
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

type binFunc func(ec *Context, l, r value.Collection) (value.Collection, error)

// binNode evaluates both operands on the same focus, then applies op.
type binNode struct {
	op          string
	left, right Node
	fn          binFunc
}

func (n *binNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	l, err := n.left.eval(ec, in)
	if err != nil {
		return nil, err
	}
	r, err := n.right.eval(ec, in)
	if err != nil {
		return nil, err
	}
	return n.fn(ec, l, r)
}

// logicNode implements the three-valued boolean operators, evaluating the
// right side only when needed.
type logicNode struct {
	op          string
	left, right Node
}

func (n *logicNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	l, err := n.left.eval(ec, in)
	if err != nil {
		return nil, err
	}
	lb, lok, err := value.SingletonBool(l, n.op)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "and":
		if lok && !lb {
			return value.Bools(false), nil
		}
	case "or":
		if lok && lb {
			return value.Bools(true), nil
		}
	case "implies":
		if lok && !lb {
			return value.Bools(true), nil
		}
	}
	r, err := n.right.eval(ec, in)
	if err != nil {
		return nil, err
	}
	rb, rok, err := value.SingletonBool(r, n.op)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "and":
		if rok && !rb {
			return value.Bools(false), nil
		}
		if lok && rok {
			return value.Bools(true), nil
		}
	case "or":
		if rok && rb {
			return value.Bools(true), nil
		}
		if lok && rok {
			return value.Bools(false), nil
		}
	case "xor":
		if lok && rok {
			return value.Bools(lb != rb), nil
		}
	case "implies":
		if rok && rb {
			return value.Bools(true), nil
		}
		if lok && rok {
			return value.Bools(false), nil
		}
	}
	return nil, nil
}

func newBinary(op string, l, r Node) (Node, error) {
	switch op {
	case "and", "or", "xor", "implies":
		return &logicNode{op: op, left: l, right: r}, nil
	}
	fn, ok := binaryOps[op]
	if !ok {
		return nil, fmt.Errorf("unknown operator %q", op)
	}
	return &binNode{op: op, left: l, right: r, fn: fn}, nil
}

var binaryOps map[string]binFunc

func init() {
	binaryOps = map[string]binFunc{
		"=": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			eq, ok := value.EqualCollections(l, r)
			if !ok {
				return nil, nil
			}
			return value.Bools(eq), nil
		},
		"!=": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			eq, ok := value.EqualCollections(l, r)
			if !ok {
				return nil, nil
			}
			return value.Bools(!eq), nil
		},
		"~": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			return value.Bools(value.EquivalentCollections(l, r)), nil
		},
		"!~": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			return value.Bools(!value.EquivalentCollections(l, r)), nil
		},
		"<":  compareOp(func(c int) bool { return c < 0 }),
		"<=": compareOp(func(c int) bool { return c <= 0 }),
		">":  compareOp(func(c int) bool { return c > 0 }),
		">=": compareOp(func(c int) bool { return c >= 0 }),
		"|": func(ec *Context, l, r value.Collection) (value.Collection, error) {
			return value.Union(ec, l, r)
		},
		"in": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			return membership(l, r, "in")
		},
		"contains": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			return membership(r, l, "contains")
		},
		"&": func(_ *Context, l, r value.Collection) (value.Collection, error) {
			a, b := "", ""
			if v, ok, err := value.Singleton(l, "&"); err != nil {
				return nil, err
			} else if ok {
				a = v.String()
			}
			if v, ok, err := value.Singleton(r, "&"); err != nil {
				return nil, err
			} else if ok {
				b = v.String()
			}
			if len(a)+len(b) > value.MaxStringLen {
				return nil, value.ErrTooLarge
			}
			return value.Collection{value.String(a + b)}, nil
		},
		"+":   arithOp("+"),
		"-":   arithOp("-"),
		"*":   arithOp("*"),
		"/":   arithOp("/"),
		"div": arithOp("div"),
		"mod": arithOp("mod"),
	}
}

func compareOp(test func(int) bool) binFunc {
	return func(_ *Context, l, r value.Collection) (value.Collection, error) {
		a, ok, err := value.Singleton(l, "comparison")
		if err != nil || !ok {
			return nil, err
		}
		b, ok, err := value.Singleton(r, "comparison")
		if err != nil || !ok {
			return nil, err
		}
		c, ok, err := value.Compare(a, b)
		if err != nil || !ok {
			return nil, err
		}
		return value.Bools(test(c)), nil
	}
}

func membership(item, coll value.Collection, op string) (value.Collection, error) {
	v, ok, err := value.Singleton(item, op)
	if err != nil || !ok {
		return nil, err
	}
	for _, w := range coll {
		if eq, ok := value.Equal(v, w); ok && eq {
			return value.Bools(true), nil
		}
	}
	return value.Bools(false), nil
}

func arithOp(op string) binFunc {
	return func(_ *Context, l, r value.Collection) (value.Collection, error) {
		a, ok, err := value.Singleton(l, op)
		if err != nil || !ok {
			return nil, err
		}
		b, ok, err := value.Singleton(r, op)
		if err != nil || !ok {
			return nil, err
		}
		v, ok, err := value.Arith(op, value.ToSystem(a), value.ToSystem(b))
		if err != nil || !ok {
			return nil, err
		}
		return value.Collection{v}, nil
	}
}
