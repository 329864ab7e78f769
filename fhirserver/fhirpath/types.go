package fhirpath

import (
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
)

// typeSpec is a type specifier: an optional namespace and a name.
type typeSpec struct {
	ns, name string
}

var systemNames = map[kind]string{
	kBool: "Boolean", kInt: "Integer", kDec: "Decimal", kStr: "String",
	kDate: "Date", kDateTime: "DateTime", kTime: "Time", kQty: "Quantity",
}

// typeOf returns the namespace and name of a value's type.
func typeOf(v Value) (string, string) {
	if v.k != kNode {
		return "System", systemNames[v.k]
	}
	if v.ti == nil {
		if _, ok := v.node.(map[string]any); ok {
			return "FHIR", "Element"
		}
		return "System", systemNames[toSystem(v).k]
	}
	return "FHIR", v.ti.Name()
}

// isType reports whether v is of type ts or a subtype of it.
func isType(v Value, ts typeSpec) bool { return isTypeMode(v, ts, true) }

// isTypeMode is isType; with inherit false, FHIR primitives only match
// their own type (as() and ofType(): a code is not returned as a string).
func isTypeMode(v Value, ts typeSpec, inherit bool) bool {
	if v.k != kNode {
		if ts.ns != "" && ts.ns != "System" {
			return false
		}
		return systemNames[v.k] == ts.name
	}
	if ts.ns == "System" {
		return false
	}
	if v.ti == nil {
		if ts.ns == "" {
			if m, ok := v.node.(map[string]any); ok {
				rt, _ := m["resourceType"].(string)
				return rt == ts.name
			}
			return systemNames[toSystem(v).k] == ts.name
		}
		return false
	}
	if v.ti.Primitive() != model.NotPrimitive && !inherit {
		// FHIR primitives match their own type only: a code is not a string.
		return v.ti.Name() == ts.name
	}
	return v.ti.DerivesFrom(ts.name)
}

// knownType reports whether a type specifier names a System or FHIR type.
func knownType(ts typeSpec) bool {
	if ts.ns != "FHIR" {
		for _, n := range systemNames {
			if n == ts.name {
				return true
			}
		}
		if ts.ns == "System" {
			return true // unknown System types simply never match
		}
	}
	return model.Lookup(ts.name) != nil
}

// typeOpNode implements the is and as operators.
type typeOpNode struct {
	isOp bool
	left node
	ts   typeSpec
}

func (n *typeOpNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	l, err := n.left.eval(ec, in)
	if err != nil || len(l) == 0 {
		return nil, err
	}
	if n.isOp {
		if len(l) > 1 {
			return nil, errSingleton("is")
		}
		return boolColl(isType(l[0], n.ts)), nil
	}
	// "as" is applied item by item: R4 search parameters use it on
	// collections (e.g. useContext.value as CodeableConcept).
	var out Collection
	for _, v := range l {
		if isType(v, n.ts) {
			out = append(out, v)
		}
	}
	return out, nil
}

// typeSpecOf turns a function argument such as Quantity or FHIR.Patient
// (parsed as a path) into a type specifier.
func typeSpecOf(n node) (typeSpec, error) {
	switch x := n.(type) {
	case *memberNode:
		return typeSpec{name: x.name}, nil
	case *chainNode:
		l, ok1 := x.left.(*memberNode)
		r, ok2 := x.right.(*memberNode)
		if ok1 && ok2 {
			return typeSpec{ns: l.name, name: r.name}, nil
		}
	}
	return typeSpec{}, fmt.Errorf("fhirpath: expected a type name")
}

// typeInfoValue builds the value type() returns: a SimpleTypeInfo or
// ClassInfo with namespace and name.
func typeInfoValue(v Value) Value {
	ns, name := typeOf(v)
	return Value{k: kNode, node: map[string]any{"namespace": ns, "name": name}}
}
