package fhirjson

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apb "github.com/google/fhir/go/proto/google/fhir/proto/annotations_go_proto"
	crpb "github.com/google/fhir/go/proto/google/fhir/proto/r4/core/resources/bundle_and_contained_resource_go_proto"
)

type msgDesc = protoreflect.MessageDescriptor

var containedDesc = (&crpb.ContainedResource{}).ProtoReflect().Descriptor()

type pathSeg struct {
	name  string
	index string // "[n]" or ""
}

func splitPath(p string) []pathSeg {
	parts := strings.Split(p, ".")
	segs := make([]pathSeg, 0, len(parts))
	for _, s := range parts {
		name, idx := s, ""
		if i := strings.IndexByte(s, '['); i >= 0 {
			name, idx = s[:i], s[i:]
		}
		segs = append(segs, pathSeg{name, idx})
	}
	return segs
}

// protoPathExpr converts a path from google/fhir's validation pass, which
// names proto fields ("Observation.value.quantity.code",
// "Bundle.entry[0].resource.patient.birthDate",
// "Patient.birthDate.extension[0]"), into the JSON member names the client
// wrote ("Observation.valueQuantity.code", "Bundle.entry[0].resource.birthDate",
// "Patient._birthDate.extension[0]"), by walking the proto descriptors. It
// also returns the descriptor of the last element, for required-field
// messages. Unknown segments are kept as they are.
func protoPathExpr(p string) (string, msgDesc) {
	if p == "" {
		return "", nil
	}
	segs := splitPath(p)
	root := containedDesc.Fields().ByJSONName(lowerFirst(segs[0].name))
	if root == nil || root.Message() == nil {
		return p, nil
	}
	var b strings.Builder
	b.WriteString(segs[0].name)
	b.WriteString(segs[0].index)
	md := root.Message()
	for i := 1; i < len(segs); i++ {
		sg := segs[i]
		f := md.Fields().ByJSONName(sg.name)
		if f == nil || f.Message() == nil {
			for _, rest := range segs[i:] {
				b.WriteString("." + rest.name + rest.index)
			}
			return b.String(), nil
		}
		fm := f.Message()
		name := sg.name
		var next *pathSeg
		if i+1 < len(segs) {
			next = &segs[i+1]
		}
		switch {
		case fm.FullName() == containedDesc.FullName():
			// "resource.patient": the second segment picks the resource
			// type inside ContainedResource and has no JSON member.
			b.WriteString("." + name + sg.index)
			md = fm
			if next != nil {
				if rf := fm.Fields().ByJSONName(next.name); rf != nil && rf.Message() != nil {
					md = rf.Message()
					i++
				}
			}
			continue
		case isChoice(fm) && next != nil:
			// "value.quantity" is the JSON member "valueQuantity".
			if cf := fm.Fields().ByJSONName(next.name); cf != nil && cf.Message() != nil {
				b.WriteString("." + name + upperFirst(next.name) + sg.index + next.index)
				md = cf.Message()
				i++
				continue
			}
		case isPrimitive(fm) && next != nil && (next.name == "extension" || next.name == "id"):
			// A primitive's id and extensions live in the "_name" member.
			name = "_" + name
		case f.ContainingOneof() != nil && f.ContainingOneof().Name() == "reference":
			// Reference.reference is split by target type in the proto.
			name = "reference"
		}
		b.WriteString("." + name + sg.index)
		md = fm
	}
	return b.String(), md
}

func isChoice(md msgDesc) bool {
	return md != nil && proto.HasExtension(md.Options(), apb.E_IsChoiceType)
}

func isPrimitive(md msgDesc) bool {
	if md == nil {
		return false
	}
	k, _ := proto.GetExtension(md.Options(), apb.E_StructureDefinitionKind).(apb.StructureDefinitionKindValue)
	return k == apb.StructureDefinitionKindValue_KIND_PRIMITIVE_TYPE
}

// isChoiceField reports whether the member name of md is a choice (value[x]).
func isChoiceField(md msgDesc, name string) bool {
	if md == nil {
		return false
	}
	f := md.Fields().ByJSONName(name)
	return f != nil && isChoice(f.Message())
}

func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// lookupRaw returns the raw JSON at expr ("Patient.name[0].given[1]"; the
// first segment is the root) in data, which has passed the guard, or nil.
// It is only used to quote offending values in messages.
func lookupRaw(data []byte, expr string) []byte {
	segs := splitPath(expr)
	i := skipSpace(data, 0)
	for _, sg := range segs[1:] {
		var ok bool
		if i, ok = memberValue(data, i, sg.name); !ok {
			return nil
		}
		for idx := sg.index; idx != ""; {
			end := strings.IndexByte(idx, ']')
			if !strings.HasPrefix(idx, "[") || end < 0 {
				return nil
			}
			n, err := strconv.Atoi(idx[1:end])
			if err != nil {
				return nil
			}
			if i, ok = arrayElem(data, i, n); !ok {
				return nil
			}
			idx = idx[end+1:]
		}
	}
	if i >= len(data) {
		return nil
	}
	return data[i:skipValue(data, i)]
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
		for i < len(d) && !strings.ContainsRune(",}] \t\r\n", rune(d[i])) {
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

// memberValue finds member name of the object at d[i] and returns where its
// value starts.
func memberValue(d []byte, i int, name string) (int, bool) {
	if i >= len(d) || d[i] != '{' {
		return 0, false
	}
	i = skipSpace(d, i+1)
	for i < len(d) && d[i] == '"' {
		kEnd := skipString(d, i)
		k, _ := unquote(d[i:kEnd])
		i = skipSpace(d, kEnd)
		if i >= len(d) || d[i] != ':' {
			return 0, false
		}
		i = skipSpace(d, i+1)
		if string(k) == name {
			return i, true
		}
		i = skipSpace(d, skipValue(d, i))
		if i < len(d) && d[i] == ',' {
			i = skipSpace(d, i+1)
		}
	}
	return 0, false
}

// arrayElem returns where element n of the array at d[i] starts.
func arrayElem(d []byte, i, n int) (int, bool) {
	if i >= len(d) || d[i] != '[' {
		return 0, false
	}
	i = skipSpace(d, i+1)
	for k := 0; i < len(d) && d[i] != ']'; k++ {
		if k == n {
			return i, true
		}
		i = skipSpace(d, skipValue(d, i))
		if i < len(d) && d[i] == ',' {
			i = skipSpace(d, i+1)
		}
	}
	return 0, false
}
