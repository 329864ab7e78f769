package patch

// Parsing of a FHIRPath Patch: the Parameters resource is read and checked
// whole before anything is applied, so every syntax error is a 400.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
)

// pvalue is the value of an operation (or of one of its nested parts).
type pvalue struct {
	json any            // a value[x] or resource; nil when built from parts
	ext  map[string]any // the "_value[x]" sibling of a primitive
	typ  string         // FHIR type from the value[x] suffix or resourceType
	// parts, when the value is built from nested parts (a complex value)
	parts []namedValue
	built bool
}

type namedValue struct {
	name string
	val  *pvalue
}

// fpOp is one validated FHIRPath Patch operation.
type fpOp struct {
	typ      string
	pathText string
	path     *fhirpath.Expression
	name     string
	value    *pvalue
	index    int
	source   int
	dest     int
}

func (o *fpOp) desc() string { return o.typ + " " + o.pathText }

// parseFHIRPathPatch validates the whole Parameters resource before
// anything is applied, so every syntax error is a 400.
func parseFHIRPathPatch(parameters []byte) ([]fpOp, error) {
	if err := checkDuplicateKeys(parameters); err != nil {
		return nil, &Error{Status: 400, Op: -1, Msg: "the FHIRPath Patch is not valid JSON: " + err.Error(), Err: err}
	}
	v, err := decode(parameters)
	if err != nil {
		return nil, &Error{Status: 400, Op: -1, Msg: "the FHIRPath Patch is not valid JSON: " + err.Error(), Err: err}
	}
	m, ok := v.(map[string]any)
	if !ok || m["resourceType"] != "Parameters" {
		return nil, badRequest(-1, "", "a FHIRPath Patch must be a Parameters resource")
	}
	var list []any
	if raw, ok := m["parameter"]; ok {
		if list, ok = raw.([]any); !ok {
			return nil, badRequest(-1, "", "Parameters.parameter must be a list")
		}
	}
	if len(list) > MaxOperations {
		return nil, badRequest(-1, "", "the patch has %d operations, more than the limit of %d", len(list), MaxOperations)
	}
	ops := make([]fpOp, len(list))
	for i, item := range list {
		if err := parseOperation(item, &ops[i]); err != nil {
			err.Op = i
			if err.Desc == "" && ops[i].typ != "" && ops[i].pathText != "" {
				err.Desc = ops[i].desc()
			}
			return nil, err
		}
	}
	return ops, nil
}

// valueKey returns the value[x] member of a part ("valueString"), "" when
// there is none, and an error when there are several.
func valueKey(p map[string]any) (string, error) {
	key := ""
	for k := range p {
		if len(k) > 5 && strings.HasPrefix(k, "value") && k[5] >= 'A' && k[5] <= 'Z' {
			if key != "" {
				return "", fmt.Errorf("has both %s and %s", min(key, k), max(key, k))
			}
			key = k
		}
	}
	if key == "" {
		// a primitive with only an id or extensions
		for k := range p {
			if len(k) > 6 && strings.HasPrefix(k, "_value") && k[6] >= 'A' && k[6] <= 'Z' {
				if key != "" {
					return "", fmt.Errorf("has both %s and %s", min(key, k), max(key, k))
				}
				key = k[1:]
			}
		}
	}
	return key, nil
}

func parseOperation(item any, o *fpOp) *Error {
	p, ok := item.(map[string]any)
	if !ok {
		return badRequest(0, "", "a parameter must be a JSON object")
	}
	if name, _ := p["name"].(string); name != "operation" {
		return badRequest(0, "", "parameter named %q: a FHIRPath Patch holds only parameters named \"operation\"", name)
	}
	if k, _ := valueKey(p); k != "" || p["resource"] != nil {
		return badRequest(0, "", "an operation parameter carries its content in parts, not in a value or resource")
	}
	parts, ok := p["part"].([]any)
	if !ok {
		return badRequest(0, "", "an operation parameter must have a list of parts")
	}
	seen := map[string]bool{}
	o.index, o.source, o.dest = -1, -1, -1
	for _, raw := range parts {
		part, ok := raw.(map[string]any)
		if !ok {
			return badRequest(0, "", "a part must be a JSON object")
		}
		name, _ := part["name"].(string)
		if seen[name] {
			return badRequest(0, "", "part %q is given twice", name)
		}
		seen[name] = true
		var err error
		// A part that fails leaves its field zeroed; the op is discarded.
		switch name {
		case "type":
			o.typ, err = stringPart(part)
		case "path":
			o.pathText, err = stringPart(part)
		case "name":
			o.name, err = stringPart(part)
		case "index":
			o.index, err = intPart(part)
		case "source":
			o.source, err = intPart(part)
		case "destination":
			o.dest, err = intPart(part)
		case "value":
			o.value, err = parseValue(part, 0)
		default:
			return badRequest(0, "", "unknown part %q (expected type, path, name, value, index, source or destination)", name)
		}
		if err != nil {
			return badRequest(0, "", "part %q: %v", name, err)
		}
	}
	var need []string
	switch o.typ {
	case "add":
		need = []string{"type", "path", "name", "value"}
	case "insert":
		need = []string{"type", "path", "value", "index"}
	case "delete":
		need = []string{"type", "path"}
	case "replace":
		need = []string{"type", "path", "value"}
	case "move":
		need = []string{"type", "path", "source", "destination"}
	case "":
		return badRequest(0, "", `missing part "type"`)
	default:
		return badRequest(0, "", "unknown operation type %q (expected add, insert, delete, replace or move)", o.typ)
	}
	for _, n := range need {
		if !seen[n] {
			return badRequest(0, "", "%s needs a part %q", o.typ, n)
		}
	}
	for n := range seen {
		if !slices.Contains(need, n) {
			return badRequest(0, "", "%s does not take a part %q", o.typ, n)
		}
	}
	if strings.TrimSpace(o.pathText) == "" {
		return badRequest(0, "", "the path is empty")
	}
	expr, err := fhirpath.Compile(o.pathText)
	if err != nil {
		return &Error{Status: 400, Msg: fmt.Sprintf("path %q is not a valid FHIRPath expression: %v", o.pathText, err), Err: err}
	}
	o.path = expr
	if o.typ == "add" {
		if err := checkName(o.name); err != nil {
			return badRequest(0, "", "name %q: %v", o.name, err)
		}
	}
	return nil
}

