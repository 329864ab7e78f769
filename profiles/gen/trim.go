package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// object is a decoded JSON object. Numbers are kept as json.Number so that
// their text (for example "1.0") survives the round trip unchanged.
type object = map[string]any

// shape describes which parts of a JSON value to keep.
type shape struct {
	// fields maps a kept key to the shape of its value; a nil shape keeps
	// the value as it is.
	fields map[string]*shape
	// prefixes keeps, as they are, keys that start with one of these
	// (choice elements such as fixed[x]: fixedCode, fixedUri, …).
	prefixes []string
	// keep, if set, filters the objects of an array value: those for which
	// it returns false are dropped.
	keep func(object) bool
}

// fields builds a shape that keeps the named keys as they are.
func fields(names ...string) *shape {
	s := &shape{fields: make(map[string]*shape, len(names))}
	for _, n := range names {
		s.fields[n] = nil
	}
	return s
}

// with adds (or replaces) a key whose value is trimmed by sub.
func (s *shape) with(name string, sub *shape) *shape {
	s.fields[name] = sub
	return s
}

// apply returns the trimmed copy of v. Arrays left empty by keep are
// returned as nil so that the caller drops the key.
func (s *shape) apply(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, 0, len(v))
		for _, item := range v {
			if o, ok := item.(object); ok && s.keep != nil && !s.keep(o) {
				continue
			}
			out = append(out, s.apply(item))
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case object:
		out := make(object, len(s.fields))
		for k, x := range v {
			sub, ok := s.fields[k]
			switch {
			case ok && sub == nil:
				out[k] = x
			case ok:
				if y := sub.apply(x); y != nil {
					out[k] = y
				}
			case hasAnyPrefix(k, s.prefixes):
				out[k] = x
			}
		}
		return out
	default:
		return v
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Extensions kept on ElementDefinition.type: the FHIR type of a primitive's
// value element and the regular expression its value must match.
const (
	extFHIRType = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"
	extRegex    = "http://hl7.org/fhir/StructureDefinition/regex"
)

var (
	elementShape = fields("id", "path", "sliceName", "min", "max", "base", "contentReference",
		"maxLength", "condition", "isModifier", "isSummary", "representation").
		with("type", fields("code", "profile", "targetProfile").
			with("extension", &shape{
				fields: fields("url", "valueUrl", "valueUri", "valueString").fields,
				keep: func(o object) bool {
					u := str(o, "url")
					return u == extFHIRType || u == extRegex
				},
			})).
		with("constraint", fields("key", "severity", "human", "expression", "source")).
		with("binding", fields("strength", "valueSet")).
		with("slicing", fields("discriminator", "rules", "ordered"))

	structureDefinitionShape = fields("resourceType", "id", "url", "version", "name", "kind",
		"abstract", "type", "baseDefinition", "derivation", "fhirVersion").
		with("snapshot", fields().with("element", elementShape))

	searchParameterShape = fields("resourceType", "id", "url", "name", "code", "base", "type",
		"expression", "target", "multipleOr", "multipleAnd", "comparator", "modifier", "chain").
		with("component", fields("definition", "expression"))

	compartmentShape = fields("resourceType", "id", "url", "version", "name", "code").
				with("resource", fields("code", "param"))

	codeSystemShape = fields("resourceType", "id", "url", "version", "name", "content",
		"caseSensitive", "hierarchyMeaning").
		with("concept", recursive("concept", "code", "display"))

	conceptSetShape = fields("system", "version", "valueSet").
			with("concept", fields("code", "display")).
			with("filter", fields("property", "op", "value"))

	valueSetShape = fields("resourceType", "id", "url", "version", "name").
			with("compose", fields().with("include", conceptSetShape).with("exclude", conceptSetShape)).
			with("expansion", fields().with("contains", recursive("contains", "system", "code", "display")))
)

func init() {
	elementShape.prefixes = []string{"fixed", "pattern", "minValue", "maxValue"}
}

// recursive builds a shape for a tree: it keeps names and nests itself
// under child.
func recursive(child string, names ...string) *shape {
	s := fields(names...)
	s.fields[child] = s
	return s
}

// str returns o[key] if it is a string.
func str(o object, key string) string {
	s, _ := o[key].(string)
	return s
}

// readBundle decodes the resources of the Bundle in path.
func readBundle(path string) ([]object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b struct {
		ResourceType string `json:"resourceType"`
		Entry        []struct {
			Resource object `json:"resource"`
		} `json:"entry"`
	}
	dec := json.NewDecoder(f)
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if b.ResourceType != "Bundle" {
		return nil, fmt.Errorf("%s: resourceType %q, want Bundle", path, b.ResourceType)
	}
	out := make([]object, 0, len(b.Entry))
	for _, e := range b.Entry {
		if e.Resource != nil {
			out = append(out, e.Resource)
		}
	}
	return out, nil
}

// marshal encodes v compactly, without HTML escaping. Map keys come out
// sorted, so the result is deterministic.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only decoded JSON values and strings reach here.
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// jsonLines encodes items as a JSON array with one item per line.
func jsonLines[T any](items []T) []byte {
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, it := range items {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
		buf.Write(marshal(it))
	}
	buf.WriteString("\n]\n")
	return buf.Bytes()
}

// gzipBytes compresses data with a fixed header (no name, no time).
func gzipBytes(data []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		panic(err)
	}
	if _, err := zw.Write(data); err != nil {
		panic(err)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
