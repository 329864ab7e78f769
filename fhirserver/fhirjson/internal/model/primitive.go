package model

import (
	"bytes"
	"net/url"
)

// The checks of primitive values. Each takes the JSON token as it is in
// the body: a string with its quotes (and escapes), a number, true or
// false. They follow the R4 regular expressions and google/fhir v0.7.4,
// which Kiln used before; the differential tests in package fhirjson hold
// both to the same answers.

// Problem is why a primitive value is refused.
type Problem uint8

const (
	OK         Problem = iota
	WrongKind          // not the JSON type the FHIR type has (string, number, boolean)
	BadFormat          // the right JSON type, but not a valid value
	TooLong            // a string over MaxString bytes
	BadControl         // a string with a control character other than tab, CR and LF
	OutOfRange         // an integer outside its type's range
)

// MaxString is the largest string value google/fhir accepted (its rule
// for string, not a rule of the specification, which sets none).
const MaxString = 1 << 20

// Check checks raw, a JSON token, as a value of format f. unquoted is the
// decoded content of a string token, which the caller computes only when
// the string holds an escape (else nil, and the raw content is used).
func Check(f Format, raw, unquoted []byte) Problem {
	if len(raw) == 0 {
		return WrongKind
	}
	str := raw[0] == '"'
	var s []byte
	if str {
		s = unquoted
		if s == nil && len(raw) >= 2 {
			s = raw[1 : len(raw)-1]
		}
	}
	switch f {
	case Boolean:
		if string(raw) == "true" || string(raw) == "false" {
			return OK
		}
		return WrongKind
	case Decimal:
		if isNumber(raw[0]) {
			return OK
		}
		return WrongKind
	case Integer:
		if !isNumber(raw[0]) {
			return WrongKind
		}
		return integer(raw)
	case PositiveInt, UnsignedInt:
		return unsigned(raw, f == PositiveInt)
	}
	if !str {
		return WrongKind
	}
	switch f {
	case String:
		if len(s) > MaxString {
			return TooLong
		}
		for _, c := range s {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return BadControl
			}
		}
	case Code:
		if !isCode(s) {
			return BadFormat
		}
	case ID:
		if len(s) == 0 || len(s) > 64 {
			return BadFormat
		}
		for _, c := range s {
			if !(isAlnum(c) || c == '-' || c == '.') {
				return BadFormat
			}
		}
	case OID:
		if !isOID(s) {
			return BadFormat
		}
	case UUID:
		if !isUUID(s) {
			return BadFormat
		}
	case URI:
		if !validURI(s) {
			return BadFormat
		}
	case Date, DateTime, Instant, Time:
		if !validTime(f, s) {
			return BadFormat
		}
	case Base64Binary:
		// google/fhir decodes the raw JSON content, escapes and all.
		if !isBase64(raw[1 : len(raw)-1]) {
			return BadFormat
		}
	}
	return OK
}

// validURI is what google/fhir checked of a uri, url or canonical:
// that Go's url.Parse accepts it. Most values take a fast path that
// allocates nothing.
func validURI(s []byte) bool {
	if plainURI(s) {
		return true
	}
	_, err := url.Parse(string(s))
	return err == nil
}

// plainURI reports whether s is certainly accepted by url.Parse: no
// escapes, brackets, user info or control characters, a valid scheme or
// none (then no colon in the first path segment), and an authority, if
// any, of a plain host name and port. False means url.Parse must decide.
func plainURI(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '%' || c == '[' || c == ']' || c == '@' {
			return false
		}
	}
	if i := bytes.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	rest, scheme := s, false
	for i, c := range s {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.') {
			continue
		}
		if c == ':' && i > 0 {
			rest, scheme = s[i+1:], true
		}
		break
	}
	if i := bytes.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	if !scheme {
		first := rest
		if i := bytes.IndexByte(first, '/'); i >= 0 {
			first = first[:i]
		}
		if bytes.IndexByte(first, ':') >= 0 {
			return false
		}
		if bytes.HasPrefix(rest, []byte("///")) {
			return true
		}
	}
	if !bytes.HasPrefix(rest, []byte("//")) {
		return true // a path, or opaque after a scheme
	}
	host := rest[2:]
	if i := bytes.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	port := false
	for _, c := range host {
		switch {
		case isDigit(c):
		case c == ':' && !port:
			port = true
		case port:
			return false
		case isAlnum(c) || c == '.' || c == '-':
		default:
			return false
		}
	}
	return true
}

