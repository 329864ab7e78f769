package validate

import (
	"bytes"
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/profiles"
)

const coreSDPrefix = "http://hl7.org/fhir/StructureDefinition/"

// maxNegatives bounds the cached misses (unknown type names and URLs come
// from input); past it, misses are looked up again each time.
const maxNegatives = 4096

// typePlan is the compiled base definition of a FHIR type.
type typePlan struct {
	name     string
	kind     string // primitive-type, complex-type, resource, logical
	abstract bool
	root     *elemPlan
	regex    *regexp.Regexp // format of a primitive's string value
	format   func(string) bool
	jsonKind byte // primitive JSON form: 's' string, 'b' boolean, 'n' number
}

// profilePlan is a compiled profile (any StructureDefinition used as one).
type profilePlan struct {
	sd   *profiles.StructureDefinition
	root *elemPlan
}

// typeRef is one allowed type of an element, with its JSON key.
type typeRef struct {
	code      string // FHIR type name ("" when the definition lists none)
	key       string // JSON key: the element name, or name+Type for a choice
	extKey    string // "_"+key for primitive types
	primitive bool
	resource  bool     // Resource, DomainResource or a resource type
	profiles  []string // type.profile
	targets   []string // allowed types of a Reference target; nil: any
	plan      atomic.Pointer[typePlan]
}

// elemPlan is a compiled ElementDefinition with its children and slices.
type elemPlan struct {
	id, path, name string
	profile        string // URL of the StructureDefinition
	sliceName      string
	base           bool // part of a base type definition (checks structure)
	choice         bool
	array          bool // JSON array in the base definition
	min, max       int  // max -1: unbounded
	card           bool // check the cardinality in this layer
	types          []*typeRef
	nodeType       string // FHIRPath type of a backbone or root node ("" otherwise)
	fixed, pattern any
	fixedKey       string
	maxLength      int
	minValue       *big.Rat // minValueInteger/Decimal/…
	maxValue       *big.Rat
	patternKey     string
	binding        *bindingPlan
	constraints    []*constraint
	children       []*elemPlan
	keys           map[string]slot // JSON keys of the children
	choices        []*elemPlan     // choice children
	slicingDef     *profiles.Slicing
	slicing        *slicingPlan
	slices         []*elemPlan
	contentRef     string
	modifierExt    bool
	isRoot         bool
	resourceRoot   bool
}

// constraint is a compiled invariant.
type constraint struct {
	key, severity, human, expr string
	compiled                   *fhirpath.Expression
	resolves                   bool // uses resolve()
	vars                       bool // uses %resource or %rootResource
	err                        error
	profile                    string
}

