package patch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
)

// FHIRPathPatch applies a FHIRPath Patch (a Parameters resource) to the
// JSON of a FHIR resource and returns the patched JSON. The patch is
// atomic: on error nothing is returned. Errors about the patch are *Error
// values.
func FHIRPathPatch(resource, parameters []byte) ([]byte, error) {
	return FHIRPathPatchContext(context.Background(), resource, parameters)
}

// FHIRPathPatchContext is FHIRPathPatch with a context that bounds the
// evaluation of the FHIRPath expressions.
func FHIRPathPatchContext(ctx context.Context, resource, parameters []byte) ([]byte, error) {
	ops, err := parseFHIRPathPatch(parameters)
	if err != nil {
		return nil, err
	}
	v, err := decode(resource)
	if err != nil {
		return nil, fmt.Errorf("patch: the resource is not valid JSON: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("patch: the resource is not a JSON object")
	}
	p := &fpPatcher{ctx: ctx, root: root}
	for i := range ops {
		if err := p.apply(&ops[i]); err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Op, e.Desc = i, ops[i].desc()
			}
			return nil, err
		}
	}
	if err := checkResult(root); err != nil {
		return nil, err
	}
	return encode(root)
}

// fpPatcher applies operations to one document.
type fpPatcher struct {
	ctx  context.Context
	root map[string]any
	work int
}

// evaluate runs expr and locates each result in the document.
func (p *fpPatcher) evaluate(expr *fhirpath.Expression) ([]*slot, error) {
	coll, err := expr.Evaluate(p.ctx, p.root)
	if err != nil {
		return nil, p.evalError(err)
	}
	if len(coll) == 0 {
		return nil, nil
	}
	needPrims := false
	for _, v := range coll {
		if v.IsSystem() {
			return nil, unprocessable(0, "", "the path yields a %s, not an element of the resource", v.TypeName())
		}
		if _, ok := v.Raw().(map[string]any); !ok {
			needPrims = true
		}
	}
	ix, err := indexDocument(p.root, needPrims, &p.work)
	if err != nil {
		return nil, unprocessable(0, "", "%v", err)
	}
	if needPrims {
		// evaluate again, now that every primitive has a sibling object
		coll, err = expr.Evaluate(p.ctx, p.root)
		ix.restore()
		if err != nil {
			return nil, p.evalError(err)
		}
	}
	slots := make([]*slot, len(coll))
	for i, v := range coll {
		if slots[i] = ix.slotOf(v); slots[i] == nil {
			return nil, unprocessable(0, "", "the path selects a %s that cannot be located in the resource", v.TypeName())
		}
	}
	return slots, nil
}

func (p *fpPatcher) evalError(err error) error {
	if ctxErr := p.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return &Error{Status: 422, Msg: "evaluating the path: " + err.Error(), Err: err}
}

// single evaluates a path that must select exactly one element (or, with
// optional, at most one).
func (p *fpPatcher) single(o *fpOp, optional bool) (*slot, error) {
	slots, err := p.evaluate(o.path)
	if err != nil {
		return nil, err
	}
	switch {
	case len(slots) == 0 && optional:
		return nil, nil
	case len(slots) == 0:
		return nil, unprocessable(0, "", "the path %s selects nothing", o.pathText)
	case len(slots) > 1:
		return nil, unprocessable(0, "", "the path %s selects %d elements; %s needs exactly one", o.pathText, len(slots), o.typ)
	}
	return slots[0], nil
}

func (p *fpPatcher) apply(o *fpOp) error {
	switch o.typ {
	case "add":
		s, err := p.single(o, false)
		if err != nil {
			return err
		}
		return p.add(s, o)
	case "insert", "move":
		obj, key, err := p.list(o)
		if err != nil {
			return err
		}
		if o.typ == "insert" {
			return p.insert(obj, key, o)
		}
		return p.move(obj, key, o)
	case "delete":
		s, err := p.single(o, true)
		if err != nil || s == nil {
			return err
		}
		if s.isRoot() {
			return unprocessable(0, "", "cannot delete the resource itself")
		}
		deleteSlot(s)
		return nil
	case "replace":
		s, err := p.single(o, false)
		if err != nil {
			return err
		}
		return p.replace(s, o)
	}
	return badRequest(0, "", "unknown operation type %q", o.typ)
}

