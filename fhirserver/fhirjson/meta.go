package fhirjson

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// lastUpdatedLayout is RFC 3339 in UTC with exactly three fractional digits.
const lastUpdatedLayout = "2006-01-02T15:04:05.000Z"

// FormatInstant renders t as a FHIR instant in UTC with millisecond
// precision: the form SetMeta writes into meta.lastUpdated.
func FormatInstant(t time.Time) string {
	return t.UTC().Format(lastUpdatedLayout)
}

// SetMeta returns a compact (no insignificant whitespace) copy of body,
// which has already passed Check, with resourceType first, then id set to
// id, then meta with versionId and lastUpdated (UTC, millisecond precision)
// replacing any values the client sent, followed by the client's other meta
// members, then all other members, in the client's order. Values are copied
// byte for byte apart from whitespace: numbers are never reparsed and
// strings never re-escaped. The client's "_versionId" and "_lastUpdated"
// (extensions on the values being replaced) are dropped; "_id" is kept.
//
// A body that would not pass the guard is an error; an id or versionID that
// is not a valid FHIR id is a 400 *outcome.Error.
func SetMeta(body []byte, id, versionID string, lastUpdated time.Time) ([]byte, error) {
	if !ValidID(id) {
		return nil, outcome.New(http.StatusBadRequest, codeValue, "invalid id "+strconv.Quote(id)+": an id is 1-64 of A-Z a-z 0-9 - .")
	}
	if !ValidID(versionID) {
		return nil, outcome.New(http.StatusBadRequest, codeValue, "invalid versionId "+strconv.Quote(versionID)+": an id is 1-64 of A-Z a-z 0-9 - .")
	}
	if y := lastUpdated.UTC().Year(); y < 1 || y > 9999 {
		return nil, errors.New("fhirjson: SetMeta: lastUpdated is outside the years 0001-9999")
	}
	s := scanDoc(body, maxSupportedDepth)
	defer s.release()
	s.rootInfo(!s.fatal)
	if len(s.issues) > 0 {
		return nil, errors.New("fhirjson: SetMeta: body has not passed Check: " + s.issues[0].msg)
	}

	out := make([]byte, 0, len(body)+128)
	out = append(out, '{')
	var meta *member
	for i := range s.top {
		m := &s.top[i]
		switch string(m.name) {
		case "resourceType":
			out = append(out, `"resourceType":`...)
			out = append(out, body[m.start:m.end]...) // a string: no whitespace inside
		case "meta":
			meta = m
		}
	}
	out = append(out, `,"id":"`...)
	out = append(out, id...)
	out = append(out, `","meta":{"versionId":"`...)
	out = append(out, versionID...)
	out = append(out, `","lastUpdated":"`...)
	out = lastUpdated.UTC().AppendFormat(out, lastUpdatedLayout)
	out = append(out, '"')
	if meta != nil {
		if meta.kind != kObject {
			return nil, errors.New("fhirjson: SetMeta: meta is not an object")
		}
		mb := body[meta.start:meta.end]
		ms := scanDoc(mb, maxSupportedDepth)
		for _, mm := range ms.top {
			switch string(mm.name) {
			case "versionId", "lastUpdated", "_versionId", "_lastUpdated":
				continue
			}
			out = appendMember(out, mb, mm)
		}
		ms.release()
	}
	out = append(out, '}')
	for _, m := range s.top {
		switch string(m.name) {
		case "resourceType", "id", "meta":
			continue
		}
		out = appendMember(out, body, m)
	}
	out = append(out, '}')
	return out, nil
}

// Restamp returns a copy of stamped, a body SetMeta returned, with
// meta.lastUpdated set to lastUpdated: a copy and a 24-byte overwrite
// where SetMeta scans and rebuilds the body. A transaction stamps bodies
// before it takes the store's writer and restamps them, with the time it
// gets there, inside. ok is false when stamped does not begin as SetMeta
// writes it.
func Restamp(stamped []byte, lastUpdated time.Time) ([]byte, bool) {
	if y := lastUpdated.UTC().Year(); y < 1 || y > 9999 {
		return nil, false
	}
	// SetMeta writes resourceType (a JSON string, which cannot hold an
	// unescaped quote), id and versionId (FHIR ids) before lastUpdated:
	// the first occurrence of the member is the one it wrote.
	const name = `","lastUpdated":"`
	i := bytes.Index(stamped, []byte(name))
	if i < 0 || !bytes.HasPrefix(stamped, []byte(`{"resourceType":"`)) {
		return nil, false
	}
	at := i + len(name)
	if len(stamped) < at+len(lastUpdatedLayout)+1 || stamped[at+len(lastUpdatedLayout)] != '"' {
		return nil, false
	}
	var ts [len(lastUpdatedLayout)]byte
	out := bytes.Clone(stamped)
	copy(out[at:], lastUpdated.UTC().AppendFormat(ts[:0], lastUpdatedLayout))
	return out, true
}

func appendMember(out, data []byte, m member) []byte {
	out = append(out, ',')
	out = append(out, data[m.keyStart:m.keyEnd]...)
	out = append(out, ':')
	return appendCompact(out, data[m.start:m.end])
}

// appendCompact appends valid JSON without insignificant whitespace; bytes
// inside strings, and numbers, are copied unchanged.
func appendCompact(out, v []byte) []byte {
	for i := 0; i < len(v); {
		switch c := v[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := skipString(v, i)
			out = append(out, v[i:end]...)
			i = end
		default:
			// Copy the run up to the next string or whitespace at once.
			j := i + 1
			for j < len(v) {
				c := v[j]
				if c == '"' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
					break
				}
				j++
			}
			out = append(out, v[i:j]...)
			i = j
		}
	}
	return out
}

// ValidID reports whether s matches the FHIR id type: [A-Za-z0-9\-\.]{1,64}.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
