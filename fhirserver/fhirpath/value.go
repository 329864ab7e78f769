package fhirpath

import "github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"

// Value is one item of a Collection: a System value (Boolean, Integer,
// Decimal, String, Date, DateTime, Time, Quantity) or a node of the input
// FHIR JSON with its type. It is a small struct, not an interface, so
// that navigation does not allocate per item.
type Value = value.Value

// Collection is the result of an evaluation: an ordered list of values.
type Collection = value.Collection
