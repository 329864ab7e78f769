package fhirpath

import (
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// Node wraps a value of decoded FHIR JSON as a typed FHIR node, to be
// passed to Evaluate as the focus of an expression (an invariant evaluated
// on Patient.contact[0], a HumanName, a primitive). raw is the decoded
// JSON (a map for complex types and resources, a string, bool or number
// for primitives; nil for a primitive that only has its "_name" sibling);
// sibling is that "_name" object of a primitive (nil otherwise). typeName
// is a FHIR type name ("HumanName", "string", "Patient") or the path of a
// backbone element ("Patient.contact"); a map with a resourceType is typed
// by it when typeName is empty, "Resource" or "DomainResource". An unknown
// type name gives an untyped node.
func Node(raw any, sibling map[string]any, typeName string) Value {
	var ti *model.Type
	if typeName != "" {
		ti = model.Lookup(typeName)
	}
	if ti == nil {
		if m, ok := raw.(map[string]any); ok {
			ti = model.ResourceType(m)
		}
	}
	return value.Node(raw, sibling, ti)
}
