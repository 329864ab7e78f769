package fhirjson

import (
	"errors"
	"strconv"
)

// Reading a checked Bundle without encoding/json: the server needs a few
// members of each entry, and the structural check needs the Bundle without
// its entries' resources. Both walk the bytes the guard has already
// accepted (well-formed UTF-8 JSON, no duplicate keys), so values that are
// not read are skipped by bracket matching rather than parsed again.
//
// Member names are compared after unescaping, and exactly: FHIR JSON is
// case-sensitive ("Entry" or "fullURL" is not a FHIR element, and the
// validator rejects both).
//
// On input the guard would reject, these functions never panic and always
// end, and they report an error for malformed JSON in the parts they read;
// they do not promise to find malformed JSON inside the values they skip.

// BundleEntry is what the server reads of one Bundle.entry.
type BundleEntry struct {
	FullURL string
	// Resource is the raw JSON of entry.resource (a slice of the Bundle's
	// bytes, not a copy), or nil when the entry has none.
	Resource []byte
	Request  *EntryRequest // nil when the entry has none
}

// EntryRequest is Bundle.entry.request.
type EntryRequest struct {
	Method          string
	URL             string
	IfNoneMatch     string
	IfModifiedSince string
	IfMatch         string
	IfNoneExist     string
}

// BundleEntries reads Bundle.entry of body, a Bundle that has passed
// CheckBundle or Check (or a resource inside one). A missing or null
// "entry" is no entries, and a null element an entry with nothing in it;
// an element that is not an object, or a member read here that does not
// hold the JSON type FHIR gives it (strings; objects for request), is an
// error. Null members count as absent.
func BundleEntries(body []byte) ([]BundleEntry, error) {
	var buf [8]member
	top, ok := rootMembers(body, buf[:0])
	if !ok {
		return nil, errors.New("the Bundle is not a well-formed JSON object")
	}
	var entry *member
	for k := range top {
		if string(top[k].name) == "entry" {
			entry = &top[k]
		}
	}
	if entry == nil || entry.kind == kNull {
		return nil, nil
	}
	if entry.kind != kArray {
		return nil, errors.New("Bundle.entry must be an array")
	}
	elems, ok := arrayElements(body, entry.start, nil)
	if !ok {
		return nil, errors.New("Bundle.entry is not a well-formed JSON array")
	}
	entries := make([]BundleEntry, len(elems))
	var ms []member
	for i, el := range elems {
		switch body[el.start] {
		case 'n':
			continue // null: encoding/json left the entry empty too
		case '{':
		default:
			return nil, errors.New("Bundle.entry[" + strconv.Itoa(i) + "] must be an object")
		}
		var end int
		if ms, end, ok = objectMembers(body, el.start, ms[:0]); !ok || end != el.end {
			return nil, errors.New("Bundle.entry[" + strconv.Itoa(i) + "] is not a well-formed JSON object")
		}
		e := &entries[i]
		for _, m := range ms {
			var err error
			switch string(m.name) {
			case "fullUrl":
				err = stringMember(body, m, &e.FullURL)
			case "resource":
				e.Resource = body[m.start:m.end]
			case "request":
				e.Request, err = entryRequest(body, m)
			}
			if err != nil {
				return nil, errors.New("Bundle.entry[" + strconv.Itoa(i) + "]." + err.Error())
			}
		}
	}
	return entries, nil
}

func entryRequest(body []byte, m member) (*EntryRequest, error) {
	switch m.kind {
	case kNull:
		return nil, nil
	case kObject:
	default:
		return nil, errors.New("request must be an object")
	}
	var buf [8]member
	ms, end, ok := objectMembers(body, m.start, buf[:0])
	if !ok || end != m.end {
		return nil, errors.New("request is not a well-formed JSON object")
	}
	rq := &EntryRequest{}
	for _, f := range ms {
		var dst *string
		switch string(f.name) {
		case "method":
			dst = &rq.Method
		case "url":
			dst = &rq.URL
		case "ifNoneMatch":
			dst = &rq.IfNoneMatch
		case "ifModifiedSince":
			dst = &rq.IfModifiedSince
		case "ifMatch":
			dst = &rq.IfMatch
		case "ifNoneExist":
			dst = &rq.IfNoneExist
		default:
			continue
		}
		if err := stringMember(body, f, dst); err != nil {
			return nil, errors.New("request." + err.Error())
		}
	}
	return rq, nil
}

