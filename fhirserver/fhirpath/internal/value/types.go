package value

import "github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"

// TypeSpec is a type specifier: an optional namespace and a name.
type TypeSpec struct {
	NS, Name string
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
		return "System", systemNames[ToSystem(v).k]
	}
	return "FHIR", v.ti.Name()
}

// Is reports whether v is of type ts or a subtype of it.
func Is(v Value, ts TypeSpec) bool { return isTypeMode(v, ts, true) }

// OfType reports whether v is of type ts as as() and ofType() test it:
// FHIR primitives only match their own type (a code is not a string).
func OfType(v Value, ts TypeSpec) bool { return isTypeMode(v, ts, false) }

// isTypeMode is isType; with inherit false, FHIR primitives only match
// their own type (as() and ofType(): a code is not returned as a string).
func isTypeMode(v Value, ts TypeSpec, inherit bool) bool {
	if v.k != kNode {
		if ts.NS != "" && ts.NS != "System" {
			return false
		}
		return systemNames[v.k] == ts.Name
	}
	if ts.NS == "System" {
		return false
	}
	if v.ti == nil {
		if ts.NS == "" {
			if m, ok := v.node.(map[string]any); ok {
				rt, _ := m["resourceType"].(string)
				return rt == ts.Name
			}
			return systemNames[ToSystem(v).k] == ts.Name
		}
		return false
	}
	if v.ti.Primitive() != model.NotPrimitive && !inherit {
		// FHIR primitives match their own type only: a code is not a string.
		return v.ti.Name() == ts.Name
	}
	return v.ti.DerivesFrom(ts.Name)
}

// KnownType reports whether a type specifier names a System or FHIR type.
func KnownType(ts TypeSpec) bool {
	if ts.NS != "FHIR" {
		for _, n := range systemNames {
			if n == ts.Name {
				return true
			}
		}
		if ts.NS == "System" {
			return true // unknown System types simply never match
		}
	}
	return model.Lookup(ts.Name) != nil
}

// TypeInfo builds the value type() returns: a SimpleTypeInfo or
// ClassInfo with namespace and name.
func TypeInfo(v Value) Value {
	ns, name := typeOf(v)
	return Value{k: kNode, node: map[string]any{"namespace": ns, "name": name}}
}
