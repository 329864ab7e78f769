package syntax

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokKind classifies lexer tokens.
type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tDelimIdent // `...`
	tString
	tNumber
	tDateTime // @... literal text without '@'
	tExtConst // %name or %`name` / %'name'
	tOp       // punctuation and symbolic operators
	tSpecial  // $this, $index, $total
)

type token struct {
	kind tokKind
	text string
	pos  int
}

// Error is a parse error with the byte offset where it was detected.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("fhirpath: %s at offset %d", e.Msg, e.Pos) }

func errAt(pos int, format string, a ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, a...)}
}

// lex splits the expression into tokens up front; expressions are short,
// and a slice keeps the parser simple.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, errAt(i, "unterminated comment")
			}
			i += end + 4
			continue
		}
		start := i
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			toks = append(toks, token{tIdent, src[start:i], start})
		case c >= '0' && c <= '9':
			for i < len(src) && isDigit(src[i]) {
				i++
			}
			if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
				i++
				for i < len(src) && isDigit(src[i]) {
					i++
				}
			}
			toks = append(toks, token{tNumber, src[start:i], start})
		case c == '\'' || c == '`':
			s, n, err := lexQuoted(src[i:], c)
			if err != nil {
				return nil, errAt(i, "%v", err)
			}
			i += n
			k := tString
			if c == '`' {
				k = tDelimIdent
				if s == "" {
					return nil, errAt(start, "empty delimited identifier")
				}
			}
			toks = append(toks, token{k, s, start})
		case c == '@':
			n := lexDateTime(src[i+1:])
			if n == 0 {
				return nil, errAt(i, "invalid date/time literal")
			}
			i += 1 + n
			toks = append(toks, token{tDateTime, src[start+1 : i], start})
		case c == '%':
			i++
			if i < len(src) && (src[i] == '`' || src[i] == '\'') {
				s, n, err := lexQuoted(src[i:], src[i])
				if err != nil {
					return nil, errAt(i, "%v", err)
				}
				i += n
				toks = append(toks, token{tExtConst, s, start})
				break
			}
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			if i == start+1 {
				return nil, errAt(start, "empty external constant name")
			}
			toks = append(toks, token{tExtConst, src[start+1 : i], start})
		case c == '$':
			i++
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			name := src[start:i]
			if name != "$this" && name != "$index" && name != "$total" {
				return nil, errAt(start, "unknown special variable %q", name)
			}
			toks = append(toks, token{tSpecial, name, start})
		default:
			op := ""
			if i+1 < len(src) {
				switch two := src[i : i+2]; two {
				case "<=", ">=", "!=", "!~":
					op = two
				}
			}
			if op == "" {
				switch c {
				case '.', '[', ']', '(', ')', '{', '}', ',', '+', '-', '*', '/', '&', '|', '=', '~', '<', '>':
					op = string(c)
				default:
					r, _ := utf8.DecodeRuneInString(src[i:])
					return nil, errAt(i, "unexpected character %q", r)
				}
			}
			i += len(op)
			toks = append(toks, token{tOp, op, start})
		}
	}
	toks = append(toks, token{tEOF, "", len(src)})
	return toks, nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// lexQuoted reads a quoted string starting at s[0]==q, handling the escapes
// of the specification. It returns the unescaped text and the bytes used.
func lexQuoted(s string, q byte) (string, int, error) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\'', '"', '`', '\\', '/':
			b.WriteByte(e)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if i+4 > len(s) {
				return "", 0, fmt.Errorf("bad unicode escape")
			}
			v, err := strconv.ParseUint(s[i:i+4], 16, 32)
			if err != nil {
				return "", 0, fmt.Errorf("bad unicode escape")
			}
			b.WriteRune(rune(v))
			i += 4
		default:
			return "", 0, fmt.Errorf("invalid escape \\%c", e)
		}
	}
	return "", 0, fmt.Errorf("unterminated string")
}

// lexDateTime returns the length of the date/time literal body that
// follows '@': a date, a dateTime (with 'T') or a time (starting with 'T').
func lexDateTime(s string) int {
	i := 0
	digits := func(n int) bool {
		if i+n > len(s) {
			return false
		}
		for j := 0; j < n; j++ {
			if !isDigit(s[i+j]) {
				return false
			}
		}
		i += n
		return true
	}
	timePart := func() {
		if !digits(2) {
			return
		}
		if i+2 < len(s) && s[i] == ':' && isDigit(s[i+1]) {
			i++
			digits(2)
			if i+2 < len(s) && s[i] == ':' && isDigit(s[i+1]) {
				i++
				digits(2)
				if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
					i++
					for i < len(s) && isDigit(s[i]) {
						i++
					}
				}
			}
		}
	}
	if i < len(s) && s[i] == 'T' {
		i++
		timePart()
		if i == 1 {
			return 0
		}
		return i
	}
	if !digits(4) {
		return 0
	}
	if i+2 < len(s) && s[i] == '-' && isDigit(s[i+1]) {
		i++
		digits(2)
		if i+2 < len(s) && s[i] == '-' && isDigit(s[i+1]) {
			i++
			digits(2)
		}
	}
	if i < len(s) && s[i] == 'T' {
		i++
		timePart()
		// time zone
		if i < len(s) && s[i] == 'Z' {
			i++
		} else if i+5 < len(s)+0 && (s[i] == '+' || s[i] == '-') && isDigit(s[i+1]) && isDigit(s[i+2]) && s[i+3] == ':' {
			j := i
			i++
			digits(2)
			i++
			if !digits(2) {
				i = j
			}
		}
	}
	return i
}
