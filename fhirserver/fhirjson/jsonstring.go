package fhirjson

import (
	"strconv"
	"unicode/utf8"
)

// JSON string handling for the guard: validation in one pass (escapes,
// surrogate pairs, UTF-8) and decoding for the few strings the server reads
// (member names with escapes, resourceType, id).

// str validates the string at s.pos and moves past it.
func (s *scanner) str() bool {
	d := s.data
	i := s.pos + 1
	for {
		// Fast path over plain ASCII.
		for i < len(d) {
			c := d[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		if i >= len(d) {
			s.pos = i
			s.syntax("unterminated string")
			return false
		}
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return true
		case c == '\\':
			n, ok := s.escape(i)
			if !ok {
				return false
			}
			i += n
		case c < 0x20:
			s.pos = i
			s.syntax("control character " + quoteByte(c) + " in a string must be escaped")
			return false
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				s.pos = i
				s.fail(codeStructure, "invalid UTF-8 at byte offset "+strconv.Itoa(i))
				return false
			}
			i += size
		}
	}
}

// escape validates the escape sequence at d[i] (a backslash) and returns its
// length in bytes.
func (s *scanner) escape(i int) (int, bool) {
	d := s.data
	if i+1 >= len(d) {
		s.pos = i
		s.syntax("unterminated string")
		return 0, false
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		r, ok := hex4(d, i+2)
		if !ok {
			s.pos = i
			s.syntax(`invalid \u escape`)
			return 0, false
		}
		switch {
		case 0xD800 <= r && r < 0xDC00:
			// A high surrogate must be followed by an escaped low surrogate.
			if i+7 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' {
				if r2, ok := hex4(d, i+8); ok && 0xDC00 <= r2 && r2 < 0xE000 {
					return 12, true
				}
			}
			s.issueHere(codeValue, `invalid \u escape: unpaired surrogate `+string(d[i:i+6]))
		case 0xDC00 <= r && r < 0xE000:
			s.issueHere(codeValue, `invalid \u escape: unpaired surrogate `+string(d[i:i+6]))
		}
		return 6, true
	default:
		s.pos = i
		s.syntax("invalid escape sequence " + strconv.Quote(string(d[i:i+2])))
		return 0, false
	}
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unquote decodes a JSON string literal (quotes included) that the scanner
// has already validated. Literals without escapes are returned without
// copying.
func unquote(lit []byte) ([]byte, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	body := lit[1 : len(lit)-1]
	esc := false
	for _, c := range body {
		if c == '\\' {
			esc = true
			break
		}
	}
	if !esc {
		return body, true
	}
	return appendUnquoted(make([]byte, 0, len(body)), body)
}

// appendUnquoted appends the decoded contents of a JSON string (without its
// quotes) to out, as encoding/json decodes them: escapes are resolved, and
// unpaired surrogate escapes and invalid UTF-8 bytes become U+FFFD. It
// fails on a malformed escape; it does not check for control characters or
// unescaped quotes.
func appendUnquoted(out, body []byte) ([]byte, bool) {
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				out = append(out, c)
				i++
				continue
			}
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, body[i:i+size]...)
			}
			i += size
			continue
		}
		if i+1 >= len(body) {
			return nil, false
		}
		switch body[i+1] {
		case '"', '\\', '/':
			out = append(out, body[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(body, i+2)
			if !ok {
				return nil, false
			}
			i += 6
			if 0xD800 <= r && r < 0xDC00 && i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
				if r2, ok := hex4(body, i+2); ok && 0xDC00 <= r2 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					i += 6
				}
			}
			out = utf8.AppendRune(out, r) // unpaired surrogates become U+FFFD
			continue
		default:
			return nil, false
		}
		i += 2
	}
	return out, true
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}
