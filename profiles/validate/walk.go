package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
)

// maxDepth bounds the nesting of elements walked (hostile input).
const maxDepth = 200

// loc is an expression location, rendered only for issues.
type loc struct {
	parent *loc
	name   string
	index  int // -1: not an array item
}

func (l *loc) String() string {
	if l == nil {
		return ""
	}
	var parts []*loc
	for x := l; x != nil; x = x.parent {
		parts = append(parts, x)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if i != len(parts)-1 {
			b.WriteByte('.')
		}
		b.WriteString(p.name)
		if p.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func child(l *loc, name string, index int) *loc { return &loc{parent: l, name: name, index: index} }

type walker struct {
	ctx      context.Context
	v        *Validator
	issues   []Issue
	steps    int
	depth    int
	ctxErr   error
	now      time.Time
	reported map[*constraint]bool
	host     host // the element whose children are being walked (base layer)
	// speculative > 0 while conforms tries a profile: its issues decide a
	// match and are then dropped, so they are always collected.
	speculative int
	// omitted counts the issues past MaxIssues, not kept; omittedWorst is
	// their worst severity.
	omitted      int
	omittedWorst string
}

// host describes the element that holds an extension, for the
// extension's context.
type host struct {
	path     string // element path in its base definition: "Patient.address", "Address"
	typ      string // its type: "Address", "BackboneElement", "Patient"
	extURL   string // the url of the enclosing extension
	resource bool
}

var walkerPool = sync.Pool{New: func() any { return new(walker) }}

func newWalker(ctx context.Context, v *Validator) *walker {
	w := walkerPool.Get().(*walker)
	*w = walker{ctx: ctx, v: v, issues: w.issues[:0]}
	if v.opts.Now != nil {
		w.now = v.opts.Now()
	} else {
		w.now = time.Now()
	}
	return w
}

func (w *walker) release() {
	w.issues = w.issues[:0]
	w.ctx, w.v, w.reported = nil, nil, nil
	walkerPool.Put(w)
}

func (w *walker) err() error { return w.ctxErr }

// result returns a copy of the issues, without duplicates.
func (w *walker) result() []Issue {
	if len(w.issues) == 0 {
		return nil
	}
	out := make([]Issue, 0, len(w.issues))
	seen := make(map[Issue]struct{}, len(w.issues))
	type key struct{ sev, code, expr, msg, rule string }
	seenK := make(map[key]struct{}, len(w.issues))
	for _, is := range w.issues {
		if _, dup := seen[is]; dup {
			continue
		}
		k := key{is.Severity, is.Code, is.Expression, is.Message, is.Rule}
		if _, dup := seenK[k]; dup {
			continue
		}
		seen[is] = struct{}{}
		seenK[k] = struct{}{}
		out = append(out, is)
	}
	return out
}

func (w *walker) issue(sev, code string, l *loc, rule, profile, msg string) {
	if w.speculative == 0 && len(w.issues) >= MaxIssues {
		// Count only: no location string, no Issue.
		w.omitted++
		if severityRank[sev] > severityRank[w.omittedWorst] {
			w.omittedWorst = sev
		}
		return
	}
	w.issues = append(w.issues, Issue{Severity: sev, Code: code, Expression: l.String(), Message: msg, Rule: rule, Profile: profile})
}

// severityRank orders issue severities, worst last.
var severityRank = map[string]int{"information": 1, "warning": 2, "error": 3, "fatal": 4}

// step counts work and honours cancellation.
func (w *walker) step() bool {
	if w.ctxErr != nil {
		return false
	}
	w.steps++
	if w.steps&127 == 0 {
		if err := w.ctx.Err(); err != nil {
			w.ctxErr = err
			return false
		}
	}
	return true
}

func (w *walker) resourceCtx(res map[string]any, rt string) *resCtx {
	return &resCtx{res: res, rt: rt}
}

// options are the FHIRPath options of invariants on nodes of rc.
func (w *walker) options(rc *resCtx) []fhirpath.Option {
	if rc.opts != nil {
		return rc.opts
	}
	root := rc.root()
	rc.opts = []fhirpath.Option{
		fhirpath.WithVariable("resource", fhirpath.Collection{fhirpath.Node(rc.res, nil, rc.rt)}),
		fhirpath.WithVariable("rootResource", fhirpath.Collection{fhirpath.Node(root.res, nil, root.rt)}),
		fhirpath.WithNow(w.now),
		fhirpath.WithResolver(func(_ context.Context, ref string) (any, error) {
			if r := rc.resolve(ref); r != nil {
				return r, nil
			}
			return nil, nil
		}),
	}
	return rc.opts
}

// item validates one value (an array item, or the single value) of an
// element: val is the JSON value, sib the "_name" object of a primitive.
func (w *walker) item(rc *resCtx, e *elemPlan, t *typeRef, val any, sib map[string]any, l *loc) {
	if !w.step() {
		return
	}
	if w.depth >= maxDepth {
		w.issue("error", "structure", l, "structure", e.profile, "elements nested too deeply")
		return
	}
	w.depth++
	defer func() { w.depth-- }()

	m, isMap := val.(map[string]any)
	if t != nil && t.resource && !e.isRoot {
		if !isMap {
			w.issue("error", "structure", l, "structure", e.profile, "a resource must be a JSON object")
			return
		}
		if e.base {
			w.nestedResource(rc, e, m, l)
			return
		}
		rt, _ := m["resourceType"].(string)
		allowed := false
		for _, x := range e.types {
			if x.code == rt || x.code == "Resource" || x.code == "DomainResource" {
				allowed = true
			}
		}
		if !allowed && len(e.types) > 0 {
			w.issue("error", "structure", l, "type", e.profile, fmt.Sprintf("resource type '%s' is not allowed here (allowed: %s)", rt, typeCodes(e.types)))
		}
		nrc := w.nestedCtx(rc, e, m)
		for _, p := range t.profiles {
			w.conformTo(nrc, p, m, nil, l, e.profile)
		}
		return
	}
	if e.base && t != nil {
		if t.primitive {
			if !w.primitive(rc, e, t, val, sib, l) {
				return
			}
		} else if t.code != "" {
			if !isMap {
				w.issue("error", "structure", l, "structure", e.profile, fmt.Sprintf("the value of %s must be a JSON object (type %s)", e.name, t.code))
				return
			}
			if !hasChildren(m) {
				w.issue("error", "invariant", l, "ele-1", e.profile, "All FHIR elements must have a @value or children")
			}
			if t.code == "Extension" {
				_, hasExt := m["extension"]
				if hasExt == hasValueX(m) {
					w.issue("error", "invariant", l, "ext-1", e.profile, "Must have either extensions or value[x], not both")
				}
			}
		}
	}
	if e.fixed != nil && val != nil && !equalJSON(val, e.fixed) {
		w.issue("error", "value", l, "fixed", e.profile, fmt.Sprintf("value must be exactly %s (%s)", compactJSON(e.fixed), e.fixedKey))
	}
	if e.pattern != nil && val != nil && !containsJSON(val, e.pattern) {
		w.issue("error", "value", l, "pattern", e.profile, fmt.Sprintf("value must match the pattern %s (%s)", compactJSON(e.pattern), e.patternKey))
	}
	if e.maxLength > 0 {
		if str, ok := val.(string); ok && utf8.RuneCountInString(str) > e.maxLength {
			w.issue("error", "value", l, "maxLength", e.profile, fmt.Sprintf("the value is longer than %d characters", e.maxLength))
		}
	}
	if e.minValue != nil || e.maxValue != nil {
		w.checkRange(e, val, l)
	}
	if e.binding != nil && (val != nil) {
		w.checkBinding(e, t, val, l)
	}
	if t != nil && t.code == "Reference" && t.targets != nil && isMap {
		w.checkReference(rc, e, t, m, l)
	}
	if len(e.constraints) > 0 {
		w.invariants(rc, e.constraints, nodeTypeOf(e, t), val, sib, l)
	}
	switch {
	case len(e.children) > 0:
		if isMap {
			saved := w.host
			if e.base {
				w.host = host{path: e.path, typ: "BackboneElement", resource: e.resourceRoot}
				if e.isRoot {
					w.host.typ = e.nodeType
				}
			}
			w.object(rc, e, m, l)
			w.host = saved
		} else if sib != nil && !e.base {
			w.object(rc, e, sib, l)
		}
	case e.base && t != nil && t.code != "" && !t.primitive && isMap:
		tp := t.typePlan(w.v)
		if tp == nil {
			return
		}
		if len(tp.root.constraints) > 0 {
			w.invariants(rc, tp.root.constraints, tp.name, val, nil, l)
		}
		saved := w.host
		w.host = host{path: e.path, typ: t.code}
		if t.code == "Extension" {
			w.host.extURL, _ = m["url"].(string)
		}
		w.object(rc, tp.root, m, l)
		w.host = saved
		if t.code == "Extension" {
			w.extensionDefinition(rc, e, m, l)
		}
	}
	if t != nil && len(t.profiles) > 0 {
		for _, p := range t.profiles {
			if t.code == "Extension" && isMap && m["url"] == p {
				continue // checked against its definition by the base layer
			}
			w.conformTo(rc, p, val, sib, l, e.profile)
		}
	}
}

// conformTo validates a node against another profile (type.profile).
func (w *walker) conformTo(rc *resCtx, url string, val any, sib map[string]any, l *loc, from string) {
	pp := w.v.profile(url)
	if pp == nil {
		w.issue("warning", "not-supported", l, "profile", from, "profile '"+url+"' is not known; not checked")
		return
	}
	w.item(rc, pp.root, nil, val, sib, l)
}

func typeCodes(ts []*typeRef) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.code)
	}
	return strings.Join(s, ", ")
}

