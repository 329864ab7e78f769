// Package patch implements the two patch formats of the FHIR R4 patch
// interaction (http.html#patch): JSON Patch (RFC 6902) and FHIRPath Patch
// (fhirpatch.html), applied to the JSON of a resource.
//
// Both functions decode the resource with json.Decoder.UseNumber, so
// numbers keep their exact text (1.50 stays 1.50), apply every operation
// to that private copy and encode the result with encoding/json without
// HTML escaping; member order is not preserved. A patch is atomic: on any
// error nothing is returned. Errors about the patch are *Error: Status 400
// for a malformed patch (invalid JSON, duplicate members, unknown or
// incomplete operations, bad JSON Pointer or FHIRPath syntax; the whole
// patch is validated before anything is applied), 422 for a well-formed
// patch that cannot be applied to this resource (a path that selects
// nothing or several elements, a failed test, an index out of range, a
// value of the wrong JSON type). Op and Desc name the failing operation.
// A resource that is not valid JSON gives a plain error (a server fault).
//
// Abuse is bounded: at most MaxOperations operations, data added by the
// operations (JSON Patch copies included) limited to a multiple of the
// size of the resource and patch, a result nested at most 1000 levels,
// and a budget of JSON nodes walked to locate FHIRPath targets;
// FHIRPathPatchContext also honours a context.
//
// # JSON Patch
//
// All six operations, RFC 6901 pointers with ~0 and ~1, "-" to append,
// array indexes without leading zeros and within bounds (add may use the
// length), members other than op, path, from and value ignored, test
// comparing values deeply with numbers compared numerically (1.5 equals
// 1.50 and 15e-1, without ever expanding exponents), and move into one of
// its own children refused. The result must be a JSON object. Checking
// that resourceType and id are unchanged is left to the caller.
//
// # FHIRPath Patch
//
// The Parameters resource holds parameters named "operation" whose parts
// are type, path, name, value, index, source and destination; a part the
// operation does not use is an error. The value is a value[x] (with its
// _value[x] sibling for a primitive's id and extensions), a resource, or
// nested parts that build a complex value: each nested part is a child
// element, named by its name, with its own value[x] or parts.
//
//   - add: path selects exactly one element; the value becomes its child
//     named name. A repeating element (per the R4 definitions, or an
//     existing JSON list) gets the value appended; a non-repeating one
//     must not exist yet. A choice element named by its base name
//     (deceased) takes the value's type as suffix (deceasedBoolean).
//     Adding "extension" or "id" to a primitive goes into its _name.
//   - insert: path selects the items of one list (or nothing, when it ends
//     with a member name whose parent exists: the list is then created);
//     index is 0..length.
//   - delete: path selects at most one element; nothing selected is a
//     no-op (the R4 text says "if found"). A primitive is deleted with its
//     _name sibling, objects and lists the deletion leaves empty are
//     removed up to the resource, and repeating primitives keep their
//     value and _name lists aligned.
//   - replace: path selects exactly one element, replaced as a whole: a
//     primitive's _name is replaced by the value's _value[x], or removed.
//     A choice element changes its suffix with the value's type.
//   - move: path selects the items of one list; source and destination
//     are indexes in it.
//
// Values are checked against the R4 definitions where the element is
// known: primitives must have their JSON type (boolean, number, string),
// complex types must be objects, repeating elements are lists, choice
// types must be allowed. Unknown elements (extensions' content, invalid
// names) are accepted as the JSON shape dictates.
//
// # Locating FHIRPath results
//
// The engine (package fhirpath) evaluates on the decoded JSON and returns
// values that wrap the decoded nodes. Objects (complex elements) are
// located by identity: a map is a reference, so one walk of the document
// records, for each map, its parent object, member name and list index.
// Primitives are plain values without identity, but the engine keeps a
// primitive's "_name" sibling object with it (Value.Sibling). Before
// evaluating a path whose result holds primitives, every primitive that
// has no sibling is given an empty one (an empty object holds no id or
// extension, so no FHIRPath result changes), the path is evaluated again,
// each primitive is located by its sibling's identity, and the added
// siblings are removed. This works for any expression (where(), indexers,
// first(), unions, contained resources through resolve()), not only for
// simple member paths.
//
// Limits: a result that is not part of the resource (a System value such
// as count(), or anything outside the document) is refused with 422; a
// primitive stored where the definitions expect a complex type (invalid
// FHIR JSON) cannot be located; types are taken from the core R4
// StructureDefinitions only (no profiles); invariants and the full
// validity of the result are left to the validation the caller runs after
// patching.
package patch
