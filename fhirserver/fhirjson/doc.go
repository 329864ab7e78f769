// Package fhirjson is the one place where incoming FHIR R4 JSON is guarded,
// structurally validated and edited.
//
// Check runs a single-pass guard (size, UTF-8, depth, duplicate keys, null,
// empty values, element-name case, "_x" siblings) and then google/fhir's R4
// unmarshaller as the structural check. null is accepted only where the FHIR
// JSON format uses it: as a placeholder inside a repeating primitive's "x"
// or "_x" array when the other array is present. SetMeta writes id and meta
// into the client's own bytes; google/fhir's Marshaller is never used (it
// mutates its input, is slow, and would not give back the client's bytes).
// Decode turns a body into the map[string]any tree that FHIRPath works on,
// exactly as encoding/json with UseNumber would, in well under half the
// time and with less than half the allocations.
//
// What google/fhir v0.7.4 checks, and what it leaves to the guard or does
// not check at all:
//
//   - Checked: unknown elements; single value vs array; primitive formats
//     (date, dateTime, instant, time, decimal, integer ranges, boolean, id,
//     code, oid, uuid, uri, base64Binary; control characters in strings);
//     codes of required bindings that the R4 protos model as enums (e.g.
//     Patient.gender "mal" is rejected); minimum cardinality ("required");
//     reference target types for literal references of the form "Type/id";
//     unknown resource types; a choice element given twice (valueString and
//     valueQuantity); all of this inside Bundle.entry.resource too.
//   - Not checked by it, so done here: duplicate keys (its map decoding
//     keeps one silently); null; empty strings, objects and arrays (it
//     accepts them, e.g. "gender":""); upper-case element names (it accepts
//     "Gender" for "gender"); "_x" members holding plain values (it reads
//     "_birthDate":"2020-01-01" as birthDate); unpaired UTF-16 surrogate
//     escapes; validation inside contained resources (it parses them but
//     never runs its validation pass there, so required elements, reference
//     types and id/code formats go unchecked); the contained-resource
//     invariants dom-2, dom-4 and dom-5; narrative XHTML (it keeps the div
//     as an unread string): every Narrative.div, wherever it is, must be
//     well-formed XML rooted at an XHTML <div>, use only the elements and
//     attributes of txt-1, hold no script or data URLs (except images) and
//     have content (txt-2); see narrative.go.
//   - Not checked at all: a JSON object given for a primitive element
//     without a "_x" sibling ("birthDate":{"id":"x"} is read as an
//     extension-only primitive); a position that is null in both the "x"
//     and the "_x" array; invariants (FHIRPath constraints) other than the
//     dom-* ones above, including dom-3 (a contained resource must be
//     referenced); bindings other than the enum-modelled required ones;
//     profiles.
//   - Quirk: its JSON library fails on numbers that overflow a float64 (a
//     leading 0 means float32), e.g. 1e400; the guard reports those with
//     their location.
//
// Cost: google/fhir parses at roughly 3-5 MB/s, so Check takes about 0.6 ms
// for a typical 2.6 KB Patient and seconds for a body near the 5 MiB limit;
// the guard itself runs at about 250 MB/s.
package fhirjson