func nodeTypeOf(e *elemPlan, t *typeRef) string {
	if e.nodeType != "" {
		return e.nodeType
	}
	if t != nil {
		return t.code
	}
	return ""
}

// hasChildren is ele-1 on a complex value: something besides id.
func hasChildren(m map[string]any) bool {
	for k := range m {
		if k != "id" {
			return true
		}
	}
	return false
}

func hasValueX(m map[string]any) bool {
	for k := range m {
		k = strings.TrimPrefix(k, "_")
		if len(k) > 5 && strings.HasPrefix(k, "value") && k[5] >= 'A' && k[5] <= 'Z' {
			return true
		}
	}
	return false
}

// primitive checks a primitive value's JSON form and format and walks its
// "_name" object; false when the value is unusable.
func (w *walker) primitive(rc *resCtx, e *elemPlan, t *typeRef, val any, sib map[string]any, l *loc) bool {
	if val == nil {
		hasExt := false
		if sib != nil {
			_, hasExt = sib["extension"]
		}
		if !hasExt {
			w.issue("error", "invariant", l, "ele-1", e.profile, "All FHIR elements must have a @value or children")
		}
	}
	tp := t.typePlan(w.v)
	if tp == nil {
		return true
	}
	ok := true
	if val != nil {
		switch x := val.(type) {
		case string:
			if tp.jsonKind != 's' {
				ok = false
			} else if (tp.format != nil && !tp.format(x)) || (tp.regex != nil && !tp.regex.MatchString(x)) {
				w.issue("error", "value", l, "type", e.profile, fmt.Sprintf("the value '%s' is not a valid %s", clip(x), t.code))
			} else if x == "" || strings.TrimSpace(x) == "" && t.code != "string" && t.code != "markdown" {
				w.issue("error", "value", l, "type", e.profile, "a "+t.code+" must not be empty")
			}
		case bool:
			ok = tp.jsonKind == 'b'
		case json.Number, float64:
			ok = tp.jsonKind == 'n'
			if ok {
				w.checkNumber(e, t, val, l)
			}
		default:
			ok = false
		}
		if !ok {
			w.issue("error", "structure", l, "type", e.profile, fmt.Sprintf("the JSON value of a %s has the wrong form", t.code))
		}
	}
	if sib != nil {
		saved := w.host
		w.host = host{path: e.path, typ: t.code}
		w.object(rc, tp.root, sib, l)
		w.host = saved
	}
	return ok
}

