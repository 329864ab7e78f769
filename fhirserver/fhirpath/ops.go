package fhirpath

import (
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

type binFunc func(ec *evalCtx, l, r Collection) (Collection, error)

// binNode evaluates both operands on the same focus, then applies op.
type binNode struct {
	op          string
	left, right node
	fn          binFunc
}

func (n *binNode) eval(ec *evalCtx, in Collection) (Collection, error) {
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
	left, right node
}

func (n *logicNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	l, err := n.left.eval(ec, in)
	if err != nil {
		return nil, err
	}
	lb, lok, err := singletonBool(l, n.op)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "and":
		if lok && !lb {
			return falseColl, nil
		}
	case "or":
		if lok && lb {
			return trueColl, nil
		}
	case "implies":
		if lok && !lb {
			return trueColl, nil
		}
	}
	r, err := n.right.eval(ec, in)
	if err != nil {
		return nil, err
	}
	rb, rok, err := singletonBool(r, n.op)
	if err != nil {
		return nil, err
	}
	switch n.op {
	case "and":
		if rok && !rb {
			return falseColl, nil
		}
		if lok && rok {
			return trueColl, nil
		}
	case "or":
		if rok && rb {
			return trueColl, nil
		}
		if lok && rok {
			return falseColl, nil
		}
	case "xor":
		if lok && rok {
			return boolColl(lb != rb), nil
		}
	case "implies":
		if rok && rb {
			return trueColl, nil
		}
		if lok && rok {
			return falseColl, nil
		}
	}
	return nil, nil
}

