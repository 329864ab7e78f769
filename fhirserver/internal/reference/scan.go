package reference

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kiln-fhir/kiln/profiles"
)

// refSpan locates a value to rewrite: res[start:end] is the quoted string.
type refSpan struct {
	start, end int
	kind       valueKind
}

// valueKind is what a member's string value is to the rewrite.
type valueKind uint8

const (
	otherValue     valueKind = iota // kept as it is
	refValue                        // a "reference"
	linkValue                       // a link element's (uri, url, canonical, oid, uuid)
	narrativeValue                  // a narrative's "div"
)

// maxScanDepth matches encoding/json's nesting limit, so the scanner
// refuses exactly the deep documents the decoder used to refuse.
const maxScanDepth = 10000

// scanReferences checks that b is one JSON value (surrounded by optional
// whitespace) and appends the spans of the string values of members whose
// decoded key is "reference". It is iterative, so deep nesting cannot
// exhaust the stack, and every step advances, so it always ends.
//
// Three R4 elements named "reference" are uris, not a Reference's
// reference: DetectedIssue.reference, Expression.reference and
// Immunization.education.reference. Their objects are told apart by their
// members (see notReference) once the object closes, and their values are
// links.
//
// With links, it also appends the values of link elements and narratives
// (see Rewrite), with their kind.
func scanReferences(b []byte, spans []refSpan, links bool) ([]refSpan, bool) {
	const (
		wantValue  = iota // a value is next
		wantKey           // a member's key is next (after '{' or ',')
		afterValue        // a ',' or a closing bracket is next, or the end
	)
	var stack []byte      // open containers: '{' or '['
	var kinds []valueKind // by container: the kind of an array's elements
	var marks []uint8     // by container: notReferenceMark, inEducation
	var pending []pendingRef
	mode := wantValue
	kind := otherValue // of the value about to be scanned
	education := false // the value about to be scanned is an "education" member's
	pop := func() {
		n := len(stack) - 1
		stack, kinds, marks = stack[:n], kinds[:n], marks[:n]
	}
	// closeObject settles the "reference" members of the object that
	// closes, and pops it.
	closeObject := func() {
		d := len(stack)
		for len(pending) > 0 && pending[len(pending)-1].depth == d {
			at := pending[len(pending)-1].span
			pending = pending[:len(pending)-1]
			if marks[d-1] != 0 {
				spans[at].kind = otherValue
				if links {
					spans[at].kind = linkValue
				}
			}
		}
		pop()
	}
	i := skipSpace(b, 0)
	for {
		switch mode {
		case wantValue:
			if i >= len(b) {
				return spans, false
			}
			switch c := b[i]; {
			case c == '{' || c == '[':
				if len(stack) >= maxScanDepth {
					return spans, false
				}
				// An array of uris holds links; nothing else is
				// inherited by what a container holds.
				elem := otherValue
				if c == '[' && kind == linkValue {
					elem = linkValue
				}
				var mark uint8
				if education || len(stack) > 0 && stack[len(stack)-1] == '[' && marks[len(marks)-1]&inEducation != 0 {
					mark = inEducation
				}
				stack, kinds, marks = append(stack, c), append(kinds, elem), append(marks, mark)
				i = skipSpace(b, i+1)
				closer := byte('}')
				if c == '[' {
					closer = ']'
				}
				if i < len(b) && b[i] == closer {
					pop()
					i++
					mode = afterValue
				} else if c == '{' {
					mode = wantKey
				} else {
					kind = elem
					continue
				}
			case c == '"':
				end, ok := scanString(b, i)
				if !ok {
					return spans, false
				}
				if kind != otherValue {
					spans = append(spans, refSpan{i, end, kind})
					if kind == refValue {
						pending = append(pending, pendingRef{len(stack), len(spans) - 1})
					}
				}
				i = end
				mode = afterValue
			case c == '-' || ('0' <= c && c <= '9'):
				end, ok := scanNumber(b, i)
				if !ok {
					return spans, false
				}
				i = end
				mode = afterValue
			case c == 't' || c == 'f' || c == 'n':
				lit := "null"
				switch c {
				case 't':
					lit = "true"
				case 'f':
					lit = "false"
				}
				if !bytes.HasPrefix(b[i:], []byte(lit)) {
					return spans, false
				}
				i += len(lit)
				mode = afterValue
			default:
				return spans, false
			}
			kind, education = otherValue, false
		case wantKey:
			if i >= len(b) || b[i] != '"' {
				return spans, false
			}
			end, ok := scanString(b, i)
			if !ok {
				return spans, false
			}
			var notRef bool
			kind, notRef, education = keyFacts(b[i:end], len(stack) == 1, links)
			if notRef {
				marks[len(marks)-1] |= notReferenceMark
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return spans, false
			}
			i = skipSpace(b, i+1)
			mode = wantValue
		case afterValue:
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return spans, i == len(b)
			}
			if i >= len(b) {
				return spans, false
			}
			top := stack[len(stack)-1]
			switch c := b[i]; {
			case c == ',':
				i = skipSpace(b, i+1)
				mode = wantValue
				if top == '{' {
					mode = wantKey
				} else {
					kind = kinds[len(kinds)-1]
				}
			case c == '}' && top == '{':
				closeObject()
				i++
			case c == ']' && top == '[':
				pop()
				i++
			default:
				return spans, false
			}
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index just past the string that opens at b[i],
// checking its escapes; like encoding/json, it lets invalid UTF-8 through.
func scanString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			i++
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanNumber returns the index just past the number that starts at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// keyFacts is what the member whose quoted key is raw says: the kind of
// its value, whether it shows its object's "reference" is not a
// Reference's (notReference), and whether it is "education". topLevel is
// true for the members of the outermost object (the resource's own).
// Only a key with escapes is decoded; the others are compared as bytes,
// which allocates nothing.
func keyFacts(raw []byte, topLevel, links bool) (kind valueKind, notRef, education bool) {
	key := raw[1 : len(raw)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		k, ok := unquoteJSON(raw)
		if !ok {
			return otherValue, false, false
		}
		key = []byte(k)
	}
	return keyKind(key, topLevel, links), notReference[string(key)], string(key) == "education"
}

// keyKind is the kind of the value of the member named key.
func keyKind(key []byte, topLevel, links bool) valueKind {
	switch k := string(key); {
	case k == "reference":
		return refValue
	case !links, k == "url" && topLevel, k == "id", k == "value", k == "fullUrl":
		return otherValue
	case k == "div":
		return narrativeValue
	}
	if linkNames()[string(key)] {
		return linkValue
	}
	return otherValue
}

// pendingRef is the span of a "reference" member's value, settled when
// its object (at depth) closes.
type pendingRef struct{ depth, span int }

// Marks of an open container.
const (
	notReferenceMark uint8 = 1 << iota // an object whose "reference" is a uri
	inEducation                        // an Immunization.education, or its array
)

// notReference are the members that show an object's "reference" is not a
// Reference's: a resource's own members (DetectedIssue.reference), an
// Expression's language (1..1), and an Immunization.education's others.
// A Reference has none of them.
var notReference = map[string]bool{
	"resourceType": true, "language": true,
	"documentType": true, "publicationDate": true, "presentationDate": true,
}

// linkTypes are the FHIR types whose values are links.
var linkTypes = map[string]bool{"uri": true, "url": true, "canonical": true, "oid": true, "uuid": true}

// linkNames are the JSON member names that FHIR gives mostly to
// primitive elements of a link type, in all resources and data types:
// "system", "url", "valueUri", "instantiatesCanonical", "derivedFrom",
// "address", "endpoint"… (Coding.system, not ContactPoint.system's codes;
// Attachment.url and the canonical urls, not TestScript's one string url;
// Endpoint.address, which no other primitive shares). Free text and codes
// (display, text, code, linkId…) are not links, and keyKind leaves out the
// names of the resource itself (id, an identifier's value, fullUrl, its
// own url).
var linkNames = sync.OnceValue(func() map[string]bool {
	votes := map[string]int{} // by name: link-typed elements less the others
	canonical := map[string]bool{}
	seen := map[string]bool{}
	var visit func(typ string)
	visit = func(typ string) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		sd, ok := profiles.TypeDefinition(typ)
		if !ok {
			return
		}
		for i := range sd.Elements {
			e := &sd.Elements[i]
			cut := strings.LastIndexByte(e.Path, '.')
			if cut < 0 {
				continue
			}
			last := e.Path[cut+1:]
			base, choice := strings.CutSuffix(last, "[x]")
			for _, t := range e.Type {
				if t.Code == "" {
					continue
				}
				name := last
				if choice {
					name = base + strings.ToUpper(t.Code[:1]) + t.Code[1:]
				}
				// Only primitives vote: an element of a complex type
				// (Reference, Address…) holds an object, never a string.
				switch c := t.Code[0]; {
				case t.Code == "canonical":
					canonical[name] = true
				case linkTypes[t.Code]:
					votes[name]++
				case 'a' <= c && c <= 'z':
					votes[name]--
				}
				visit(t.Code)
			}
		}
	}
	for _, t := range profiles.ResourceTypes() {
		visit(t)
	}
	names := map[string]bool{}
	for name, v := range votes {
		if v > 0 {
			names[name] = true
		}
	}
	// A canonical is a link wherever it is (OperationDefinition.base;
	// SearchParameter.base holds resource type codes).
	for name := range canonical {
		names[name] = true
	}
	return names
})

// unquoteJSON decodes a quoted JSON string as encoding/json does (invalid
// UTF-8 and lone surrogates become U+FFFD).
func unquoteJSON(raw []byte) (string, bool) {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
