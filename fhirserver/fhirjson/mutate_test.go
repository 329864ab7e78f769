package fhirjson

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// Systematic mutations of the corpus for the differential test: each
// takes a decoded resource, changes one thing, and encodes it again
// (encoding/json sorts the members, so resourceType is rarely first, which
// exercises the guard's record of late resourceType members).

type jsonStep struct {
	key   string // "" for an array element
	index int
}

// site is one value of a document: its container and where in it.
type site struct {
	path   []jsonStep
	parent any // map[string]any or []any
	key    string
	index  int
}

func (s site) value() any {
	if m, ok := s.parent.(map[string]any); ok {
		return m[s.key]
	}
	return s.parent.([]any)[s.index]
}

func (s site) set(v any) {
	if m, ok := s.parent.(map[string]any); ok {
		m[s.key] = v
		return
	}
	s.parent.([]any)[s.index] = v
}

func (s site) member() bool { _, ok := s.parent.(map[string]any); return ok }

func sites(v any, path []jsonStep, out []site) []site {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(path[:len(path):len(path)], jsonStep{key: k})
			out = append(out, site{path: p, parent: x, key: k})
			out = sites(x[k], p, out)
		}
	case []any:
		for i, e := range x {
			p := append(path[:len(path):len(path)], jsonStep{index: i})
			out = append(out, site{path: p, parent: x, index: i})
			out = sites(e, p, out)
		}
	}
	return out
}

func decodeJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	_, ok := v.(map[string]any)
	return v, ok
}

func encodeJSON(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(b.Bytes())
}

// mutation changes the value at s; false when it does not apply there.
type mutation struct {
	name  string
	apply func(r *rand.Rand, s site) bool
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

var badStrings = []string{
	"a  b", " lead", "trail ", "2020-13-01", "2021-02-29", "2020-01-01T25:00:00Z", "2020-01-01T10:00:00",
	"2020-1-1", "-2020", "10:60:00", "urn:uuid:ABC", "urn:oid:1.02", "x y", "%zz", "http://[::1", ":x",
	"a:b/c", "http://host:port/", "not base64!", "QQ=", "ab\u0001cd", "true", "1.5", "Patient/1",
	strings.Repeat("a", 65), "zz-unknown-code",
}

var badNumbers = []any{json.Number("-1"), json.Number("0"), json.Number("1.5"), json.Number("1e3"), json.Number("-0"),
	json.Number("2147483648"), json.Number("3000000000"), json.Number("4294967296"), json.Number("99999999999")}

var badReferences = []string{"Group/1", "Organization/x", "Patient/1/_history/2", "Resource/1", "Nope/1", "#frag", "Patient/", "Practitioner/1/x"}

var choiceTypes = []string{"String", "Boolean", "Quantity", "Foo", "DateTime", "CodeableConcept", "Reference", "Integer", "Period", "Meta"}

func isPrimitiveValue(v any) bool {
	switch v.(type) {
	case string, bool, json.Number:
		return true
	}
	return false
}

// choicePrefix splits "valueQuantity" into "value"; "" when the name has no
// upper-case letter after a lower-case start.
func choicePrefix(name string) string {
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			return name[:i]
		}
	}
	return ""
}

