package fhirjson

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Rendering of locations and client data in messages: FHIRPath-style
// expressions, quoted names, and clipped values that never echo more than a
// few dozen bytes of the request back.

// relPath renders the current location, e.g. ".name[0].given[1]".
func (s *scanner) relPath() string {
	var b strings.Builder
	writeSegs(&b, s.path)
	return b.String()
}

func writeSegs(b *strings.Builder, segs []seg) {
	for _, sg := range segs {
		if sg.key != nil {
			b.WriteByte('.')
			writeName(b, sg.key)
		} else {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(sg.index))
			b.WriteByte(']')
		}
	}
}

// writeName writes a member name as a FHIRPath identifier, delimiting it with
// backticks when it is not a plain identifier (so odd keys stay readable).
// Long names are shortened: an error must not echo a huge key back.
func writeName(b *strings.Builder, name []byte) {
	if isIdent(name) && len(name) <= maxShown {
		b.Write(name)
		return
	}
	b.WriteByte('`')
	for _, r := range clip(name) {
		if r == '`' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('`')
}

// quoteName quotes a member name for a message, shortened like writeName.
func quoteName(name []byte) string {
	return `"` + strings.ReplaceAll(clip(name), `"`, `\"`) + `"`
}

func isIdent(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// maxShown bounds how many bytes of client data a message repeats.
const maxShown = 64

// clip renders client bytes (raw JSON or a name) for a message: shortened,
// valid UTF-8, and with control characters escaped so they stay visible.
func clip(raw []byte) string {
	short := raw
	if len(raw) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		short = raw[:cut]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(string(short), "\uFFFD") {
		if r < 0x20 || (0x7f <= r && r < 0xa0) {
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
			continue
		}
		b.WriteRune(r)
	}
	if len(short) < len(raw) {
		b.WriteString("…")
	}
	return b.String()
}