// checkNumber checks the integer types' ranges.
func (w *walker) checkNumber(e *elemPlan, t *typeRef, val any, l *loc) {
	switch t.code {
	case "integer", "positiveInt", "unsignedInt":
	default:
		return
	}
	s := numString(val)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > 2147483647 || n < -2147483648 {
		w.issue("error", "value", l, "type", e.profile, fmt.Sprintf("the value %s is not a valid %s", s, t.code))
		return
	}
	if (t.code == "positiveInt" && n < 1) || (t.code == "unsignedInt" && n < 0) {
		w.issue("error", "value", l, "type", e.profile, fmt.Sprintf("the value %s is not a valid %s", s, t.code))
	}
}

// checkRange checks a number against numeric minValue/maxValue.
func (w *walker) checkRange(e *elemPlan, val any, l *loc) {
	s := numString(val)
	if s == "" {
		return
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return
	}
	if e.minValue != nil && r.Cmp(e.minValue) < 0 {
		w.issue("error", "value", l, "minValue", e.profile, fmt.Sprintf("the value %s is below the minimum %s", s, e.minValue.RatString()))
	}
	if e.maxValue != nil && r.Cmp(e.maxValue) > 0 {
		w.issue("error", "value", l, "maxValue", e.profile, fmt.Sprintf("the value %s is above the maximum %s", s, e.maxValue.RatString()))
	}
}