// list finds the list an insert or move works on: the one the selected
// elements belong to. An insert into a list that does not exist yet is
// found through the parent of its last member step.
func (p *fpPatcher) list(o *fpOp) (map[string]any, string, error) {
	slots, err := p.evaluate(o.path)
	if err != nil {
		return nil, "", err
	}
	if len(slots) == 0 {
		prefix, name, ok := splitLastMember(o.pathText)
		if o.typ != "insert" || !ok {
			return nil, "", unprocessable(0, "", "the path %s selects nothing", o.pathText)
		}
		expr, err := fhirpath.Compile(prefix)
		if err != nil {
			return nil, "", unprocessable(0, "", "the path %s selects nothing", o.pathText)
		}
		parents, err := p.evaluate(expr)
		if err != nil {
			return nil, "", err
		}
		if len(parents) != 1 {
			return nil, "", unprocessable(0, "", "the path %s selects nothing, and %s selects %d elements, not one", o.pathText, prefix, len(parents))
		}
		obj, ok := objectAt(p.root, parents[0])
		if !ok {
			return nil, "", unprocessable(0, "", "the path %s selects nothing, and %s is not an object", o.pathText, prefix)
		}
		if _, exists := obj[name]; exists {
			return nil, "", unprocessable(0, "", "the path %s selects nothing but %s has a member %q", o.pathText, prefix, name)
		}
		return obj, name, nil
	}
	first := slots[0]
	for _, s := range slots {
		if s.isRoot() || s.index < 0 {
			return nil, "", unprocessable(0, "", "the path %s does not select the items of a list", o.pathText)
		}
		if identity(s.parent) != identity(first.parent) || s.key != first.key {
			return nil, "", unprocessable(0, "", "the path %s selects items of several lists", o.pathText)
		}
	}
	return first.parent, first.key, nil
}

// objectAt returns the object at a slot (the resource for the root).
func objectAt(root map[string]any, s *slot) (map[string]any, bool) {
	if s.isRoot() {
		return root, true
	}
	if s.prim {
		return nil, false
	}
	m, ok := s.value().(map[string]any)
	return m, ok
}

// typeOfObject returns the FHIR type of the object at s.
func (p *fpPatcher) typeOfObject(s *slot) fhirType {
	if s.isRoot() {
		return resourceType(p.root)
	}
	return typeAt(p.root, s.steps())
}

// target names where a value goes: the member key of an object whose
// definition (if known) is info.
type target struct {
	obj  map[string]any
	key  string
	info elemInfo
	ok   bool // info is known
}

// resolveKey picks the JSON key for a value of an element named name in
// an object of type t: choice elements take the type of the value as
// suffix (deceased + Boolean).
func resolveKey(t fhirType, name string, v *pvalue) (string, elemInfo, bool, error) {
	info, ok := t.elem(name)
	if !ok {
		return name, elemInfo{}, false, nil
	}
	if info.choice == "" {
		return name, info, true, nil
	}
	if info.code != "" {
		// the name carries its type suffix already
		if v.typ != "" && v.typ != info.code && upperFirst(v.typ) != upperFirst(info.code) {
			return "", info, true, fmt.Errorf("%s takes a %s, the value is a %s", name, info.code, v.typ)
		}
		return name, info, true, nil
	}
	if v.typ == "" {
		return "", info, true, fmt.Errorf("%s is a choice element: its value needs a type (value[x])", name)
	}
	for i := range info.ed.Type {
		if c := typeCode(&info.ed.Type[i]); c == v.typ {
			info.code = c
			return info.choice + upperFirst(c), info, true, nil
		}
	}
	return "", info, true, fmt.Errorf("%s cannot be a %s", name, v.typ)
}

