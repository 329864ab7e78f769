// Package shape applies _summary and _elements to a stored resource's
// JSON: what a read, history or search returns of it when the client asks
// for part of it.
package shape

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/internal/jsonquote"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/profiles"
)

// subsetted is the tag a server puts on a resource it returns only in
// part (_summary, _elements), so that no client mistakes it for the whole.
var subsetted = map[string]string{"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}

// Apply applies _summary and _elements to a stored body. _elements
// selects top-level elements, as the specification asks. _summary=true
// keeps the elements the base definition marks as summary, at every level
// of the resource's own structure (backbone elements); inside data types
// everything is summary except Attachment.data. The stored bytes are
// returned untouched when nothing is to be removed.
func Apply(typ string, body []byte, summary search.Summary, elements []string) []byte {
	if summary == search.SummaryFalse && len(elements) == 0 {
		return body
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return body // stored bodies are valid JSON; never fail a search over one
	}
	sh := shapeOf(typ)
	info := sh[typ]
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
		case summary == search.SummaryText:
			return base == "text" || el.mandatory
		case summary == search.SummaryData:
			return base != "text"
		}
		return true
	}
	removed := false
	if summary == search.SummaryTrue && len(elements) == 0 {
		removed = sh.summarize(members, typ)
	} else {
		for k := range members {
			if !keep(k) {
				delete(members, k)
				removed = true
			}
		}
	}
	if !removed && summary != search.SummaryText {
		return body
	}
	members["meta"] = tagSubsetted(members["meta"])
	return encodeMembers(members)
}

// summarize removes from the members of an object at path the elements
// that are not summary, descending into the backbone elements it keeps,
// and reports whether it removed anything.
func (sh typeShape) summarize(members map[string]json.RawMessage, path string) bool {
	info, known := sh[path]
	if !known {
		return false
	}
	removed := false
	for k, raw := range members {
		base := strings.TrimPrefix(k, "_")
		if base == "resourceType" || base == "meta" || base == "id" && !strings.Contains(path, ".") {
			continue
		}
		el, ok := info[base]
		if !ok || !el.summary {
			delete(members, k)
			removed = true
			continue
		}
		if k != base {
			continue // a primitive's id and extensions
		}
		var changed bool
		switch {
		case el.children != "":
			raw, changed = eachObject(raw, func(m map[string]json.RawMessage) bool { return sh.summarize(m, el.children) })
		case el.attachment:
			raw, changed = eachObject(raw, func(m map[string]json.RawMessage) bool {
				_, data := m["data"]
				_, ext := m["_data"]
				delete(m, "data")
				delete(m, "_data")
				return data || ext
			})
		}
		if changed {
			members[k] = raw
			removed = true
		}
	}
	return removed
}

// eachObject applies f to raw, an object or an array of objects, and
// returns it re-encoded when f changed any.
func eachObject(raw json.RawMessage, f func(map[string]json.RawMessage) bool) (json.RawMessage, bool) {
	var one map[string]json.RawMessage
	if json.Unmarshal(raw, &one) == nil {
		if !f(one) {
			return raw, false
		}
		return encodeMembers(one), true
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) != nil {
		return raw, false
	}
	changed := false
	for i, item := range many {
		if out, ok := eachObject(item, f); ok {
			many[i], changed = out, true
		}
	}
	if !changed {
		return raw, false
	}
	out, err := json.Marshal(many)
	if err != nil {
		return raw, false
	}
	return out, true
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
		b.Write(jsonquote.Append(b.AvailableBuffer(), k))
		b.WriteByte(':')
		b.Write(m[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// shapeElement is what shaping needs to know of an element.
type shapeElement struct {
	name               string // the element name (choice elements without their type suffix)
	summary, mandatory bool
	// children is the path under which the definition lists the
	// element's own children (a backbone element, or the element a
	// contentReference names); "" for a data type.
	children   string
	attachment bool
}

// typeShape maps the path of an object in a resource type's definition
// (the type itself, or a backbone element) to the JSON member names of
// its children (with every type suffix of choice elements).
type typeShape map[string]map[string]shapeElement

var typeShapes sync.Map // resource type → typeShape

func shapeOf(typ string) typeShape {
	if sh, ok := typeShapes.Load(typ); ok {
		return sh.(typeShape)
	}
	sh := typeShape{typ: {}}
	if sd, ok := profiles.TypeDefinition(typ); ok {
		parents := map[string]bool{}
		for i := range sd.Elements {
			if p := sd.Elements[i].Path; strings.Contains(p, ".") {
				parents[p[:strings.LastIndexByte(p, '.')]] = true
			}
		}
		for i := range sd.Elements {
			e := &sd.Elements[i]
			cut := strings.LastIndexByte(e.Path, '.')
			if cut < 0 {
				continue
			}
			parent, last := e.Path[:cut], e.Path[cut+1:]
			el := shapeElement{name: strings.TrimSuffix(last, "[x]"), summary: e.IsSummary, mandatory: e.Min > 0}
			switch {
			case e.ContentReference != "":
				el.children = strings.TrimPrefix(e.ContentReference, "#")
			case parents[e.Path]:
				el.children = e.Path
			}
			for _, t := range e.Type {
				el.attachment = el.attachment || t.Code == "Attachment"
			}
			if sh[parent] == nil {
				sh[parent] = map[string]shapeElement{}
			}
			if !strings.HasSuffix(last, "[x]") {
				sh[parent][last] = el
				continue
			}
			for _, t := range e.Type {
				sh[parent][el.name+upperFirst(t.Code)] = el
			}
		}
	}
	typeShapes.Store(typ, sh)
	return sh
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