// clip shortens s to 80 characters (runes: a message must stay UTF-8).
func clip(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}

// invariants evaluates compiled constraints with the node as focus.
func (w *walker) invariants(rc *resCtx, cs []*constraint, typeName string, val any, sib map[string]any, l *loc) {
	focus := fhirpath.Node(val, sib, typeName)
	var withContained *fhirpath.Value
	for _, c := range cs {
		if c.err != nil {
			w.badConstraint(c, l, c.err)
			continue
		}
		f := focus
		if c.resolves {
			// The engine resolves "#id" among the contained resources of
			// the evaluation's root, which is the focus here: give it a
			// shallow copy of the focus that also holds them.
			if m, ok := val.(map[string]any); ok && m["contained"] == nil {
				if withContained == nil {
					cp := make(map[string]any, len(m)+1)
					for k, x := range m {
						cp[k] = x
					}
					cp["contained"] = rc.root().res["contained"]
					n := fhirpath.Node(cp, sib, typeName)
					withContained = &n
				}
				f = *withContained
			}
		}
		if c.key == "dom-6" && rc.container != nil {
			continue // contained resources need no narrative of their own
		}
		var opts []fhirpath.Option
		if c.vars || c.resolves {
			opts = w.options(rc)
		} else {
			if rc.fewOpts == nil {
				rc.fewOpts = []fhirpath.Option{fhirpath.WithNow(w.now)}
			}
			opts = rc.fewOpts
		}
		res, err := c.compiled.Evaluate(w.ctx, f, opts...)
		if err != nil {
			if w.ctx.Err() != nil {
				w.ctxErr = w.ctx.Err()
				return
			}
			w.badConstraint(c, l, err)
			continue
		}
		if len(res) == 1 && res[0].String() == "false" {
			w.issue(c.severity, "invariant", l, c.key, c.profile, c.human)
		}
	}
}

func (w *walker) badConstraint(c *constraint, l *loc, err error) {
	if w.reported[c] {
		return
	}
	if w.reported == nil {
		w.reported = map[*constraint]bool{}
	}
	w.reported[c] = true
	w.issue("warning", "processing", l, c.key, c.profile, fmt.Sprintf("invariant %s (%s) could not be evaluated: %v", c.key, c.expr, err))
}

// gathered is one value of an element found in a JSON object.
type gathered struct {
	val any
	sib map[string]any
	t   *typeRef
	l   *loc
}

// hit is a JSON key of an object that a child element takes.
type hit struct {
	slot
	val any
}

// object validates the children of a complex node against owner's
// children. It reads each key of the object once.
func (w *walker) object(rc *resCtx, owner *elemPlan, m map[string]any, l *loc) {
	var buf [40]hit
	hits := buf[:0]
	unknown := false
	for k, val := range m {
		s, ok := owner.keys[k]
		if !ok {
			unknown = true
			continue
		}
		if s.child < 0 {
			continue
		}
		hits = append(hits, hit{s, val})
	}
	// order by child, type, value before "_name" (insertion sort: few keys)
	for i := 1; i < len(hits); i++ {
		for j := i; j > 0 && hitLess(&hits[j], &hits[j-1]); j-- {
			hits[j], hits[j-1] = hits[j-1], hits[j]
		}
	}
	hi := 0
	for ci, c := range owner.children {
		start := hi
		for hi < len(hits) && hits[hi].child == ci {
			hi++
		}
		if start == hi {
			if c.card && c.min > 0 {
				w.cardinality(c, 0, l)
			}
			if c.slicing != nil {
				w.slice(rc, c, nil, l)
			}
			continue
		}
		w.children(rc, c, hits[start:hi], l)
	}
	if unknown && (owner.base || len(owner.choices) > 0) {
		w.unmatched(owner, m, l)
	}
}