// typePlan returns the compiled base definition of the named type, or nil.
func (v *Validator) typePlan(name string) *typePlan {
	if name == "" {
		return nil
	}
	if p, ok := v.types.Load(name); ok {
		return p.(*typePlan)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.types.Load(name); ok {
		return p.(*typePlan)
	}
	var tp *typePlan
	if sd, ok := v.defs.TypeDefinition(name); ok && len(sd.Elements) > 0 {
		tp = v.buildType(name, sd)
	}
	if tp != nil || v.negatives.Add(1) <= maxNegatives {
		v.types.Store(name, tp)
	}
	return tp
}

// profile returns the compiled plan of a profile URL, or nil if unknown.
func (v *Validator) profile(url string) *profilePlan {
	if p, ok := v.profiles.Load(url); ok {
		return p.(*profilePlan)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.profiles.Load(url); ok {
		return p.(*profilePlan)
	}
	sd, ok := v.defs.StructureDefinition(url)
	if !ok {
		if i := strings.IndexByte(url, '|'); i >= 0 {
			sd, ok = v.defs.StructureDefinition(url[:i])
		}
	}
	var pp *profilePlan
	if ok && len(sd.Elements) > 0 {
		pp = &profilePlan{sd: sd, root: v.build(sd, false)}
	}
	if pp != nil || v.negatives.Add(1) <= maxNegatives {
		v.profiles.Store(url, pp)
	}
	return pp
}

func (tr *typeRef) typePlan(v *Validator) *typePlan {
	if p := tr.plan.Load(); p != nil {
		return p
	}
	p := v.typePlan(tr.code)
	if p != nil {
		tr.plan.Store(p)
	}
	return p
}

func (v *Validator) buildType(name string, sd *profiles.StructureDefinition) *typePlan {
	tp := &typePlan{name: name, kind: sd.Kind, abstract: sd.Abstract}
	tp.root = v.build(sd, true)
	if sd.Kind == "primitive-type" {
		switch name {
		case "boolean":
			tp.jsonKind = 'b'
		case "integer", "decimal", "positiveInt", "unsignedInt", "integer64":
			tp.jsonKind = 'n'
		default:
			tp.jsonKind = 's'
		}
		kept := tp.root.children[:0:0]
		for _, c := range tp.root.children {
			if c.name == "value" {
				for _, t := range sd.Elements {
					if t.Path == c.path {
						for _, ty := range t.Type {
							if re := ty.Regex(); re != "" && tp.jsonKind == 's' && name != "string" && name != "markdown" {
								tp.regex, _ = regexp.Compile(`^(?:` + re + `)$`)
							}
						}
					}
				}
				continue
			}
			kept = append(kept, c)
		}
		tp.root.children = kept
		if f := formatCheck(name); f != nil {
			tp.format, tp.regex = f, nil
		}
		tp.root.keys = childKeys(kept)
	}
	return tp
}

// build compiles a StructureDefinition's snapshot into a tree of element
// plans, by element id (slices hang off the element they slice).
func (v *Validator) build(sd *profiles.StructureDefinition, base bool) *elemPlan {
	byID := make(map[string]*elemPlan, len(sd.Elements))
	var root *elemPlan
	var all []*elemPlan
	for i := range sd.Elements {
		ed := &sd.Elements[i]
		id := ed.ID
		if id == "" {
			id = ed.Path
			if ed.SliceName != "" {
				id += ":" + ed.SliceName
			}
		}
		e := v.compileElement(sd, ed, id, base)
		if _, dup := byID[id]; dup {
			continue
		}
		byID[id] = e
		all = append(all, e)
		if root == nil {
			root = e
			e.isRoot = true
			e.card = false
			e.nodeType = sd.Type
			e.resourceRoot = sd.Kind == "resource"
			continue
		}
		dot := lastDot(id)
		if dot < 0 {
			continue
		}
		parentID, seg := id[:dot], id[dot+1:]
		if c := strings.IndexByte(seg, ':'); c >= 0 {
			if strings.IndexByte(seg[c+1:], '/') >= 0 {
				continue // re-slices are not supported
			}
			if entry := byID[parentID+"."+seg[:c]]; entry != nil {
				if e.sliceName == "" {
					e.sliceName = seg[c+1:]
				}
				e.card = true
				entry.slices = append(entry.slices, e)
			}
			continue
		}
		if parent := byID[parentID]; parent != nil {
			parent.children = append(parent.children, e)
		}
	}
	if root == nil {
		root = &elemPlan{path: sd.Type, name: sd.Type, isRoot: true, nodeType: sd.Type, profile: sd.URL, base: base}
	}
	for _, e := range all {
		if e.contentRef != "" {
			ref := strings.TrimPrefix(e.contentRef[strings.IndexByte(e.contentRef, '#')+1:], "#")
			if t := byID[ref]; t != nil {
				e.children = t.children
				e.nodeType = t.path
				e.constraints = append(e.constraints, t.constraints...)
			}
		}
	}
	for _, e := range all {
		if len(e.children) > 0 || e.isRoot {
			e.keys = childKeys(e.children)
			for _, c := range e.children {
				if c.choice {
					e.choices = append(e.choices, c)
				}
			}
			if e.resourceRoot {
				e.keys["resourceType"] = slot{child: -1}
			}
			if e.nodeType == "" && (len(e.types) == 0 || len(e.types) == 1 && (e.types[0].code == "BackboneElement" || e.types[0].code == "Element")) {
				e.nodeType = e.path
			}
		}
		if e.slicingDef != nil {
			e.slicing = v.compileSlicing(e)
		}
	}
	return root
}

// lastDot is the index of the last '.' of an element id that is not
// inside a slice name.
func lastDot(id string) int {
	return strings.LastIndexByte(id, '.')
}

// slot is where a JSON key goes: a child element and one of its types,
// as the value or as the "_name" object of a primitive. child -1: a key
// taken by no element (resourceType).
type slot struct {
	child, typ int
	ext        bool
}

func childKeys(children []*elemPlan) map[string]slot {
	keys := make(map[string]slot, len(children)*2)
	for ci, c := range children {
		for ti, t := range c.types {
			if ti > 0 && !c.choice {
				break
			}
			if _, dup := keys[t.key]; !dup {
				keys[t.key] = slot{child: ci, typ: ti}
			}
			if t.extKey != "" {
				if _, dup := keys[t.extKey]; !dup {
					keys[t.extKey] = slot{child: ci, typ: ti, ext: true}
				}
			}
		}
	}
	return keys
}

func (v *Validator) compileElement(sd *profiles.StructureDefinition, ed *profiles.ElementDefinition, id string, base bool) *elemPlan {
	e := &elemPlan{id: id, path: ed.Path, profile: sd.URL, base: base, sliceName: ed.SliceName, min: ed.Min, max: parseMax(ed.Max)}
	e.name = ed.Path
	if i := strings.LastIndexByte(ed.Path, '.'); i >= 0 {
		e.name = ed.Path[i+1:]
	}
	if n, ok := strings.CutSuffix(e.name, "[x]"); ok {
		e.name, e.choice = n, true
	}
	e.modifierExt = e.name == "modifierExtension"
	baseMax := ed.Max
	if ed.Base != nil && ed.Base.Max != "" {
		baseMax = ed.Base.Max
	}
	e.array = baseMax != "0" && baseMax != "1"
	e.card = base || ed.Base == nil || ed.Base.Min != ed.Min || ed.Base.Max != ed.Max || ed.SliceName != ""
	e.contentRef = ed.ContentReference
	for i := range ed.Type {
		et := &ed.Type[i]
		t := &typeRef{code: et.Code, profiles: et.Profile}
		if strings.HasPrefix(t.code, "http://hl7.org/fhirpath/System.") {
			t.code = et.FHIRType()
			if t.code == "" {
				t.code = "string"
			}
		}
		t.primitive = t.code != "" && t.code[0] >= 'a' && t.code[0] <= 'z'
		t.resource = t.code == "Resource" || t.code == "DomainResource" || profiles.IsResourceType(t.code)
		t.key = e.name
		if e.choice && t.code != "" {
			t.key = e.name + strings.ToUpper(t.code[:1]) + t.code[1:]
		}
		if t.primitive {
			t.extKey = "_" + t.key
		}
		if len(et.TargetProfile) > 0 {
			t.targets = v.targetTypes(et.TargetProfile)
		}
		if !e.choice && len(e.types) > 0 {
			// one JSON key for all types of a non-choice element
			t.key, t.extKey = e.types[0].key, e.types[0].extKey
		}
		e.types = append(e.types, t)
	}
	if len(e.types) == 0 && e.choice {
		// a profile may list a choice element without its types (max 0):
		// take them from the base definition
		if be := v.baseElement(ed); be != nil {
			for _, bt := range be.Type {
				if bt.Code != "" {
					e.types = append(e.types, &typeRef{code: bt.Code, key: e.name + strings.ToUpper(bt.Code[:1]) + bt.Code[1:],
						primitive: bt.Code[0] >= 'a' && bt.Code[0] <= 'z'})
					if last := e.types[len(e.types)-1]; last.primitive {
						last.extKey = "_" + last.key
					}
				}
			}
		}
	}
	if len(e.types) == 0 && e.contentRef != "" {
		e.types = []*typeRef{{code: "BackboneElement", key: e.name}}
	}
	if len(e.types) == 0 && strings.IndexByte(ed.Path, '.') >= 0 {
		e.types = []*typeRef{{key: e.name, extKey: "_" + e.name}}
	}
	e.maxLength = ed.MaxLength
	e.minValue, e.maxValue = numericLimit(ed.MinValue), numericLimit(ed.MaxValue)
	if len(ed.Fixed) > 0 {
		e.fixed, e.fixedKey = decodeRaw(ed.Fixed), ed.FixedKey
	}
	if len(ed.Pattern) > 0 {
		e.pattern, e.patternKey = decodeRaw(ed.Pattern), ed.PatternKey
	}
	if b := ed.Binding; b != nil && b.ValueSet != "" && (b.Strength == "required" || b.Strength == "extensible") {
		e.binding = &bindingPlan{strength: b.Strength, url: b.ValueSet}
	}
	var skip map[string]bool
	if !base && len(ed.Constraint) > 0 {
		skip = v.baseConstraintKeys(ed)
	}
	for _, c := range ed.Constraint {
		if c.Expression == "" || c.Key == "ele-1" || c.Key == "ext-1" || skip[c.Key] {
			continue
		}
		expr := c.Expression
		if fix, ok := errata[c.Key]; ok && fix.broken == expr {
			expr = fix.fixed
		}
		cp := &constraint{key: c.Key, severity: c.Severity, human: c.Human, expr: expr, profile: sd.URL, resolves: strings.Contains(expr, "resolve()"),
			vars: strings.Contains(expr, "%resource") || strings.Contains(expr, "%rootResource")}
		if cp.severity != "error" {
			cp.severity = "warning"
		}
		cp.compiled, cp.err = fhirpath.Compile(expr)
		e.constraints = append(e.constraints, cp)
	}
	if ed.Slicing != nil {
		e.slicingDef = ed.Slicing
	}
	return e
}

// baseConstraintKeys are the keys of the constraints of the element's
// base (in a core definition), which the base layer already checks.
func (v *Validator) baseConstraintKeys(ed *profiles.ElementDefinition) map[string]bool {
	be := v.baseElement(ed)
	if be == nil {
		return nil
	}
	keys := map[string]bool{}
	for _, c := range be.Constraint {
		keys[c.Key] = true
	}
	return keys
}

// baseElement is the element of a core type definition a profile's
// element is based on (ElementDefinition.base.path), or nil.
func (v *Validator) baseElement(ed *profiles.ElementDefinition) *profiles.ElementDefinition {
	if ed.Base == nil || ed.Base.Path == "" {
		return nil
	}
	typ := ed.Base.Path
	if i := strings.IndexByte(typ, '.'); i >= 0 {
		typ = typ[:i]
	}
	sd, ok := v.defs.TypeDefinition(typ)
	if !ok {
		return nil
	}
	be, ok := sd.Element(ed.Base.Path)
	if !ok {
		return nil
	}
	return be
}

// targetTypes maps target profiles to resource type names; nil means any.
func (v *Validator) targetTypes(urls []string) []string {
	var out []string
	for _, u := range urls {
		if i := strings.IndexByte(u, '|'); i >= 0 {
			u = u[:i]
		}
		name, core := strings.CutPrefix(u, coreSDPrefix)
		if core && (profiles.IsResourceType(name) || name == "Resource" || name == "DomainResource") {
			if name == "Resource" || name == "DomainResource" {
				return nil
			}
			out = append(out, name)
			continue
		}
		sd, ok := v.defs.StructureDefinition(u)
		if !ok {
			return nil
		}
		if sd.Type == "Resource" || sd.Type == "DomainResource" {
			return nil
		}
		out = append(out, sd.Type)
	}
	return out
}

// numericLimit decodes a numeric minValue[x]/maxValue[x]; nil for none
// or a non-numeric (date, Quantity) limit, which is not checked.
func numericLimit(raw json.RawMessage) *big.Rat {
	if len(raw) == 0 {
		return nil
	}
	s := numString(decodeRaw(raw))
	if s == "" {
		return nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil
	}
	return r
}

func parseMax(s string) int {
	if s == "*" || s == "" {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func decodeRaw(raw json.RawMessage) any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	return v
}

// errata replace R4 core invariants whose published expression is wrong
// (corrected in later FHIR versions); only the exact published text is
// replaced.
var errata = map[string]struct{ broken, fixed string }{
	// FHIR.boolean is not System.Boolean: R4B writes "answer is boolean".
	"que-7": {"operator = 'exists' implies (answer is Boolean)", "operator = 'exists' implies (answer is boolean)"},
}
