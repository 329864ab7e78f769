package fhirserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/profiles"
)

// subsetted is the tag a server puts on a resource it returns only in
// part (_summary, _elements), so that no client mistakes it for the whole.
var subsetted = map[string]string{"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}

// shape applies _summary and _elements to a stored body. Only top-level
// elements are selected, as the specification asks of both. The stored
// bytes are returned untouched when nothing is to be removed.
func shape(typ string, body []byte, summary search.Summary, elements []string) []byte {
	if summary == search.SummaryFalse && len(elements) == 0 {
		return body
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return body // stored bodies are valid JSON; never fail a search over one
	}
	info := elementInfo(typ)
	keep := func(key string) bool {
		base := strings.TrimPrefix(key, "_")
		switch base {
		case "resourceType", "id", "meta":
			return true
		}
		el := info[base]
		switch {
		case len(elements) > 0:
			return el.mandatory || slices.Contains(elements, el.name)
		case summary == search.SummaryTrue:
			return el.summary
		case summary == search.SummaryText:
			return base == "text" || el.mandatory
		case summary == search.SummaryData:
			return base != "text"
		}
		return true
	}
	removed := false
	for k := range members {
		if !keep(k) {
			delete(members, k)
			removed = true
		}
	}
	if !removed && summary != search.SummaryText {
		return body
	}
	members["meta"] = tagSubsetted(members["meta"])
	return encodeMembers(members)
}

// tagSubsetted adds the SUBSETTED tag to a meta element.
func tagSubsetted(raw json.RawMessage) json.RawMessage {
	meta := map[string]any{}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		_ = dec.Decode(&meta)
	}
	tags, _ := meta["tag"].([]any)
	meta["tag"] = append(tags, subsetted)
	out, _ := json.Marshal(meta)
	return out
}

// encodeMembers writes resourceType first (FHIR JSON convention), then the
// other members in name order.
func encodeMembers(m map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "resourceType" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	if rt, ok := m["resourceType"]; ok {
		b.WriteString(`"resourceType":`)
		b.Write(rt)
	}
	for _, k := range keys {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		writeJSONString(&b, k)
		b.WriteByte(':')
		b.Write(m[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// topElement is what shaping needs to know of a top-level element.
type topElement struct {
	name               string // the element name (choice elements without their type suffix)
	summary, mandatory bool
}

var elementInfos sync.Map // resource type → map[json key]topElement

// elementInfo maps the JSON member names of a resource type's top-level
// elements (with every type suffix of choice elements) to their flags.
func elementInfo(typ string) map[string]topElement {
	if m, ok := elementInfos.Load(typ); ok {
		return m.(map[string]topElement)
	}
	m := map[string]topElement{}
	if sd, ok := profiles.TypeDefinition(typ); ok {
		for i := range sd.Elements {
			e := &sd.Elements[i]
			rest, ok := strings.CutPrefix(e.Path, typ+".")
			if !ok || strings.Contains(rest, ".") {
				continue
			}
			te := topElement{name: strings.TrimSuffix(rest, "[x]"), summary: e.IsSummary, mandatory: e.Min > 0}
			if !strings.HasSuffix(rest, "[x]") {
				m[rest] = te
				continue
			}
			for _, t := range e.Type {
				m[te.name+upperFirst(t.Code)] = te
			}
		}
	}
	elementInfos.Store(typ, m)
	return m
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
