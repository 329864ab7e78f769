package value

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// numeric returns the value of an Integer or Decimal as a Rat.
func numeric(v Value) (*big.Rat, int, bool) {
	switch v.k {
	case kInt:
		return new(big.Rat).SetInt64(v.n), 0, true
	case kDec:
		return v.r, int(v.n), true
	}
	return nil, 0, false
}

// Equal implements = on two items; ok=false means empty.
func Equal(a, b Value) (bool, bool) {
	if a.k == kNode && b.k == kNode {
		if !isPrimitiveNode(a) || !isPrimitiveNode(b) {
			return deepEqual(a.node, b.node, false, 0), true
		}
	}
	a, b = ToSystem(a), ToSystem(b)
	if a.k == kNode || b.k == kNode {
		return false, true
	}
	switch {
	case a.k == b.k:
		switch a.k {
		case kBool, kInt:
			return a.n == b.n, true
		case kStr:
			return a.s == b.s, true
		case kDec:
			return a.r.Cmp(b.r) == 0, true
		case kDate, kDateTime, kTime:
			c, ok := datetime.Compare(a.d, b.d)
			return c == 0, ok
		case kQty:
			c, ok := compareQuantity(a, b, true)
			return c == 0, ok
		}
	case (a.k == kInt || a.k == kDec) && (b.k == kInt || b.k == kDec):
		x, _, _ := numeric(a)
		y, _, _ := numeric(b)
		return x.Cmp(y) == 0, true
	case (a.k == kDate && b.k == kDateTime) || (a.k == kDateTime && b.k == kDate):
		c, ok := datetime.Compare(a.d, b.d)
		return c == 0, ok
	}
	return false, true
}

func isPrimitiveNode(v Value) bool {
	if v.ti != nil {
		return v.ti.Primitive() != model.NotPrimitive || v.ti.IsQuantity()
	}
	_, isMap := v.node.(map[string]any)
	return !isMap
}

// Equivalent implements ~ on two items.
func Equivalent(a, b Value) bool {
	if a.k == kNode && b.k == kNode {
		if !isPrimitiveNode(a) || !isPrimitiveNode(b) {
			return deepEqual(a.node, b.node, true, 0)
		}
	}
	a, b = ToSystem(a), ToSystem(b)
	if a.k == kNode || b.k == kNode {
		return false
	}
	switch {
	case a.k == kStr && b.k == kStr:
		return normalizeSpace(a.s) == normalizeSpace(b.s)
	case (a.k == kInt || a.k == kDec) && (b.k == kInt || b.k == kDec):
		x, sx, _ := numeric(a)
		y, sy, _ := numeric(b)
		s := min(sx, sy)
		return roundRat(x, s).Cmp(roundRat(y, s)) == 0
	case a.k == kBool && b.k == kBool:
		return a.n == b.n
	case isDateKind(a.k) && isDateKind(b.k):
		if !datetime.SamePrecision(a.d, b.d) || (a.k == kTime) != (b.k == kTime) {
			return false
		}
		c, ok := datetime.Compare(a.d, b.d)
		return ok && c == 0
	case a.k == kQty && b.k == kQty:
		c, ok := compareQuantity(a, b, false)
		return ok && c == 0
	}
	return false
}

func isDateKind(k kind) bool { return k == kDate || k == kDateTime || k == kTime }

func normalizeSpace(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// roundRat rounds half away from zero to scale digits.
func roundRat(r *big.Rat, scale int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(p))
	half := big.NewRat(1, 2)
	if x.Sign() < 0 {
		x.Sub(x, half)
	} else {
		x.Add(x, half)
	}
	q := new(big.Int).Quo(x.Num(), x.Denom())
	return new(big.Rat).SetFrac(q, p)
}

// deepEqual compares decoded JSON trees; equivalence ignores string case
// and whitespace and array order.
func deepEqual(a, b any, equiv bool, depth int) bool {
	if depth > maxCompareDepth {
		return false
	}
	depth++
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		if sameMap(x, y) {
			return true
		}
		if !equiv && len(x) != len(y) {
			return false
		}
		n := 0
		for k, v := range x {
			if k == "id" && equiv {
				continue
			}
			n++
			w, ok := y[k]
			if !ok || !deepEqual(v, w, equiv, depth) {
				return false
			}
		}
		m := 0
		for k := range y {
			if !(k == "id" && equiv) {
				m++
			}
		}
		return n == m
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !deepEqual(x[i], y[i], equiv, depth) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		if equiv {
			return ok && normalizeSpace(x) == normalizeSpace(y)
		}
		return ok && x == y
	case json.Number, float64:
		rx, _ := jsonNumber(a)
		ry, ok := jsonNumber(b)
		return ok && rx != nil && ry != nil && rx.Cmp(ry) == 0
	default:
		return a == b
	}
}

