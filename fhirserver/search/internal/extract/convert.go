package extract

import (
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/fold"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// convert appends the entries of one result item for a parameter of kind
// k, choosing the conversion by the item's FHIR type.
func convert(code string, k index.Kind, skip Parts, v fhirpath.Value, out []index.Entry) []index.Entry {
	typ := strings.TrimPrefix(strings.TrimPrefix(v.TypeName(), "FHIR."), "System.")
	switch k {
	case index.KindString:
		out = stringEntries(code, typ, skip, v, out)
	case index.KindToken:
		out = tokenEntries(code, typ, v, out)
	case index.KindDate:
		out = dateEntries(code, typ, v, out)
	case index.KindNumber:
		out = numberEntries(code, typ, v, out)
	case index.KindQuantity:
		out = quantityEntries(code, typ, v, out)
	case index.KindReference:
		out = referenceEntries(code, typ, v, out)
	case index.KindURI:
		out = uriEntries(code, typ, v, out)
	}
	return out
}

// primitive returns the text of a primitive item (FHIR primitive node or
// System value); ok=false for complex types and primitives with only an
// extension.
func primitive(v fhirpath.Value) (string, bool) {
	if !v.IsSystem() {
		switch x := v.Raw().(type) {
		case string:
			return x, x != ""
		case bool, interface{ String() string }:
			s := v.String()
			return s, s != ""
		}
		return "", false
	}
	s := v.String()
	return s, s != ""
}

func obj(v fhirpath.Value) map[string]any {
	m, _ := v.Raw().(map[string]any)
	return m
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func strs(m map[string]any, key string) []string {
	switch x := m[key].(type) {
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	case string:
		return []string{x}
	}
	return nil
}

func list(m map[string]any, key string) []map[string]any {
	x, _ := m[key].([]any)
	out := make([]map[string]any, 0, len(x))
	for _, e := range x {
		if o, ok := e.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func stringEntry(code, s string) index.Entry {
	return index.Entry{Param: code, Kind: index.KindString, Str: fold.Normalize(s), Exact: s}
}

// Parts is a set of PartNames, a bit each: the parts of a HumanName
// or Address whose entries a parameter marks Covered (see
// search.Param.Covered).
type Parts uint16

// PartNames are the elements of a HumanName or an Address that a string
// parameter indexes, each its own entry: "given=jo" must match a name
// whose given is "Jo" even if the family comes first in the text.
var PartNames = [...]string{
	"family", "given", "prefix", "suffix", "text", // HumanName
	"line", "city", "district", "state", "postalCode", "country", // Address, and text
}

var (
	humanNameParts = [...]int{0, 1, 2, 3, 4}
	addressParts   = [...]int{5, 6, 7, 8, 9, 10, 4}
)

func stringEntries(code, typ string, skip Parts, v fhirpath.Value, out []index.Entry) []index.Entry {
	var parts []int
	switch typ {
	case "HumanName":
		parts = humanNameParts[:]
	case "Address":
		parts = addressParts[:]
	case "string", "markdown", "code", "id", "uri", "url", "canonical", "String", "uuid", "oid":
		if s, ok := primitive(v); ok {
			out = append(out, stringEntry(code, s))
		}
		return out
	}
	m := obj(v)
	for _, i := range parts {
		for _, s := range strs(m, PartNames[i]) {
			e := stringEntry(code, s)
			e.Covered = skip&(1<<i) != 0
			out = append(out, e)
		}
	}
	return out
}

func tokenEntries(code, typ string, v fhirpath.Value, out []index.Entry) []index.Entry {
	switch typ {
	case "Coding":
		m := obj(v)
		if c := codingEntry(code, m); c.Code != "" || c.System != "" {
			out = append(out, c)
		}
	case "CodeableConcept":
		m := obj(v)
		for _, c := range list(m, "coding") {
			if e := codingEntry(code, c); e.Code != "" || e.System != "" {
				out = append(out, e)
			}
		}
		if text := str(m, "text"); text != "" {
			// An entry of its own: :text matches the text or any display,
			// each as a string search of its own. No equality keys.
			out = append(out, index.Entry{Param: code, Kind: index.KindToken, Text: text})
		}
	case "Identifier":
		m := obj(v)
		e := index.Entry{Param: code, Kind: index.KindToken, System: str(m, "system"), Code: str(m, "value")}
		if t, ok := m["type"].(map[string]any); ok {
			e.Text = str(t, "text")
			if cs := list(t, "coding"); len(cs) > 0 {
				e.TypeSystem, e.TypeCode = str(cs[0], "system"), str(cs[0], "code")
				if e.Text == "" {
					e.Text = str(cs[0], "display")
				}
			}
		}
		if e.Code != "" || e.System != "" {
			out = append(out, e)
		}
	case "ContactPoint":
		// R4 matches telecom tokens on the value; the expressions already
		// select by ContactPoint.system (phone, email).
		m := obj(v)
		if s := str(m, "value"); s != "" {
			out = append(out, index.Entry{Param: code, Kind: index.KindToken, Code: s})
		}
	case "boolean", "Boolean", "code", "string", "String", "id", "uri", "url", "canonical", "oid", "uuid", "markdown", "integer", "Integer", "positiveInt", "unsignedInt":
		if s, ok := primitive(v); ok {
			out = append(out, index.Entry{Param: code, Kind: index.KindToken, Code: s})
		}
	}
	return out
}

func codingEntry(code string, m map[string]any) index.Entry {
	return index.Entry{Param: code, Kind: index.KindToken, System: str(m, "system"), Code: str(m, "code"), Text: str(m, "display")}
}

func uriEntries(code, typ string, v fhirpath.Value, out []index.Entry) []index.Entry {
	switch typ {
	case "uri", "url", "canonical", "oid", "uuid", "string", "String", "code", "id":
		if s, ok := primitive(v); ok {
			out = append(out, index.Entry{Param: code, Kind: index.KindURI, URI: s})
		}
	}
	return out
}

func referenceEntries(code, typ string, v fhirpath.Value, out []index.Entry) []index.Entry {
	switch typ {
	case "Reference":
		m := obj(v)
		e := index.Entry{Param: code, Kind: index.KindReference}
		if ref := str(m, "reference"); ref != "" && !strings.HasPrefix(ref, "#") {
			// Contained references ("#id") point inside this resource and
			// are not searchable by id; their identifier still is.
			e.RefType, e.RefID, e.RefVersion, e.URL = parseReference(ref)
		}
		if e.RefType == "" && e.RefID != "" {
			e.RefType = str(m, "type")
		}
		if id, ok := m["identifier"].(map[string]any); ok {
			e.IdentSystem, e.IdentValue = str(id, "system"), str(id, "value")
		}
		if e.RefID != "" || e.URL != "" || e.IdentValue != "" || e.IdentSystem != "" {
			out = append(out, e)
		}
	case "canonical", "uri", "url", "String", "string":
		if s, ok := primitive(v); ok && !strings.HasPrefix(s, "#") {
			e := index.Entry{Param: code, Kind: index.KindReference}
			if typ == "canonical" {
				// A canonical may pin a version: "url|1.0".
				if i := strings.LastIndexByte(s, '|'); i >= 0 {
					s, e.RefVersion = s[:i], s[i+1:]
				}
				e.URL = s
			} else {
				var ver string
				e.RefType, e.RefID, ver, e.URL = parseReference(s)
				if e.RefVersion == "" {
					e.RefVersion = ver
				}
			}
			if e.RefID != "" || e.URL != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// parseReference splits a literal reference: "Type/id",
// "Type/id/_history/v", an absolute URL ending in one of those (url is
// then the whole reference, minus the history part), or any other
// absolute URI (urn:uuid:…, urn:oid:…), kept as url only. A relative
// reference with an unknown type gives nothing.
func parseReference(ref string) (typ, id, version, url string) {
	abs := strings.Contains(ref, ":")
	path := ref
	if abs {
		url = ref
	}
	if i := strings.Index(path, "/_history/"); i >= 0 {
		version = path[i+len("/_history/"):]
		path = path[:i]
		if abs {
			url = path
		}
		if strings.Contains(version, "/") {
			return "", "", "", url
		}
	}
	j := strings.LastIndexByte(path, '/')
	if j <= 0 {
		return "", "", "", url
	}
	id = path[j+1:]
	head := path[:j]
	typ = head[strings.LastIndexByte(head, '/')+1:]
	if !profiles.IsResourceType(typ) || id == "" || !syntax.ValidID(id) {
		return "", "", "", url
	}
	return typ, id, version, url
}