// materialize turns a value into JSON, building complex values from parts
// with the definitions of type t (the type of the element it goes to).
func materialize(v *pvalue, t fhirType) (any, map[string]any, error) {
	if !v.built {
		return v.json, v.ext, nil
	}
	obj := map[string]any{}
	for _, nv := range v.parts {
		key, info, known, err := resolveKey(t, nv.name, nv.val)
		if err != nil {
			return nil, nil, err
		}
		cj, cext, fit, err := materializeFor(t, info, known, nv.val)
		if err == nil {
			err = fit
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", nv.name, err)
		}
		_, exists := obj[key]
		_, extExists := obj["_"+key]
		switch {
		case known && info.many():
			insertAligned(obj, key, listLen(obj, key), cj, cext)
		case !exists && !extExists:
			obj[key] = cj
			if cj == nil {
				delete(obj, key)
			}
			if cext != nil {
				obj["_"+key] = cext
			}
		case known:
			return nil, nil, fmt.Errorf("%s is given twice but does not repeat", nv.name)
		default:
			// unknown element given twice: make it a list
			if _, isList := obj[key].([]any); !isList {
				single, sext := obj[key], obj["_"+key]
				delete(obj, key)
				delete(obj, "_"+key)
				se, _ := sext.(map[string]any)
				insertAligned(obj, key, 0, single, se)
			}
			insertAligned(obj, key, listLen(obj, key), cj, cext)
		}
	}
	return obj, nil, nil
}

// materializeFor materializes v for the element info of type t (when
// known: an unknown element has no type to build or check against). fit is
// checkFits's verdict, apart as callers report it in their own words and
// order.
func materializeFor(t fhirType, info elemInfo, known bool, v *pvalue) (j any, ext map[string]any, fit, err error) {
	var ct fhirType
	if known {
		ct = t.childType(info, v.json)
	}
	if j, ext, err = materialize(v, ct); err != nil {
		return nil, nil, nil, err
	}
	if known {
		fit = checkFits(info, j, v.typ)
	}
	return j, ext, fit, nil
}

// checkFits checks the JSON shape of a value against the definition of
// the element it goes to: primitives must have the JSON type of their
// FHIR type, complex types must be objects.
func checkFits(info elemInfo, v any, typ string) error {
	code := info.code
	if code == "" {
		if info.choice != "" && typ != "" {
			code = typ
		} else {
			return nil
		}
	}
	if info.choice != "" && typ != "" && typ != code {
		return fmt.Errorf("the element takes a %s, the value is a %s", code, typ)
	}
	if isPrimitiveType(code) {
		if v == nil {
			return nil
		}
		got := ""
		switch v.(type) {
		case bool:
			got = "boolean"
		case json.Number:
			got = "number"
		case string:
			got = "string"
		default:
			return fmt.Errorf("the element is a %s, not an object", code)
		}
		if want := jsonKind(code); got != want {
			return fmt.Errorf("the element is a %s, which is a JSON %s, not a %s", code, want, got)
		}
		return nil
	}
	if _, ok := v.(map[string]any); !ok && code != "" {
		return fmt.Errorf("the element is a %s, which is a JSON object", code)
	}
	return nil
}

func (p *fpPatcher) add(s *slot, o *fpOp) error {
	var obj map[string]any
	var t fhirType
	switch {
	case s.prim && (o.name == "extension" || o.name == "id"):
		// the id and extensions of a primitive live in its sibling
		obj = siblingOf(s, true)
		t = typeNamed("Element")
	default:
		var ok bool
		if obj, ok = objectAt(p.root, s); !ok {
			return unprocessable(0, "", "the path %s selects a primitive, which has no element %q", o.pathText, o.name)
		}
		t = p.typeOfObject(s)
	}
	key, info, known, err := resolveKey(t, o.name, o.value)
	if err != nil {
		return unprocessable(0, "", "%v", err)
	}
	v, ext, fit, err := materializeFor(t, info, known, o.value)
	if err != nil {
		return unprocessable(0, "", "value: %v", err)
	}
	if fit != nil {
		return unprocessable(0, "", "value for %s: %v", o.name, fit)
	}
	if known && info.choice != "" {
		for k := range obj {
			if k != key && strings.HasPrefix(k, info.choice) && len(k) > len(info.choice) && k[len(info.choice)] >= 'A' && k[len(info.choice)] <= 'Z' {
				if alt, ok := t.elem(k); ok && alt.ed == info.ed {
					return unprocessable(0, "", "%s already has a value (%s)", info.choice, k)
				}
			}
		}
	}
	cur, exists := obj[key]
	_, extExists := obj["_"+key]
	if _, isList := cur.([]any); isList || (known && info.many() && !exists && !extExists) {
		insertAligned(obj, key, listLen(obj, key), v, ext)
		return nil
	}
	if exists || extExists {
		return unprocessable(0, "", "the element %s already exists and does not repeat; use replace", key)
	}
	if v != nil {
		obj[key] = v
	}
	if ext != nil {
		obj["_"+key] = ext
	}
	return nil
}

