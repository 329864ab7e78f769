// Package syntax holds the value syntax FHIR search shares between its
// parts: the escapes of search values (\, \$ \| \\), decimal literals,
// FHIR ids, and how a value is quoted in an error message.
package syntax

import (
	"strings"
	"unicode/utf8"
)

// Split splits s at each sep not escaped by a backslash; the parts keep
// their escapes (Unescape them once they are not split further).
func Split(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// Unescape removes the search escapes \, \$ \| and \\; other backslashes
// are kept as written.
func Unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case ',', '$', '|', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// IsDecimal checks the FHIR decimal syntax (with an optional
// exponent) before big.Rat sees the text: Rat also reads fractions and
// hexadecimal, and a huge exponent would allocate without bound.
func IsDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 || digits > 100 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		if n == 0 || n > 3 {
			return false
		}
	}
	return i == len(s)
}

// Quote quotes a value for an error message, cut after 80 bytes (at a
// character boundary) so that a hostile query makes no huge message.
func Quote(s string) string {
	if len(s) > 80 {
		cut := 80
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return "\"" + s + "\""
}

// ValidID checks the FHIR id syntax [A-Za-z0-9\-\.]{1,64} but for the
// lower bound: the empty id passes, and callers refuse it themselves.
func ValidID(id string) bool {
	if len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