func hitLess(a, b *hit) bool {
	if a.child != b.child {
		return a.child < b.child
	}
	if a.typ != b.typ {
		return a.typ < b.typ
	}
	return !a.ext && b.ext
}

// children validates the values of one child element found in an object.
func (w *walker) children(rc *resCtx, c *elemPlan, group []hit, l *loc) {
	n := 0
	var buf [4]gathered
	var items []gathered
	if c.slicing != nil {
		items = buf[:0]
	}
	keysFound := 0
	for gi := 0; gi < len(group); gi++ {
		t := c.types[group[gi].typ]
		var raw, ext any
		has, hasExt := false, false
		if !group[gi].ext {
			raw, has = group[gi].val, true
			if gi+1 < len(group) && group[gi+1].typ == group[gi].typ && group[gi+1].ext {
				gi++
				ext, hasExt = group[gi].val, true
			}
		} else {
			ext, hasExt = group[gi].val, true
		}
		keysFound++
		vals, isArr := raw.([]any)
		exts, extArr := ext.([]any)
		if c.base {
			if has && isArr != c.array {
				if c.array {
					w.issue("error", "structure", child(l, t.key, -1), "structure", c.profile, "the element "+t.key+" must be a JSON array")
				} else {
					w.issue("error", "structure", child(l, t.key, -1), "structure", c.profile, "the element "+t.key+" must not be a JSON array")
				}
			}
			if hasExt && extArr != c.array && ext != nil {
				w.issue("error", "structure", child(l, t.extKey, -1), "structure", c.profile, "the element "+t.extKey+" has the wrong JSON form")
			}
			if has && raw == nil || isArr && len(vals) == 0 && has {
				w.issue("error", "structure", child(l, t.key, -1), "structure", c.profile, "the element "+t.key+" must not be null or empty")
			}
		}
		var one [1]any
		if has && !isArr && raw != nil {
			one[0] = raw
			vals = one[:]
		}
		var oneExt [1]any
		if hasExt && !extArr && ext != nil {
			oneExt[0] = ext
			exts = oneExt[:]
		}
		cnt := max(len(vals), len(exts))
		arr := isArr || extArr
		for i := 0; i < cnt; i++ {
			var val any
			if i < len(vals) {
				val = vals[i]
			}
			var sib map[string]any
			if i < len(exts) && exts[i] != nil {
				var ok bool
				sib, ok = exts[i].(map[string]any)
				if !ok && c.base {
					w.issue("error", "structure", child(l, t.extKey, idx(arr, i)), "structure", c.profile, "the element "+t.extKey+" must be a JSON object")
				}
			}
			if val == nil && sib == nil {
				if c.base {
					w.issue("error", "structure", child(l, t.key, idx(arr, i)), "structure", c.profile, "null is not allowed here")
				}
				continue
			}
			il := child(l, t.key, idx(arr, i))
			n++
			if c.slicing != nil {
				items = append(items, gathered{val, sib, t, il})
				continue
			}
			w.item(rc, c, t, val, sib, il)
		}
	}
	if c.base && c.choice && keysFound > 1 {
		w.issue("error", "structure", child(l, c.name+"[x]", -1), "structure", c.profile, "only one of the "+c.name+"[x] elements may be present")
	}
	if c.card && (n < c.min || (c.max >= 0 && n > c.max)) {
		w.cardinality(c, n, l)
	}
	if c.slicing != nil {
		for _, it := range items {
			w.item(rc, c, it.t, it.val, it.sib, it.l)
		}
		w.slice(rc, c, items, l)
	}
}

func idx(arr bool, i int) int {
	if arr {
		return i
	}
	return -1
}

func (w *walker) cardinality(c *elemPlan, n int, l *loc) {
	name := c.name
	if c.choice {
		name += "[x]"
	}
	where := child(l, c.name, -1)
	what := name
	if c.sliceName != "" {
		what += ":" + c.sliceName
	}
	if n < c.min {
		w.issue("error", "required", where, "cardinality", c.profile, fmt.Sprintf("%s: minimum required = %d, but only found %d", what, c.min, n))
		return
	}
	w.issue("error", "structure", where, "cardinality", c.profile, fmt.Sprintf("%s: maximum allowed = %d, but found %d", what, c.max, n))
}

