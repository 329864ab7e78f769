// Package value holds FHIRPath's values and what the language does to
// them: a Value is a System value (Boolean, Integer, Decimal, String,
// Date, DateTime, Time, Quantity) or a node of the decoded FHIR JSON with
// its type; this package converts nodes to System values, renders values,
// compares them (=, ~, <), computes with them (operators and the math
// functions), converts between types, tests types, and applies the set
// functions under FHIRPath equality.
package value

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
	"github.com/kiln-fhir/kiln/fhirserver/internal/decimal"
)

// kind is the dynamic kind of a Value.
type kind uint8

const (
	kNone     kind = iota
	kNode          // a FHIR element, resource or primitive taken from the input JSON
	kBool          // System.Boolean
	kInt           // System.Integer
	kDec           // System.Decimal
	kStr           // System.String
	kDate          // System.Date
	kDateTime      // System.DateTime
	kTime          // System.Time
	kQty           // System.Quantity
)

// FHIRPath integers are 32-bit; results outside the range are empty.
const (
	maxInt = math.MaxInt32
	minInt = math.MinInt32
)

// Value is one item of a Collection: a System value or a FHIR node of the
// input. It is a small struct, not an interface, so that navigation does
// not allocate per item.
type Value struct {
	k    kind
	n    int64           // Integer; Boolean (0/1); scale of a Decimal or Quantity
	s    string          // String; unit of a Quantity
	r    *big.Rat        // Decimal; value of a Quantity
	d    *datetime.Value // Date, DateTime, Time
	node any             // kNode: the decoded JSON (nil for a primitive with only an _element)
	ext  map[string]any  // kNode primitive: its "_name" sibling (id, extension)
	ti   *model.Type     // kNode: its FHIR type, nil when unknown
}

// Collection is the result of an evaluation: an ordered list of values.
type Collection []Value

// Bool, Int, String and Date make System values.
func Bool(b bool) Value {
	if b {
		return Value{k: kBool, n: 1}
	}
	return Value{k: kBool}
}
func Int(n int64) Value                    { return Value{k: kInt, n: n} }
func String(s string) Value                { return Value{k: kStr, s: s} }
func decValue(r *big.Rat, scale int) Value { return Value{k: kDec, r: r, n: int64(scale)} }

// valueKinds are the kinds of Values that hold dates and times;
// primitiveDates the kinds of dates the FHIR primitives date, dateTime,
// instant and time are read as.
var (
	valueKinds     = [...]kind{datetime.Date: kDate, datetime.DateTime: kDateTime, datetime.Time: kTime}
	primitiveDates = [...]datetime.Kind{model.Date: datetime.Date, model.DateTime: datetime.DateTime, model.Time: datetime.Time}
)

func Date(d *datetime.Value) Value { return Value{k: valueKinds[d.Kind()], d: d} }

// Quantity makes a Quantity of an Integer or Decimal and a unit.
func Quantity(v Value, unit string) Value {
	switch v.k {
	case kInt:
		return Value{k: kQty, r: new(big.Rat).SetInt64(v.n), s: unit}
	case kDec:
		return Value{k: kQty, r: v.r, n: v.n, s: unit}
	}
	return Value{}
}

var (
	trueColl  = Collection{Bool(true)}
	falseColl = Collection{Bool(false)}
)

// Bools returns a one-item collection of b. It is shared: callers must
// not modify it, nor hand it out (see SharedBool).
func Bools(b bool) Collection {
	if b {
		return trueColl
	}
	return falseColl
}

// SharedBool reports whether p is the item of a collection Bools returns.
func SharedBool(p *Value) bool { return p == &trueColl[0] || p == &falseColl[0] }

// ErrTooLarge reports that an evaluation built a collection or a string
// beyond its limits.
var ErrTooLarge = errors.New("fhirpath: collection size limit exceeded")

// AsBool and AsString return the Go value of a System Boolean or String;
// ok=false for other values (FHIR nodes are not converted: see ToSystem).
func AsBool(v Value) (b, ok bool) { return v.n != 0, v.k == kBool }

func AsString(v Value) (string, bool) { return v.s, v.k == kStr }

// NodeType is the FHIR type of a node of the input; nil for System values
// and nodes of unknown type.
func NodeType(v Value) *model.Type { return v.ti }

// HasValue is hasValue(): v is a primitive of the input with a value
// (not only an id or extensions).
func HasValue(v Value) bool {
	return v.k == kNode && v.node != nil && isPrimitiveNode(v) && !v.tiQuantity()
}

func (v Value) tiQuantity() bool { return v.ti != nil && v.ti.IsQuantity() }

// GetValue is getValue(): the System value of a primitive of the input
// that has a value.
func GetValue(v Value) (Value, bool) {
	if v.k != kNode || v.node == nil || !isPrimitiveNode(v) {
		return Value{}, false
	}
	v = ToSystem(v)
	if v.k == kNode {
		return Value{}, false
	}
	return v, true
}

