// Package search holds Kiln's SearchParameter registry and the extraction
// of typed index entries at write time (DESIGN.md, "The store").
//
// A Registry is built once from the R4 SearchParameters of package
// profiles (plus SearchParameters posted to the server, AddCustom). Each
// parameter is compiled per resource type: R4 writes multi-base
// parameters as unions ("Patient.name | Practitioner.name"), and only the
// branches that can apply to the type are kept. Extract evaluates every
// indexable parameter of a resource with the FHIRPath engine and turns
// each result item, by the parameter's type and the item's FHIR type,
// into an Entry: normalized strings, tokens, date ranges, numbers and
// quantities with their implicit precision ranges (quantities also in
// canonical UCUM units), references, URIs and composites. Entry.Keys
// gives the encoded equality strings a backend stores in one multikey
// index; ranges are compared on their bounds. Parse turns a search's
// query string into the IR (query.go) that each store compiles.
//
// The workings are in internal packages, each readable alone: paramexpr
// (reading the parameters' expressions), extract (evaluation and the
// conversion of each FHIR type), index (entries, keys and rows), fold
// (the string fold), terminology (ValueSet expansion) and syntax (the
// value syntax they share).
//
// Nothing here touches HTTP or a store: the store writes the entries in
// the same transaction as the resource version, and the search IR
// compiles queries against them.
package search
