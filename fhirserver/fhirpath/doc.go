// Package fhirpath is Kiln's FHIRPath engine (FHIRPath N1, 2.0.0, as used
// by FHIR R4), evaluated on FHIR JSON decoded with encoding/json.
//
// An expression is parsed and resolved once by Compile into a tree of
// nodes whose functions and operators are bound at compile time; the
// result is immutable and may be shared by goroutines. Evaluate walks the
// decoded JSON directly: values are small structs (Value), FHIR nodes keep
// a pointer to their JSON and to a compiled type description taken from
// the R4 StructureDefinitions (package profiles), built lazily per type.
//
// The FHIR JSON model is followed exactly: choice elements are reached by
// their base name (Observation.value finds valueQuantity, typed Quantity),
// primitives carry their _name siblings (id, extension), resources are
// typed by resourceType, contained resources and Bundle entries are typed
// as the resource they hold.
//
// Errors the specification requires (a collection where a single item is
// needed, incomparable operands, unknown functions) are returned;
// undetermined results (dates of different precision, incommensurable
// units, division by zero, integer overflow) are empty. Limits (collection
// size, walk depth) and context cancellation bound hostile input.
//
// Deviations, each chosen for real-world expressions: the as() function
// filters a collection like ofType() instead of requiring a singleton,
// because the core invariant dom-3 applies it to descendants(); unknown
// elements are errors only for a choice element named with its type
// suffix (Observation.valueQuantity) unless WithStrict is given.
//
// This package is the API; the engine's parts are under internal/: syntax
// (lexer and grammar), eval (the compiled tree and its evaluation),
// functions (the library), value (values and what the language does to
// them), navigate (children in decoded JSON), model (the FHIR type model),
// datetime and units.
package fhirpath
