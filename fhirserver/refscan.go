package fhirserver

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/kiln-fhir/kiln/fhirserver/jsonquote"
)

// rewriteReferences replaces the string value of every member named
// "reference", at any depth, by replace(value) when that is non-empty and
// different. It splices the new values into the original bytes, so member
// order, whitespace and everything else the client sent are kept.
//
// Malformed JSON is returned unchanged, without calling replace: the
// document is scanned in full before any replacement, so a later syntax
// error cannot follow a callback's side effects or errors. The result is
// res itself when nothing changes.
func rewriteReferences(res []byte, replace func(string) (string, error)) ([]byte, error) {
	// A key spelt with escapes needs a backslash; without one, the
	// literal must appear.
	if !bytes.Contains(res, []byte(`"reference"`)) && bytes.IndexByte(res, '\\') < 0 {
		return res, nil
	}
	var buf [16]refSpan
	spans, ok := scanReferences(res, buf[:0])
	if !ok {
		return res, nil
	}
	var out []byte
	last := 0
	for _, sp := range spans {
		raw := res[sp.start:sp.end]
		ref, ok := unquoteJSON(raw)
		if !ok {
			return res, nil // unreachable: the scanner checked the string
		}
		to, err := replace(ref)
		if err != nil {
			return nil, err
		}
		if to == "" || to == ref {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(res)+64)
		}
		out = append(out, res[last:sp.start]...)
		out = jsonquote.Append(out, to)
		last = sp.end
	}
	if out == nil {
		return res, nil
	}
	return append(out, res[last:]...), nil
}

// refSpan locates a reference value: res[start:end] is the quoted string.
type refSpan struct{ start, end int }

// maxScanDepth matches encoding/json's nesting limit, so the scanner
// refuses exactly the deep documents the decoder used to refuse.
const maxScanDepth = 10000

// scanReferences checks that b is one JSON value (surrounded by optional
// whitespace) and appends the spans of the string values of members whose
// decoded key is "reference". It is iterative, so deep nesting cannot
// exhaust the stack, and every step advances, so it always ends.
func scanReferences(b []byte, spans []refSpan) ([]refSpan, bool) {
	const (
		wantValue  = iota // a value is next
		wantKey           // a member's key is next (after '{' or ',')
		afterValue        // a ',' or a closing bracket is next, or the end
	)
	var stack []byte // open containers: '{' or '['
	mode := wantValue
	isRef := false // the value about to be scanned is a "reference" member's
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
				stack = append(stack, c)
				i = skipSpace(b, i+1)
				closer := byte('}')
				if c == '[' {
					closer = ']'
				}
				if i < len(b) && b[i] == closer {
					stack = stack[:len(stack)-1]
					i++
					mode = afterValue
				} else if c == '{' {
					mode = wantKey
				}
			case c == '"':
				end, ok := scanString(b, i)
				if !ok {
					return spans, false
				}
				if isRef {
					spans = append(spans, refSpan{i, end})
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
			isRef = false
		case wantKey:
			if i >= len(b) || b[i] != '"' {
				return spans, false
			}
			end, ok := scanString(b, i)
			if !ok {
				return spans, false
			}
			isRef = isReferenceKey(b[i:end])
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
				}
			case (c == '}' && top == '{') || (c == ']' && top == '['):
				stack = stack[:len(stack)-1]
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

// isReferenceKey reports whether a quoted key decodes to "reference";
// only a key with escapes needs decoding.
func isReferenceKey(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == `"reference"`
	}
	s, ok := unquoteJSON(raw)
	return ok && s == "reference"
}

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
