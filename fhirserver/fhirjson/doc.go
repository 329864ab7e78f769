// Package fhirjson is the one place where incoming FHIR R4 JSON is guarded,
// structurally validated and edited.
//
// Check runs a single-pass guard (size, UTF-8, depth, duplicate keys, null,
// empty values, element-name case, "_x" siblings) and then the structural
// R4 check (structure.go): a second single pass over the same bytes that
// walks the element model of internal/model, derived from the embedded R4
// definitions. null is accepted only where the FHIR JSON format uses it:
// as a placeholder inside a repeating primitive's "x" or "_x" array when
// the other array is present. SetMeta writes id and meta into the client's
// own bytes. Decode turns a body into the map[string]any tree that
// FHIRPath works on, exactly as encoding/json with UseNumber would, in well
// under half the time and with less than half the allocations.
//
// The structural check reports:
//
//   - unknown elements, per type: choice types (valueString for value[x]),
//     "_x" companions and their members (id, extension), resourceType
//     naming an unknown or abstract type, also in contained resources,
//     Bundle entries and Parameters;
//   - the wrong JSON type (string, number, boolean, object), and an array
//     where the element does not repeat or a single value where it does;
//   - primitive formats: id, code, oid, uuid, uri/url/canonical (what Go's
//     url.Parse accepts), date, dateTime, instant, time (with real calendar
//     days), decimal, the ranges of integer, positiveInt and unsignedInt,
//     boolean, base64Binary, control characters and a 1 MB limit in string;
//   - codes of required bindings whose value set the embedded terminology
//     enumerates (Patient.gender "mal"), compared exactly;
//   - required elements (minimum cardinality 1), reference target types of
//     literal references "Type/id", one type per choice element, "x" and
//     "_x" arrays of the same length;
//   - in contained resources, the invariants dom-2, dom-4 and dom-5; and
//     every Narrative.div is checked as XHTML (narrative.go).
//
// Not checked here: invariants other than those, bindings other than the
// required ones, profiles; a position that is null in both "x" and "_x".
// Those are the profile validator's (profiles/validate), or not checked.
//
// Until f7dada6 the structural check was google/fhir's (v0.7.4) proto
// decode and validation; the differential tests hold the two to the same
// answers and list where they deliberately differ (differential_test.go,
// docs/architecture.md).
//
// Cost: the guard and the structural check together run at about
// 100 MB/s and allocate the same few kilobytes whatever the body's size:
// about 20 µs for a typical 2.6 KB Patient and 50 ms near the 5 MiB limit.
package fhirjson