// Negate returns -v for numbers and quantities.
func Negate(v Value) (Value, bool) {
	switch v.k {
	case kInt:
		return Int(-v.n), true
	case kDec:
		return decValue(new(big.Rat).Neg(v.r), int(v.n)), true
	case kQty:
		w := v
		w.r = new(big.Rat).Neg(v.r)
		return w, true
	}
	return Value{}, false
}

// formatDecimal renders r with at least scale digits after the point,
// trimming nothing the literal had: 1.0 stays "1.0".
func formatDecimal(r *big.Rat, scale int) string {
	if r.IsInt() && scale == 0 {
		return r.Num().String()
	}
	if scale == 0 {
		scale = divScale(r)
	}
	return r.FloatString(scale)
}

func trimZeros(s string) string {
	if strings.IndexByte(s, '.') < 0 {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// exactAt reports whether r has at most scale fractional digits.
func exactAt(r *big.Rat, scale int) bool {
	d := new(big.Int).Set(r.Denom())
	ten := big.NewInt(10)
	p := new(big.Int).Exp(ten, big.NewInt(int64(scale)), nil)
	return new(big.Int).Mod(p, d).Sign() == 0
}

// String renders a value the way toString() does.
func (v Value) String() string {
	s, _ := toStringValue(v)
	return s
}

// toStringValue implements toString() for singletons.
func toStringValue(v Value) (string, bool) {
	v = ToSystem(v)
	switch v.k {
	case kStr:
		return v.s, true
	case kBool:
		if v.n != 0 {
			return "true", true
		}
		return "false", true
	case kInt:
		return strconv.FormatInt(v.n, 10), true
	case kDec:
		return formatDecimal(v.r, int(v.n)), true
	case kDate, kDateTime, kTime:
		return v.d.FHIRString(), true
	case kQty:
		if units.IsCalendar(v.s) {
			return formatDecimal(v.r, int(v.n)) + " " + v.s, true
		}
		return formatDecimal(v.r, int(v.n)) + " '" + v.s + "'", true
	}
	return "", false
}

// TypeName returns the qualified type name of the value, e.g.
// "System.Integer" or "FHIR.HumanName".
func (v Value) TypeName() string {
	ns, name := typeOf(v)
	return ns + "." + name
}

// MarshalJSON renders a value as FHIR JSON (complex values and primitives
// of the input) or as a JSON scalar (System values; dates and times in
// their FHIRPath string form; quantities as {"value","unit"}).
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.k {
	case kNode:
		if v.node == nil {
			return []byte("null"), nil
		}
		return json.Marshal(v.node)
	case kBool:
		return []byte(strconv.FormatBool(v.n != 0)), nil
	case kInt:
		return []byte(strconv.FormatInt(v.n, 10)), nil
	case kDec:
		return []byte(formatDecimal(v.r, int(v.n))), nil
	case kStr:
		return json.Marshal(v.s)
	case kDate, kDateTime, kTime:
		return json.Marshal(v.d.FHIRString())
	case kQty:
		var b bytes.Buffer
		b.WriteString(`{"value":`)
		b.WriteString(formatDecimal(v.r, int(v.n)))
		b.WriteString(`,"unit":`)
		u, _ := json.Marshal(v.s)
		b.Write(u)
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	return []byte("null"), nil
}

// MarshalJSON renders the collection as a JSON array.
func (c Collection) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range c {
		if i > 0 {
			b.WriteByte(',')
		}
		j, err := v.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b.Write(j)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// Raw returns the decoded JSON of a FHIR node (nil for System values).
func (v Value) Raw() any { return v.node }

// IsSystem reports whether the value is a System value rather than a node
// of the input.
func (v Value) IsSystem() bool { return v.k != kNode }

// ToSystem converts a FHIR primitive (or Quantity) node into the System
// value it implicitly converts to; other values are returned unchanged.
func ToSystem(v Value) Value {
	if v.k != kNode || v.ti == nil {
		if v.k == kNode {
			return untypedSystem(v.node, v)
		}
		return v
	}
	switch p := v.ti.Primitive(); p {
	case model.NotPrimitive:
		if v.ti.IsQuantity() {
			return quantityFromNode(v)
		}
		return v
	case model.String:
		if s, ok := v.node.(string); ok {
			return String(s)
		}
	case model.Boolean:
		if b, ok := v.node.(bool); ok {
			return Bool(b)
		}
	case model.Integer:
		if r, ok := jsonNumber(v.node); ok && r.IsInt() {
			if n := r.Num(); n.IsInt64() {
				return Int(n.Int64())
			}
		}
	case model.Decimal:
		if num, ok := v.node.(json.Number); ok {
			if r, scale, ok := readDecimal(string(num)); ok {
				return decValue(r, scale)
			}
		}
		if f, ok := v.node.(float64); ok {
			if r, scale, ok := readDecimal(strconv.FormatFloat(f, 'f', -1, 64)); ok {
				return decValue(r, scale)
			}
		}
	case model.Date, model.DateTime, model.Time:
		if s, ok := v.node.(string); ok {
			if d, err := datetime.ParseFHIR(s, primitiveDates[p]); err == nil {
				return Date(d)
			}
		}
	}
	return v
}

// untypedSystem converts a JSON scalar of unknown FHIR type.
func untypedSystem(n any, v Value) Value {
	switch x := n.(type) {
	case string:
		return String(x)
	case bool:
		return Bool(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return Int(i)
		}
		if r, scale, ok := readDecimal(string(x)); ok {
			return decValue(r, scale)
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return Int(int64(x))
		}
		r := new(big.Rat)
		if r.SetFloat64(x) != nil {
			if r, scale, ok := readDecimal(strconv.FormatFloat(x, 'f', -1, 64)); ok {
				return decValue(r, scale)
			}
		}
	}
	return v
}

// jsonNumber reads a JSON number decoded as json.Number or float64.
func jsonNumber(n any) (*big.Rat, bool) {
	switch x := n.(type) {
	case json.Number:
		return new(big.Rat).SetString(string(x))
	case float64:
		s := strconv.FormatFloat(x, 'f', -1, 64)
		return new(big.Rat).SetString(s)
	}
	return nil, false
}

// quantityFromNode converts a FHIR Quantity to a System Quantity; the
// unit is the UCUM code when the system is UCUM, otherwise the unit text.
func quantityFromNode(v Value) Value {
	m, ok := v.node.(map[string]any)
	if !ok {
		return v
	}
	var r *big.Rat
	scale := 0
	switch x := m["value"].(type) {
	case json.Number:
		r, scale, _ = readDecimal(string(x))
	case float64:
		r, scale, _ = readDecimal(strconv.FormatFloat(x, 'f', -1, 64))
	}
	if r == nil {
		return v
	}
	unit, _ := m["code"].(string)
	if sys, _ := m["system"].(string); unit != "" && sys != "" && sys != "http://unitsofmeasure.org" {
		unit = ""
	}
	if unit == "" {
		unit, _ = m["unit"].(string)
	}
	if unit == "" {
		unit = "1"
	}
	return Value{k: kQty, r: r, n: int64(scale), s: unit}
}

// ParseNumber turns an integer or decimal literal into a Value.
func ParseNumber(s string) (Value, error) {
	if !strings.Contains(s, ".") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n <= maxInt && n >= minInt {
			return Int(n), nil
		}
	}
	r, scale, ok := readDecimal(s)
	if !ok {
		return Value{}, fmt.Errorf("invalid number %q", s)
	}
	return decValue(r, scale), nil
}

// readDecimal reads decimal text into the exact value and the scale (the
// digits written after the point) a Decimal value holds.
func readDecimal(s string) (*big.Rat, int, bool) {
	d, ok := decimal.Parse(s)
	if !ok {
		return nil, 0, false
	}
	r, ok := d.Rat()
	return r, d.Scale(), ok
}

// Sibling returns the "_name" sibling object of a primitive taken from the
// input JSON (the object that holds its id and extension), or nil when the
// value is a System value, a complex node, or a primitive without one. The
// map is the decoded input itself, not a copy: its identity tells where the
// primitive lives in the document (package patch relies on that).
func (v Value) Sibling() map[string]any {
	if v.k != kNode {
		return nil
	}
	if _, ok := v.node.(map[string]any); ok {
		return nil
	}
	return v.ext
}

// Of converts a Go value into a Collection.
func Of(v any) Collection {
	switch x := v.(type) {
	case nil:
		return nil
	case Collection:
		return x
	case Value:
		return Collection{x}
	case string:
		return Collection{String(x)}
	case bool:
		return Collection{Bool(x)}
	case int:
		return Collection{Int(int64(x))}
	case int64:
		return Collection{Int(x)}
	case []any:
		out := make(Collection, 0, len(x))
		for _, i := range x {
			out = append(out, Of(i)...)
		}
		return out
	case map[string]any:
		return Collection{Node(x, nil, model.ResourceType(x))}
	}
	return Collection{untypedSystem(v, Value{})}
}

// Node wraps a decoded JSON value as a FHIR node of type ti.
func Node(n any, ext map[string]any, ti *model.Type) Value {
	if ti != nil && (ti.Name() == "Resource" || ti.Name() == "DomainResource") {
		if m, ok := n.(map[string]any); ok {
			if rt := model.ResourceType(m); rt != nil {
				ti = rt
			}
		}
	}
	return Value{k: kNode, node: n, ext: ext, ti: ti}
}