func checkName(name string) error {
	if name == "" {
		return errors.New("the name of the element to add is empty")
	}
	if name == "resourceType" || strings.HasPrefix(name, "_") {
		return errors.New("not an element name")
	}
	for _, c := range name {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return errors.New("not an element name")
		}
	}
	return nil
}

func stringPart(part map[string]any) (string, error) {
	k, err := valueKey(part)
	if err != nil {
		return "", err
	}
	s, ok := part[k].(string)
	if k == "" || !ok {
		return "", errors.New("needs a string value (valueString or valueCode)")
	}
	return s, nil
}

func intPart(part map[string]any) (int, error) {
	k, err := valueKey(part)
	if err != nil {
		return 0, err
	}
	n, ok := part[k].(json.Number)
	if k == "" || !ok {
		return 0, errors.New("needs an integer value (valueInteger)")
	}
	i, err := n.Int64()
	if err != nil || i < 0 || i > math.MaxInt32 {
		return 0, fmt.Errorf("%s is not a valid index", n)
	}
	return int(i), nil
}

// maxValueDepth bounds the nesting of parts in a value.
const maxValueDepth = 100

// parseValue reads the value of a part: a value[x] (with its _value[x]
// sibling), a resource, or nested parts that build a complex value.
func parseValue(part map[string]any, depth int) (*pvalue, error) {
	if depth > maxValueDepth {
		return nil, errors.New("parts nested too deeply")
	}
	k, err := valueKey(part)
	if err != nil {
		return nil, err
	}
	res, hasRes := part["resource"]
	sub, hasParts := part["part"]
	n := 0
	for _, b := range []bool{k != "", hasRes, hasParts} {
		if b {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("needs exactly one of a value[x], a resource or parts")
	}
	switch {
	case k != "":
		pv := &pvalue{json: part[k], typ: suffixType(k[5:])}
		if raw, ok := part["_"+k]; ok {
			if pv.ext, ok = raw.(map[string]any); !ok {
				return nil, fmt.Errorf("_%s must be an object", k)
			}
		}
		switch pv.json.(type) {
		case map[string]any:
			if isPrimitiveType(pv.typ) {
				return nil, fmt.Errorf("%s must be a primitive value", k)
			}
			if pv.ext != nil {
				return nil, fmt.Errorf("_%s is only allowed with a primitive value", k)
			}
		case []any:
			return nil, fmt.Errorf("%s must not be a list", k)
		case nil:
			if pv.ext == nil {
				return nil, fmt.Errorf("%s is null", k)
			}
		default:
			if !isPrimitiveType(pv.typ) && pv.typ != "" && pv.typ[0] >= 'A' && pv.typ[0] <= 'Z' {
				return nil, fmt.Errorf("%s must be an object", k)
			}
		}
		return pv, nil
	case hasRes:
		m, ok := res.(map[string]any)
		if !ok {
			return nil, errors.New("resource must be an object")
		}
		rt, _ := m["resourceType"].(string)
		if rt == "" {
			return nil, errors.New("resource has no resourceType")
		}
		return &pvalue{json: m, typ: rt}, nil
	}
	list, ok := sub.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New("part must be a non-empty list")
	}
	pv := &pvalue{built: true}
	for _, raw := range list {
		child, ok := raw.(map[string]any)
		if !ok {
			return nil, errors.New("a part must be a JSON object")
		}
		name, _ := child["name"].(string)
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("nested part name %q: %v", name, err)
		}
		cv, err := parseValue(child, depth+1)
		if err != nil {
			return nil, fmt.Errorf("nested part %q: %v", name, err)
		}
		pv.parts = append(pv.parts, namedValue{name: name, val: cv})
	}
	return pv, nil
}