func (p *fpPatcher) replace(s *slot, o *fpOp) error {
	if s.isRoot() {
		return unprocessable(0, "", "cannot replace the resource itself")
	}
	obj, key := s.parent, s.key
	var t fhirType
	if !strings.HasPrefix(key, "_") {
		t = typeAt(p.root, s.up.steps())
	}
	info, known := t.elem(key)
	newKey := key
	if known && info.choice != "" && s.index < 0 && o.value.typ != "" && o.value.typ != info.code {
		k, ninfo, _, err := resolveKey(t, info.choice, o.value)
		if err != nil {
			return unprocessable(0, "", "%v", err)
		}
		newKey, info = k, ninfo
	}
	v, ext, fit, err := materializeFor(t, info, known, o.value)
	if err != nil {
		return unprocessable(0, "", "value: %v", err)
	}
	_, newIsObject := v.(map[string]any)
	if s.prim && newIsObject {
		return unprocessable(0, "", "the path %s selects a primitive; the value is complex", o.pathText)
	}
	if !s.prim && !newIsObject {
		return unprocessable(0, "", "the path %s selects a complex element; the value is a primitive", o.pathText)
	}
	if fit != nil {
		return unprocessable(0, "", "value: %v", fit)
	}
	if newKey != key {
		delete(obj, key)
		delete(obj, "_"+key)
		key = newKey
	}
	setAligned(obj, key, s.index, v, ext)
	return nil
}

func (p *fpPatcher) insert(obj map[string]any, key string, o *fpOp) error {
	n := listLen(obj, key)
	if _, ok := obj[key]; ok {
		if _, isList := obj[key].([]any); !isList {
			return unprocessable(0, "", "%s is not a list", key)
		}
	}
	if o.index > n {
		return unprocessable(0, "", "index %d is out of range: the list has %d items", o.index, n)
	}
	var t fhirType
	var info elemInfo
	var known bool
	if s := p.slotOfObject(obj); s != nil {
		t = p.typeOfObject(s)
		info, known = t.elem(key)
	}
	v, ext, fit, err := materializeFor(t, info, known, o.value)
	if err == nil {
		err = fit
	}
	if err != nil {
		return unprocessable(0, "", "value: %v", err)
	}
	insertAligned(obj, key, o.index, v, ext)
	return nil
}

// slotOfObject finds the slot of an object of the document.
func (p *fpPatcher) slotOfObject(obj map[string]any) *slot {
	if identity(obj) == identity(p.root) {
		return &slot{index: -1}
	}
	ix, err := indexDocument(p.root, false, &p.work)
	if err != nil {
		return nil
	}
	return ix.nodes[identity(obj)]
}

func (p *fpPatcher) move(obj map[string]any, key string, o *fpOp) error {
	n := listLen(obj, key)
	if o.source >= n {
		return unprocessable(0, "", "source %d is out of range: the list has %d items", o.source, n)
	}
	if o.dest >= n {
		return unprocessable(0, "", "destination %d is out of range: the list has %d items", o.dest, n)
	}
	moveAligned(obj, key, o.source, o.dest)
	return nil
}