func isNumber(c byte) bool { return c == '-' || '0' <= c && c <= '9' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool  { return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// integer accepts a JSON number without fraction or exponent in the range
// of a 32-bit signed integer.
func integer(raw []byte) Problem {
	d, limit := raw, uint64(1<<31-1)
	if d[0] == '-' {
		d, limit = d[1:], 1<<31
	}
	if n, ok := parseDigits(d); !ok || n > limit || d[0] == '0' && len(d) > 1 {
		return BadFormat
	}
	return OK
}

// unsigned accepts digits only (no sign, no leading zero) up to 2^31-1,
// from 1 for positiveInt.
func unsigned(raw []byte, positive bool) Problem {
	n, ok := parseDigits(raw)
	if !ok || (raw[0] == '0' && (len(raw) > 1 || positive)) {
		if raw[0] == '"' || raw[0] == 't' || raw[0] == 'f' {
			return WrongKind
		}
		return BadFormat
	}
	if n > 1<<32-1 {
		return BadFormat // not a 32-bit unsigned number at all
	}
	if n > 1<<31-1 {
		return OutOfRange
	}
	return OK
}

// parseDigits reads a non-empty run of decimal digits; values above 2^32
// come back as 2^32 (all that matters here is that they are too large).
func parseDigits(d []byte) (uint64, bool) {
	if len(d) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range d {
		if !isDigit(c) {
			return 0, false
		}
		n = min(n*10+uint64(c-'0'), 1<<32)
	}
	return n, true
}

func allDigits(d []byte) bool {
	_, ok := parseDigits(d)
	return ok
}

// isSpace is \s of Go's regexp syntax, which the code regex uses.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// isCode matches [^\s]+(\s[^\s]+)*: no leading, trailing or doubled space.
func isCode(s []byte) bool {
	if len(s) == 0 || isSpace(s[0]) || isSpace(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if isSpace(s[i]) && isSpace(s[i-1]) {
			return false
		}
	}
	return true
}

// isOID matches urn:oid:[0-2](\.(0|[1-9][0-9]*))+.
func isOID(s []byte) bool {
	const p = "urn:oid:"
	if len(s) < len(p)+3 || string(s[:len(p)]) != p || s[len(p)] < '0' || s[len(p)] > '2' {
		return false
	}
	rest := s[len(p)+1:]
	if len(rest) == 0 {
		return false
	}
	for len(rest) > 0 {
		if rest[0] != '.' {
			return false
		}
		i := 1
		for i < len(rest) && isDigit(rest[i]) {
			i++
		}
		if i == 1 || (rest[1] == '0' && i > 2) {
			return false
		}
		rest = rest[i:]
	}
	return true
}

// isUUID matches urn:uuid: and a lower-case 8-4-4-4-12 hex UUID.
func isUUID(s []byte) bool {
	const p = "urn:uuid:"
	if len(s) != len(p)+36 || string(s[:len(p)]) != p {
		return false
	}
	for i, c := range s[len(p):] {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isDigit(c) && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// isBase64 accepts what google/fhir decodes: standard base64 with padding,
// optionally cut into chunks of one length by runs of spaces of one length
// (its separator-and-stride form).
func isBase64(s []byte) bool {
	n, chunk, stride, sep := 0, 0, 0, 0
	var last [4]byte // the last 4 characters that are not spaces
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			last[n%4] = s[i]
			n++
			if !isBase64Char(s[i]) && s[i] != '=' {
				return false
			}
			continue
		}
		cur := i - chunk
		if stride == 0 {
			stride = cur
		}
		if cur != stride {
			return false
		}
		j := i
		for j < len(s) && s[j] == ' ' {
			j++
		}
		if sep == 0 {
			sep = j - i
		}
		if j-i != sep {
			return false
		}
		chunk = j
		i = j - 1
	}
	if n%4 != 0 {
		return false
	}
	// '=' may only end the last quantum: "xx==" or "xxx=".
	pads := 0
	for i := n - 1; i >= 0 && i >= n-2 && last[i%4] == '='; i-- {
		pads++
	}
	count := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			count++
		}
	}
	if count != pads {
		return false
	}
	return pads < 2 || n >= 4 && last[(n-3)%4] != '=' && last[(n-4)%4] != '='
}

func isBase64Char(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

// validTime checks a date, dateTime, instant or time: the R4 regular
// expression, then a real calendar day (no 30 February). Years are 0000
// to 9999; google/fhir refused the negative years the expressions allow.
func validTime(f Format, s []byte) bool {
	if f == Time {
		return clock(s) == len(s) && len(s) > 0
	}
	if len(s) < 4 || !allDigits(s[:4]) {
		return false
	}
	year := int(s[0]-'0')*1000 + int(s[1]-'0')*100 + int(s[2]-'0')*10 + int(s[3]-'0')
	rest := s[4:]
	if len(rest) == 0 {
		return f != Instant
	}
	if len(rest) < 3 || rest[0] != '-' || !allDigits(rest[1:3]) {
		return false
	}
	month := int(rest[1]-'0')*10 + int(rest[2]-'0')
	if month < 1 || month > 12 {
		return false
	}
	rest = rest[3:]
	if len(rest) == 0 {
		return f != Instant
	}
	if len(rest) < 3 || rest[0] != '-' || !allDigits(rest[1:3]) {
		return false
	}
	day := int(rest[1]-'0')*10 + int(rest[2]-'0')
	if day < 1 || day > daysIn(month, year) {
		return false
	}
	rest = rest[3:]
	if len(rest) == 0 {
		return f == Date || f == DateTime
	}
	if f == Date || rest[0] != 'T' {
		return false
	}
	rest = rest[1:]
	n := clock(rest)
	if n == 0 {
		return false
	}
	return isZone(rest[n:])
}

// clock returns the length of the hh:mm:ss(.fff) prefix of s, or 0.
func clock(s []byte) int {
	if len(s) < 8 || !allDigits(s[0:2]) || s[2] != ':' || !allDigits(s[3:5]) || s[5] != ':' || !allDigits(s[6:8]) {
		return 0
	}
	if s[0] > '2' || s[0] == '2' && s[1] > '3' || s[3] > '5' || s[6] > '5' {
		return 0
	}
	n := 8
	if n < len(s) && s[n] == '.' {
		i := n + 1
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == n+1 {
			return 0
		}
		n = i
	}
	return n
}

// isZone matches Z|(+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00).
func isZone(s []byte) bool {
	if len(s) == 1 {
		return s[0] == 'Z'
	}
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' || !allDigits(s[1:3]) || !allDigits(s[4:6]) {
		return false
	}
	h := int(s[1]-'0')*10 + int(s[2]-'0')
	if h == 14 {
		return s[4] == '0' && s[5] == '0'
	}
	return h <= 13 && s[4] <= '5'
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