func newBinary(op string, l, r node) (node, error) {
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
		"=": func(_ *evalCtx, l, r Collection) (Collection, error) {
			eq, ok := equalCollections(l, r)
			if !ok {
				return nil, nil
			}
			return boolColl(eq), nil
		},
		"!=": func(_ *evalCtx, l, r Collection) (Collection, error) {
			eq, ok := equalCollections(l, r)
			if !ok {
				return nil, nil
			}
			return boolColl(!eq), nil
		},
		"~": func(_ *evalCtx, l, r Collection) (Collection, error) {
			return boolColl(equivalentCollections(l, r)), nil
		},
		"!~": func(_ *evalCtx, l, r Collection) (Collection, error) {
			return boolColl(!equivalentCollections(l, r)), nil
		},
		"<":  compareOp(func(c int) bool { return c < 0 }),
		"<=": compareOp(func(c int) bool { return c <= 0 }),
		">":  compareOp(func(c int) bool { return c > 0 }),
		">=": compareOp(func(c int) bool { return c >= 0 }),
		"|": func(ec *evalCtx, l, r Collection) (Collection, error) {
			return union(ec, l, r)
		},
		"in": func(_ *evalCtx, l, r Collection) (Collection, error) {
			return membership(l, r, "in")
		},
		"contains": func(_ *evalCtx, l, r Collection) (Collection, error) {
			return membership(r, l, "contains")
		},
		"&": func(_ *evalCtx, l, r Collection) (Collection, error) {
			a, b := "", ""
			if v, ok, err := singleton(l, "&"); err != nil {
				return nil, err
			} else if ok {
				a, _ = toStringValue(v)
			}
			if v, ok, err := singleton(r, "&"); err != nil {
				return nil, err
			} else if ok {
				b, _ = toStringValue(v)
			}
			if len(a)+len(b) > maxStringLen {
				return nil, errTooLarge
			}
			return Collection{stringValue(a + b)}, nil
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
	return func(_ *evalCtx, l, r Collection) (Collection, error) {
		a, ok, err := singleton(l, "comparison")
		if err != nil || !ok {
			return nil, err
		}
		b, ok, err := singleton(r, "comparison")
		if err != nil || !ok {
			return nil, err
		}
		c, ok, err := compareValues(a, b)
		if err != nil || !ok {
			return nil, err
		}
		return boolColl(test(c)), nil
	}
}

func membership(item, coll Collection, op string) (Collection, error) {
	v, ok, err := singleton(item, op)
	if err != nil || !ok {
		return nil, err
	}
	for _, w := range coll {
		if eq, ok := equalValues(v, w); ok && eq {
			return trueColl, nil
		}
	}
	return falseColl, nil
}

// union merges two collections removing duplicates (by equality).
func union(ec *evalCtx, l, r Collection) (Collection, error) {
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
			if err := ec.check(); err != nil {
				return nil, err
			}
			dup = containsNode(c[:i], c[i]) || containsValue(c[:i], c[i])
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
			if err := ec.check(); err != nil {
				return nil, err
			}
			if !containsNode(out, v) && !containsValue(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// nodeIdentity returns a pointer identifying the JSON element behind a
// node: its object, or for a primitive its "_name" sibling; nil when the
// node has no identity (a bare primitive, compared by value).
func nodeIdentity(v Value) unsafe.Pointer {
	if v.k != kNode {
		return nil
	}
	if m, ok := v.node.(map[string]any); ok {
		return reflect.ValueOf(m).UnsafePointer()
	}
	if v.ext != nil {
		return reflect.ValueOf(v.ext).UnsafePointer()
	}
	return nil
}

// containsNode reports whether c holds the same input node as v.
func containsNode(c Collection, v Value) bool {
	p := nodeIdentity(v)
	if p == nil {
		return false
	}
	for _, w := range c {
		if nodeIdentity(w) == p {
			return true
		}
	}
	return false
}

// unionLarge de-duplicates big collections in linear time: simple values
// by a normalized key, nodes of the input by identity, and only the rest
// (quantities, values equal across representations) by comparison.
func unionLarge(ec *evalCtx, out, l, r Collection) (Collection, error) {
	keys := make(map[string]bool, len(l)+len(r))
	nodes := map[unsafe.Pointer]bool{}
	var others Collection
	for _, c := range [2]Collection{l, r} {
		for _, v := range c {
			if err := ec.check(); err != nil {
				return nil, err
			}
			if m, ok := v.node.(map[string]any); ok && v.k == kNode && !isPrimitiveNode(v) {
				p := reflect.ValueOf(m).UnsafePointer()
				if nodes[p] {
					continue
				}
				nodes[p] = true
				if containsValue(others, v) {
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
			if containsValue(others, v) {
				continue
			}
			others = append(others, v)
			out = append(out, v)
		}
	}
	return out, nil
}

// valueKey gives values that are equal the same key; ok=false for kinds
// whose equality needs a comparison (quantities, complex values).
func valueKey(v Value) (string, bool) {
	v = toSystem(v)
	switch v.k {
	case kBool:
		return "b" + strconv.FormatInt(v.n, 10), true
	case kInt:
		return "n" + strconv.FormatInt(v.n, 10), true
	case kDec:
		if v.r.IsInt() {
			return "n" + v.r.Num().String(), true
		}
		return "n" + v.r.RatString(), true
	case kStr:
		return "s" + v.s, true
	case kDate, kDateTime, kTime:
		return "d" + v.d.UTCString(), true
	}
	return "", false
}

func containsValue(c Collection, v Value) bool {
	for _, w := range c {
		if eq, ok := equalValues(w, v); ok && eq {
			return true
		}
	}
	return false
}

func arithOp(op string) binFunc {
	return func(_ *evalCtx, l, r Collection) (Collection, error) {
		a, ok, err := singleton(l, op)
		if err != nil || !ok {
			return nil, err
		}
		b, ok, err := singleton(r, op)
		if err != nil || !ok {
			return nil, err
		}
		v, ok, err := arith(op, toSystem(a), toSystem(b))
		if err != nil || !ok {
			return nil, err
		}
		return Collection{v}, nil
	}
}

// arith applies an arithmetic operator to two System values.
func arith(op string, a, b Value) (Value, bool, error) {
	switch {
	case a.k == kInt && b.k == kInt:
		var n int64
		switch op {
		case "+":
			n = a.n + b.n
		case "-":
			n = a.n - b.n
		case "*":
			n = a.n * b.n
		case "/":
			if b.n == 0 {
				return Value{}, false, nil
			}
			r := big.NewRat(a.n, b.n)
			return decValue(r, divScale(r)), true, nil
		case "div":
			if b.n == 0 {
				return Value{}, false, nil
			}
			n = a.n / b.n
		case "mod":
			if b.n == 0 {
				return Value{}, false, nil
			}
			n = a.n % b.n
		}
		if n > maxInt || n < minInt {
			return Value{}, false, nil
		}
		return intValue(n), true, nil
	case (a.k == kInt || a.k == kDec) && (b.k == kInt || b.k == kDec):
		x, sx, _ := numeric(a)
		y, sy, _ := numeric(b)
		r := new(big.Rat)
		scale := max(sx, sy)
		switch op {
		case "+":
			r.Add(x, y)
		case "-":
			r.Sub(x, y)
		case "*":
			r.Mul(x, y)
			scale = sx + sy
		case "/":
			if y.Sign() == 0 {
				return Value{}, false, nil
			}
			r.Quo(x, y)
			scale = divScale(r)
		case "div":
			if y.Sign() == 0 {
				return Value{}, false, nil
			}
			q := new(big.Int).Quo(new(big.Int).Mul(x.Num(), y.Denom()), new(big.Int).Mul(x.Denom(), y.Num()))
			if !q.IsInt64() || q.Int64() > maxInt || q.Int64() < minInt {
				return Value{}, false, nil // outside the Integer range
			}
			return intValue(q.Int64()), true, nil
		case "mod":
			if y.Sign() == 0 {
				return Value{}, false, nil
			}
			q := new(big.Int).Quo(new(big.Int).Mul(x.Num(), y.Denom()), new(big.Int).Mul(x.Denom(), y.Num()))
			r.Sub(x, new(big.Rat).Mul(y, new(big.Rat).SetInt(q)))
		}
		return boundDecimal(r, scale)
	case a.k == kStr && b.k == kStr && op == "+":
		if len(a.s)+len(b.s) > maxStringLen {
			return Value{}, false, errTooLarge
		}
		return stringValue(a.s + b.s), true, nil
	case isDateKind(a.k) && b.k == kQty && (op == "+" || op == "-"):
		return dateArith(op, a, b)
	case a.k == kQty && b.k == kQty:
		return quantityArith(op, a, b)
	case a.k == kQty && (b.k == kInt || b.k == kDec) && (op == "*" || op == "/"):
		return quantityArith(op, a, makeQuantity(b, "1"))
	case (a.k == kInt || a.k == kDec) && b.k == kQty && op == "*":
		return quantityArith(op, makeQuantity(a, "1"), b)
	}
	if a.k == kNode || b.k == kNode {
		return Value{}, false, nil
	}
	return Value{}, false, fmt.Errorf("fhirpath: cannot apply %s to %s and %s", op, a.TypeName(), b.TypeName())
}

// maxStringLen bounds strings built by an evaluation (concatenation,
// join, replace) so that doubling loops fail instead of exhausting memory.
const maxStringLen = 1 << 22

// Decimals are bounded as the specification's Decimal type: at most 28
// significant integer digits (larger results are empty) and at most 28
// fractional digits (rounded), which also keeps exact arithmetic cheap.
var maxDecimal = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(28), nil))

func boundDecimal(r *big.Rat, scale int) (Value, bool, error) {
	if new(big.Rat).Abs(r).Cmp(maxDecimal) >= 0 {
		return Value{}, false, nil
	}
	if scale > 28 || r.Denom().BitLen() > 96 {
		r = roundRat(r, 28)
		scale = min(scale, 28)
	}
	return decValue(r, scale), true, nil
}

func boundQuantity(q Value) (Value, bool, error) {
	d, ok, err := boundDecimal(q.r, int(q.n))
	if !ok || err != nil {
		return Value{}, ok, err
	}
	q.r, q.n = d.r, d.n
	return q, true, nil
}

// divScale is the number of digits a quotient keeps: exact when it
// terminates within 8 digits, else 8.
func divScale(r *big.Rat) int {
	for s := 0; s <= 8; s++ {
		if exactAt(r, s) {
			return s
		}
	}
	return 8
}

func dateArith(op string, a, q Value) (Value, bool, error) {
	unit := q.s
	if unit == "a" || unit == "mo" {
		return Value{}, false, fmt.Errorf("fhirpath: cannot add %q (a definite UCUM duration) to a date; use a calendar duration", unit)
	}
	unit = units.FromUCUM(unit)
	if !units.IsCalendar(unit) {
		return Value{}, false, fmt.Errorf("fhirpath: cannot add a quantity in %q to a date", q.s)
	}
	// Fractions of the unit are dropped (7.7 days adds 7 days).
	n := new(big.Int).Quo(q.r.Num(), q.r.Denom())
	if !n.IsInt64() {
		return Value{}, false, nil
	}
	amt := n.Int64()
	if op == "-" {
		amt = -amt
	}
	d, ok := a.d.Add(amt, unit)
	if !ok {
		return Value{}, false, nil
	}
	return Value{k: a.k, d: d}, true, nil
}

func quantityArith(op string, a, b Value) (Value, bool, error) {
	ua, _ := units.Normalize(a.s)
	ub, _ := units.Normalize(b.s)
	switch op {
	case "+", "-":
		if (units.IsOffset(ua) || units.IsOffset(ub)) && ua != ub {
			// 1 'K' added to a Celsius value is a difference, not an
			// absolute temperature: mixed offset units have no sum.
			return Value{}, false, nil
		}
		bv, ok := units.Convert(b.r, ub, ua)
		if !ok {
			return Value{}, false, nil
		}
		r := new(big.Rat)
		if op == "+" {
			r.Add(a.r, bv)
		} else {
			r.Sub(a.r, bv)
		}
		return boundQuantity(Value{k: kQty, r: r, n: max(a.n, b.n), s: a.s})
	case "*", "/":
		bv, unitB := b.r, ub
		if ub != ua && ub != "1" && ua != "1" {
			if c, ok := units.Convert(b.r, ub, ua); ok {
				bv, unitB = c, ua
			}
		}
		r := new(big.Rat)
		if op == "*" {
			r.Mul(a.r, bv)
		} else {
			if bv.Sign() == 0 {
				return Value{}, false, nil
			}
			r.Quo(a.r, bv)
		}
		u, ok := units.Combine(ua, unitB, op == "/")
		if !ok {
			return Value{}, false, nil
		}
		return boundQuantity(Value{k: kQty, r: r, n: max(a.n, b.n), s: strings.TrimSpace(u)})
	}
	return Value{}, false, nil
}