// stringMember decodes a string member into dst; null leaves dst alone.
func stringMember(data []byte, m member, dst *string) error {
	switch m.kind {
	case kNull:
		return nil
	case kString:
		if s, ok := unquote(data[m.start:m.end]); ok {
			*dst = string(s)
			return nil
		}
		return errors.New(string(m.name) + " is not a well-formed JSON string")
	}
	return errors.New(string(m.name) + " must be a string")
}

// ResourceInfo reads the resourceType and id of a resource that has passed
// the guard (on its own or as part of a Bundle). It is false when body is
// not a JSON object, or when resourceType or id is present but neither a
// string nor null. Info.BundleType is not set.
func ResourceInfo(body []byte) (Info, bool) {
	var info Info
	var buf [32]member
	top, ok := rootMembers(body, buf[:0])
	if !ok {
		return Info{}, false
	}
	for _, m := range top {
		var err error
		switch string(m.name) {
		case "resourceType":
			err = stringMember(body, m, &info.ResourceType)
		case "id":
			err = stringMember(body, m, &info.ID)
		}
		if err != nil {
			return Info{}, false
		}
	}
	return info, true
}

// rootMembers returns the members of the object that is the whole of
// body (whitespace aside).
func rootMembers(body []byte, ms []member) ([]member, bool) {
	i := skipSpace(body, 0)
	ms, end, ok := objectMembers(body, i, ms)
	return ms, ok && skipSpace(body, end) == len(body)
}

// objectMembers appends the members of the object at d[i] to ms, with
// their decoded names, and returns the index just past the object.
func objectMembers(d []byte, i int, ms []member) ([]member, int, bool) {
	if i >= len(d) || d[i] != '{' {
		return ms, i, false
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return ms, i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return ms, i, false
		}
		keyStart := i
		keyEnd := skipString(d, i)
		if keyEnd > len(d) {
			return ms, i, false
		}
		name, ok := unquote(d[keyStart:keyEnd])
		if !ok {
			return ms, i, false
		}
		i = skipSpace(d, keyEnd)
		if i >= len(d) || d[i] != ':' {
			return ms, i, false
		}
		start := skipSpace(d, i+1)
		end, kind, ok := valueEnd(d, start)
		if !ok {
			return ms, i, false
		}
		ms = append(ms, member{name: name, keyStart: keyStart, keyEnd: keyEnd, start: start, end: end, kind: kind})
		i = skipSpace(d, end)
		if i >= len(d) {
			return ms, i, false
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case '}':
			return ms, i + 1, true
		default:
			return ms, i, false
		}
	}
}

// span locates one value: data[start:end].
type span struct{ start, end int }

// arrayElements appends the spans of the elements of the array at d[i].
func arrayElements(d []byte, i int, out []span) ([]span, bool) {
	if i >= len(d) || d[i] != '[' {
		return out, false
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		return out, true
	}
	for {
		end, _, ok := valueEnd(d, i)
		if !ok {
			return out, false
		}
		out = append(out, span{i, end})
		i = skipSpace(d, end)
		if i >= len(d) {
			return out, false
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case ']':
			return out, true
		default:
			return out, false
		}
	}
}

// valueEnd returns the end and the kind of the value at d[i], which is
// skipped, not checked: it only has to start like a JSON value, and to
// end (a container with its closing bracket) before the input does.
func valueEnd(d []byte, i int) (int, uint8, bool) {
	if i >= len(d) {
		return i, 0, false
	}
	var kind uint8
	switch c := d[i]; {
	case c == '"':
		kind = kString
	case c == '{':
		kind = kObject
	case c == '[':
		kind = kArray
	case c == 't' || c == 'f':
		kind = kBool
	case c == 'n':
		kind = kNull
	case c == '-' || '0' <= c && c <= '9':
		kind = kNumber
	default:
		return i, 0, false
	}
	end := skipValue(d, i)
	if end > len(d) || end <= i {
		return i, 0, false
	}
	last := d[end-1]
	switch kind {
	case kString:
		if end-i < 2 || last != '"' {
			return i, 0, false
		}
	case kObject:
		if last != '}' {
			return i, 0, false
		}
	case kArray:
		if last != ']' {
			return i, 0, false
		}
	}
	return end, kind, true
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value starting at d[i].
func skipValue(d []byte, i int) int {
	if i >= len(d) {
		return i
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				i = skipString(d, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(d) && !isDelimiter(d[i]) {
			i++
		}
		return i
	}
}

func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// isDelimiter reports whether c ends a number or a literal.
func isDelimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