// unmatched reports JSON keys no child element takes: unknown elements
// (base definitions) or choice types a profile does not allow.
func (w *walker) unmatched(owner *elemPlan, m map[string]any, l *loc) {
	var keys []string
	for k := range m {
		if _, ok := owner.keys[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if owner.base {
			if k == "resourceType" && owner.resourceRoot {
				continue
			}
			if k == "fhir_comments" || k == "_fhir_comments" {
				continue
			}
			w.issue("error", "structure", child(l, k, -1), "structure", owner.profile, "unknown element '"+k+"'")
			continue
		}
		name := strings.TrimPrefix(k, "_")
		for _, c := range owner.choices {
			if len(name) > len(c.name) && strings.HasPrefix(name, c.name) && name[len(c.name)] >= 'A' && name[len(c.name)] <= 'Z' {
				w.issue("error", "structure", child(l, name, -1), "type", c.profile, fmt.Sprintf("type %s is not allowed for %s[x] (allowed: %s)", name[len(c.name):], c.name, typeCodes(c.types)))
				break
			}
		}
	}
}

// extensionDefinition validates an extension against the definition its
// url names, or applies the unknown-extension policy.
func (w *walker) extensionDefinition(rc *resCtx, e *elemPlan, m map[string]any, l *loc) {
	url, _ := m["url"].(string)
	if url == "" {
		return // Extension.url min 1 is reported by the base layer
	}
	pp := w.v.profile(url)
	if pp == nil {
		if !strings.Contains(url, ":") && !e.modifierExt {
			// a relative url names a part of a complex extension, which
			// the definition of the enclosing extension checks
			return
		}
		switch {
		case e.modifierExt:
			w.issue("error", "extension", l, "extension", e.profile, "unknown modifier extension '"+url+"'")
		case w.v.opts.UnknownExtensions == "error":
			w.issue("error", "extension", l, "extension", e.profile, "unknown extension '"+url+"'")
		case w.v.opts.UnknownExtensions == "warning":
			w.issue("warning", "extension", l, "extension", e.profile, "unknown extension '"+url+"'")
		}
		return
	}
	if pp.sd.Type != "Extension" {
		w.issue("error", "extension", l, "extension", e.profile, "'"+url+"' is not an extension definition")
		return
	}
	if len(pp.sd.Context) > 0 && !w.contextAllowed(pp) {
		var where []string
		for _, c := range pp.sd.Context {
			where = append(where, c.Expression)
		}
		w.issue("error", "extension", l, "extension", url, fmt.Sprintf("the extension %s is not allowed on %s (contexts: %s)", url, w.host.path, strings.Join(where, ", ")))
	}
	w.item(rc, pp.root, nil, m, nil, l)
}

// contextAllowed checks an extension definition's contexts against the
// current host element. FHIRPath contexts other than plain paths are
// accepted unchecked.
func (w *walker) contextAllowed(pp *profilePlan) bool {
	h := w.host
	if h.path == "" {
		return true
	}
	for _, c := range pp.sd.Context {
		x := c.Expression
		if i := strings.IndexByte(x, '#'); i >= 0 {
			x = x[i+1:]
		}
		switch c.Type {
		case "extension":
			if x == h.extURL || c.Expression == h.extURL {
				return true
			}
		case "element", "fhirpath":
			if c.Type == "fhirpath" && strings.ContainsAny(x, "()=' ") {
				return true
			}
			switch x {
			case h.path, h.typ, "Element", "Base", "DataType":
				return true
			case "Resource", "DomainResource":
				if h.resource {
					return true
				}
			case "BackboneElement":
				if h.typ == "BackboneElement" {
					return true
				}
			case "Quantity":
				switch h.typ {
				case "Age", "Count", "Distance", "Duration", "MoneyQuantity", "SimpleQuantity":
					return true
				}
			}
			// a path given with a choice type's name, or a resource's
			// contexts given as "Resource.x"
			if strings.HasSuffix(h.path, "[x]") && strings.HasPrefix(x, strings.TrimSuffix(h.path, "[x]")) {
				return true
			}
		default:
			return true
		}
	}
	return false
}