var mutations = []mutation{
	{"rename", func(r *rand.Rand, s site) bool {
		m, ok := s.parent.(map[string]any)
		if !ok || s.key == "resourceType" {
			return false
		}
		v := m[s.key]
		delete(m, s.key)
		m[pick(r, []string{s.key + "x", "x" + s.key, "unknownElement", "_" + s.key})] = v
		return true
	}},
	{"drop", func(r *rand.Rand, s site) bool {
		if m, ok := s.parent.(map[string]any); ok && len(m) > 1 {
			delete(m, s.key)
			return true
		}
		return false
	}},
	{"wrong kind", func(r *rand.Rand, s site) bool {
		s.set(pick(r, []any{"text", json.Number("42"), json.Number("1.5"), true, map[string]any{"id": "x"}, []any{"a"}, []any{map[string]any{"id": "x"}}}))
		return true
	}},
	{"array vs single", func(r *rand.Rand, s site) bool {
		if a, ok := s.value().([]any); ok {
			if len(a) == 0 {
				return false
			}
			s.set(a[0])
			return true
		}
		s.set([]any{s.value()})
		return true
	}},
	{"duplicate element", func(r *rand.Rand, s site) bool {
		a, ok := s.value().([]any)
		if !ok || len(a) == 0 {
			return false
		}
		s.set(append(a, a[len(a)-1]))
		return true
	}},
	{"bad string", func(r *rand.Rand, s site) bool {
		v, ok := s.value().(string)
		if !ok {
			return false
		}
		switch r.IntN(3) {
		case 0:
			s.set(pick(r, badStrings))
		case 1:
			s.set(strings.ToUpper(v))
		default:
			s.set(strings.ReplaceAll(v, "-", "_") + pick(r, []string{"", "x", " y", "\t"}))
		}
		return true
	}},
	{"bad number", func(r *rand.Rand, s site) bool {
		if _, ok := s.value().(json.Number); !ok {
			return false
		}
		s.set(pick(r, badNumbers))
		return true
	}},
	{"reference type", func(r *rand.Rand, s site) bool {
		if _, ok := s.value().(string); !ok || s.key != "reference" {
			return false
		}
		s.set(pick(r, badReferences))
		return true
	}},
	{"choice suffix", func(r *rand.Rand, s site) bool {
		m, ok := s.parent.(map[string]any)
		p := choicePrefix(s.key)
		if !ok || p == "" {
			return false
		}
		name := p + pick(r, choiceTypes)
		if r.IntN(2) == 0 { // a second type of the same choice
			m[name] = pick(r, []any{"x", true, json.Number("1"), map[string]any{"value": json.Number("1")}})
			return true
		}
		v := m[s.key]
		delete(m, s.key)
		m[name] = v
		return true
	}},
	{"companion", func(r *rand.Rand, s site) bool {
		m, ok := s.parent.(map[string]any)
		if !ok || strings.HasPrefix(s.key, "_") || s.key == "resourceType" {
			return false
		}
		ext := []any{map[string]any{"url": "http://example.org/x", "valueString": "y"}}
		objs := []any{
			map[string]any{"id": "a"},
			map[string]any{"extension": ext},
			map[string]any{"value": json.Number("1")},
			map[string]any{"extension": []any{map[string]any{"valueString": "y"}}},
			map[string]any{"id": "a", "_id": map[string]any{"extension": ext}},
		}
		switch v := m[s.key].(type) {
		case []any:
			comp := make([]any, len(v)+r.IntN(2))
			for i := range comp {
				comp[i] = pick(r, objs[:2])
			}
			if len(comp) > 1 {
				comp[r.IntN(len(comp))] = nil
			}
			if r.IntN(2) == 0 && len(v) > 0 && isPrimitiveValue(v[0]) && len(v) == len(comp) {
				for i := range v {
					if comp[i] != nil && r.IntN(2) == 0 {
						v[i] = nil // a placeholder where "_x" has the position
						break
					}
				}
			}
			m["_"+s.key] = comp
		default:
			if r.IntN(4) == 0 {
				m["_"+s.key] = []any{pick(r, objs)}
			} else {
				m["_"+s.key] = pick(r, objs)
			}
		}
		return true
	}},
	{"resourceType", func(r *rand.Rand, s site) bool {
		if s.key != "resourceType" || len(s.path) == 1 {
			return false
		}
		if r.IntN(4) == 0 {
			delete(s.parent.(map[string]any), "resourceType")
			return true
		}
		s.set(pick(r, []any{"Nope", "DomainResource", "Resource", json.Number("7"), "patient"}))
		return true
	}},
	{"unknown member", func(r *rand.Rand, s site) bool {
		m, ok := s.value().(map[string]any)
		if !ok {
			return false
		}
		m[pick(r, []string{"foo", "fhir_comments", "resourceType", "contained", "fragment", "patientId", "_text"})] = pick(r, []any{json.Number("1"), "x", map[string]any{"id": "x"}})
		return true
	}},
}

// mutants returns up to n mutations of body (whose JSON must be an
// object), each named by what was done where.
func mutants(body []byte, n int, seed uint64) map[string][]byte {
	out := map[string][]byte{}
	r := rand.New(rand.NewPCG(seed, 22))
	for tries := 0; len(out) < n && tries < 20*n; tries++ {
		doc, ok := decodeJSON(body)
		if !ok {
			return out
		}
		ss := sites(doc, nil, nil)
		if len(ss) == 0 {
			return out
		}
		s := pick(r, ss)
		mu := pick(r, mutations)
		if !mu.apply(r, s) {
			continue
		}
		var where strings.Builder
		for _, st := range s.path {
			if st.key != "" {
				where.WriteString("." + st.key)
			} else {
				where.WriteString("[" + string(rune('0'+st.index%10)) + "]")
			}
		}
		out[mu.name+" at "+where.String()] = encodeJSON(doc)
	}
	return out
}

// TestDifferentialMutations runs both checks on mutations of every
// fixture that is a resource.
func TestDifferentialMutations(t *testing.T) {
	e := newDiffEnv(t)
	files := corpus(t)
	counts := map[string]int{}
	total, refused := 0, 0
	for _, name := range sortedNames(files) {
		body := files[name]
		if len(body) > 30<<10 || !bytes.Contains(body, []byte(`"resourceType"`)) {
			continue
		}
		n := 16
		if strings.HasPrefix(name, "fhir/") {
			n = 4 // the shared examples: many files, a few each
		}
		if testing.Short() {
			n = 2
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		for what, m := range mutants(body, n, h.Sum64()) {
			c := checkAgreement(t, e, name+": "+what, m, counts)
			total++
			if len(c.ours) > 0 {
				refused++
			}
		}
	}
	t.Logf("%d mutants, %d refused; explained differences: %v", total, refused, counts)
	if os.Getenv("KILN_SHARED") == "" {
		t.Log("mutations of the official R4 examples were not run: set KILN_SHARED")
	}
}
