// Package reference finds and rewrites the references and links inside a
// FHIR resource's JSON, in place in the client's bytes, and resolves the
// fullUrls of a Bundle's entries. It knows FHIR's element names and nothing
// of storage or HTTP: the transaction engine and the service decide what
// each reference becomes.
package reference

import (
	"bytes"
	"path"
	"regexp"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/jsonquote"
	"github.com/kiln-fhir/kiln/profiles"
)

// Rewrite replaces, at any depth, the string value of every
// member named "reference" by ref(value), and other links by link(value),
// when that is non-empty and different. The other links are the values of
// the members whose elements are of type uri, url, canonical, oid or uuid
// wherever FHIR defines them (linkNames), except the resource's own url
// (a canonical, at the top level), and the href and src attributes of a
// narrative's div. link may be nil. The new values are spliced into the
// original bytes, so member order, whitespace and everything else the
// client sent are kept.
//
// Malformed JSON is returned unchanged, without calling either function:
// the document is scanned in full before any replacement, so a later
// syntax error cannot follow a callback's side effects or errors. The
// result is res itself when nothing changes.
func Rewrite(res []byte, ref func(string) (string, error), link func(string) string) ([]byte, error) {
	// A key spelt with escapes needs a backslash; without one, the
	// literal must appear.
	if link == nil && !bytes.Contains(res, []byte(`"reference"`)) && bytes.IndexByte(res, '\\') < 0 {
		return res, nil
	}
	var buf [16]refSpan
	spans, ok := scanReferences(res, buf[:0], link != nil)
	if !ok {
		return res, nil
	}
	var out []byte
	last := 0
	for _, sp := range spans {
		raw := res[sp.start:sp.end]
		s, ok := unquoteJSON(raw)
		if !ok {
			return res, nil // unreachable: the scanner checked the string
		}
		var to string
		switch sp.kind {
		case refValue:
			var err error
			if to, err = ref(s); err != nil {
				return nil, err
			}
		case linkValue:
			to = link(s)
		case narrativeValue:
			to = narrativeLinks(s, link)
		}
		if to == "" || to == s {
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

// MayHoldQuery reports whether a resource's bytes may hold a conditional
// reference: a '?', as it is or escaped.
func MayHoldQuery(b []byte) bool {
	return bytes.IndexByte(b, '?') >= 0 || bytes.Contains(b, []byte(`\u003f`)) || bytes.Contains(b, []byte(`\u003F`))
}

// IsURN reports a urn:uuid: or urn:oid: link, which names an entry of a
// Bundle and nothing outside it.
func IsURN(s string) bool {
	return strings.HasPrefix(s, "urn:uuid:") || strings.HasPrefix(s, "urn:oid:")
}

// narrativeAttr is an href or src attribute of a narrative.
var narrativeAttr = regexp.MustCompile(`\b(?:href|src)\s*=\s*(?:"([^"]*)"|'([^']*)')`)

// narrativeLinks is the XHTML div with the links of its href and src
// attributes replaced by link(value), or "" when none is.
func narrativeLinks(div string, link func(string) string) string {
	if !strings.Contains(div, "href") && !strings.Contains(div, "src") {
		return ""
	}
	changed := false
	out := narrativeAttr.ReplaceAllStringFunc(div, func(attr string) string {
		m := narrativeAttr.FindStringSubmatchIndex(attr)
		at, end := m[2], m[3]
		if at < 0 {
			at, end = m[4], m[5]
		}
		to := link(attr[at:end])
		if to == "" || strings.ContainsAny(to, `"'<&`) {
			return attr
		}
		changed = true
		return attr[:at] + to + attr[end:]
	})
	if !changed {
		return ""
	}
	return out
}

// RESTBase is the service base of a RESTful resource URL
// ("https://x/fhir" of "https://x/fhir/Patient/1"), or "".
func RESTBase(u string) string {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return ""
	}
	u, _, _ = strings.Cut(u, "/_history/")
	rest, id := path.Split(u)
	base, typ := path.Split(strings.TrimSuffix(rest, "/"))
	if !fhirjson.ValidID(id) || !profiles.IsResourceType(typ) {
		return ""
	}
	return strings.TrimSuffix(base, "/")
}

// FullURLs maps the fullUrls of a Bundle's entries to the Type/id of the
// resource each entry writes.
type FullURLs map[string]string

// Link is what a link other than a conditional reference becomes (a
// reference, a uri element, a narrative's href): the Type/id of the entry
// whose fullUrl it is, given in full or relative to base, with its
// version kept; else "" to leave it.
func (m FullURLs) Link(s, base string) string {
	if to, ok := m[s]; ok {
		return to
	}
	if head, version, ok := strings.Cut(s, "/_history/"); ok {
		if to := m.Link(head, base); to != "" {
			return to + "/_history/" + version
		}
		return ""
	}
	if typ, id, ok := strings.Cut(s, "/"); ok && profiles.IsResourceType(typ) && fhirjson.ValidID(id) {
		return m[base+"/"+s]
	}
	return ""
}