// maxCompareDepth bounds the recursion of deepEqual; deeper trees
// compare unequal rather than exhaust the stack.
const maxCompareDepth = 256

// sameMap reports whether two maps are the same object.
func sameMap(x, y map[string]any) bool {
	return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
}

// EqualCollections implements = on collections.
func EqualCollections(a, b Collection) (bool, bool) {
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	if len(a) != len(b) {
		return false, true
	}
	for i := range a {
		eq, ok := Equal(a[i], b[i])
		if !ok {
			return false, false
		}
		if !eq {
			return false, true
		}
	}
	return true, true
}

// EquivalentCollections implements ~ (order does not matter).
func EquivalentCollections(a, b Collection) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
outer:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && Equivalent(x, y) {
				used[j] = true
				continue outer
			}
		}
		return false
	}
	return true
}

// Compare implements < > <= >= on two items; ok=false is empty.
func Compare(a, b Value) (int, bool, error) {
	a, b = ToSystem(a), ToSystem(b)
	switch {
	case (a.k == kInt || a.k == kDec) && (b.k == kInt || b.k == kDec):
		x, _, _ := numeric(a)
		y, _, _ := numeric(b)
		return x.Cmp(y), true, nil
	case a.k == kStr && b.k == kStr:
		return strings.Compare(a.s, b.s), true, nil
	case isDateKind(a.k) && isDateKind(b.k) && (a.k == kTime) == (b.k == kTime):
		c, ok := datetime.Compare(a.d, b.d)
		return c, ok, nil
	case a.k == kQty && b.k == kQty:
		c, ok := compareQuantity(a, b, true)
		return c, ok, nil
	}
	return 0, false, fmt.Errorf("fhirpath: cannot compare %s with %s", a.TypeName(), b.TypeName())
}

// compareQuantity compares two quantities after unit conversion; ok=false
// when the units are not commensurable. For equality (strict), calendar
// years and months do not equal UCUM 'a' and 'mo'.
func compareQuantity(a, b Value, strict bool) (int, bool) {
	ua, ca := units.Normalize(a.s)
	ub, cb := units.Normalize(b.s)
	if strict && ca != cb && (ca || cb) {
		return 0, false
	}
	if ua == ub {
		return a.r.Cmp(b.r), true
	}
	bv, ok := units.Convert(b.r, ub, ua)
	if !ok {
		return 0, false
	}
	if !strict {
		s := int(max(a.n, b.n))
		return roundRat(a.r, s).Cmp(roundRat(bv, s)), true
	}
	return a.r.Cmp(bv), true
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

// valueKey gives values that are equal the same key; ok=false for kinds
// whose equality needs a comparison (quantities, complex values).
func valueKey(v Value) (string, bool) {
	v = ToSystem(v)
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

func Contains(c Collection, v Value) bool {
	for _, w := range c {
		if eq, ok := Equal(w, v); ok && eq {
			return true
		}
	}
	return false
}

// complexNode returns the identity of a complex (non-primitive) node.
func complexNode(v Value) (unsafe.Pointer, bool) {
	if m, ok := v.node.(map[string]any); ok && v.k == kNode && !isPrimitiveNode(v) {
		return reflect.ValueOf(m).UnsafePointer(), true
	}
	return nil, false
}

// eqBucket is a key shared by all values equal (=) to v; ok=false when
// the value has none (quantities, complex values). Dates and times are
// keyed by their datetime.EqualityKey, so that 10:00:00 and 10:00:00.000,
// or a Date and a DateTime of the same day, share a bucket; other kinds
// use valueKey.
func eqBucket(v Value) (string, bool) {
	w := ToSystem(v)
	if !isDateKind(w.k) || w.d == nil {
		return valueKey(v)
	}
	return w.d.EqualityKey(), true
}
