package fhirjson

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// The structural R4 check: one pass over the bytes of a body the guard has
// accepted, against the element model of package model (unknown elements,
// JSON types, single values and arrays, primitive formats, required
// elements, codes of required bindings, reference targets, choice and "_x"
// rules, resource types, contained resources and the DomainResource
// invariants for them). It builds no tree: it holds the path to the value
// it is at and a few counters per open object, so its memory grows with the
// nesting depth, not the body. Each byte is read once.

// walker is the state of one structural check.
type walker struct {
	m      *model.Model
	data   []byte
	pos    int
	root   string // the root's resource type, which expressions start with
	path   []seg
	cells  []int32 // bookkeeping of the open objects (model.Element.Cell)
	issues []outcome.Issue
	late   []lateType // resourceType members that do not come first
	shell  bool       // batch shell: Bundle.entry.resource is not checked
	stop   bool       // the issue cap is reached, or the JSON is malformed

	pathBuf [32]seg
	cellBuf [256]int32
}

// lateType locates the resourceType member of an object in which it is not
// the first member (or is spelled with escapes): the guard records these,
// so that the walker need not look ahead for a resource's type. Clients
// write resourceType first, so the list is usually empty; it holds one
// entry per such member, never more than the body has objects.
type lateType struct{ obj, start, end int }

// objCtx is what an object's walk needs to know about where it is.
type objCtx struct {
	resource      bool     // a resource: resourceType is one of its members
	contained     bool     // a resource inside contained (dom-2, dom-4, dom-5)
	containedMeta bool     // the meta of such a resource
	targets       []string // a Reference's allowed target types
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// structure checks body. late is the guard's record of resourceType
// members that are not first in their object, sorted by object offset.
func (v *Validator) structure(body []byte, late []lateType, shell bool) []outcome.Issue {
	w := walkers.Get().(*walker)
	*w = walker{m: v.model, data: body, late: late, shell: shell}
	w.path, w.cells = w.pathBuf[:0], w.cellBuf[:0]
	w.ws()
	if w.pos < len(w.data) && w.data[w.pos] == '{' {
		w.resource(objCtx{resource: true})
	}
	issues := w.issues
	*w = walker{}
	walkers.Put(w)
	return issues
}

// report adds an issue at the current path (plus name, when not empty).
func (w *walker) report(code, name, msg string) {
	if w.stop {
		return
	}
	var b strings.Builder
	b.WriteString(w.root)
	writeSegs(&b, w.path)
	if name != "" {
		b.WriteByte('.')
		b.WriteString(name)
	}
	expr := b.String()
	if w.root == "" {
		expr = strings.TrimPrefix(expr, ".")
	}
	w.issues = append(w.issues, issue(code, expr, msg))
	if len(w.issues) >= maxIssues {
		w.stop = true
	}
}

// malformed stops the walk: the guard has checked the syntax, so this only
// happens when the walker is given bytes the guard refused.
func (w *walker) malformed() {
	if !w.stop {
		w.report(codeStructure, "", "invalid JSON at byte offset "+strconv.Itoa(w.pos))
	}
	w.stop = true
}

// resource walks the resource object at w.pos.
func (w *walker) resource(ctx objCtx) {
	start := w.pos
	raw, found := w.resourceType(start)
	switch {
	case !found:
		w.report(codeRequired, "resourceType", `missing required element "resourceType"`)
	case raw[0] != '"':
		w.report(codeStructure, "resourceType", "resourceType must be a string")
	default:
		name, ok := unquote(raw)
		t := w.m.Resource(name)
		if ok && t != nil {
			if len(w.path) == 0 && w.root == "" {
				w.root = t.Name
			}
			w.object(t, ctx)
			return
		}
		if len(w.path) == 0 {
			// At the root there is no element to point at.
			w.issues = append(w.issues, issue(codeValue, "", "unknown resourceType "+clip(raw)))
		} else {
			w.report(codeValue, "", "unknown resourceType "+clip(raw))
		}
	}
	w.skip()
}

// resourceType finds the raw resourceType value of the object at start: the
// first member, or the one the guard recorded.
func (w *walker) resourceType(start int) ([]byte, bool) {
	const key = `"resourceType"`
	i := skipSpace(w.data, start+1)
	if bytes.HasPrefix(w.data[i:], []byte(key)) {
		j := skipSpace(w.data, i+len(key))
		if j < len(w.data) && w.data[j] == ':' {
			j = skipSpace(w.data, j+1)
			if end, _, ok := valueEnd(w.data, j); ok {
				return w.data[j:end], true
			}
		}
	}
	k, ok := slices.BinarySearchFunc(w.late, start, func(l lateType, obj int) int { return l.obj - obj })
	if !ok {
		return nil, false
	}
	return w.data[w.late[k].start:w.late[k].end], true
}

// object walks the object at w.pos as a value of t.
func (w *walker) object(t *model.Type, ctx objCtx) {
	base := len(w.cells)
	for range t.Cells {
		w.cells = append(w.cells, 0)
	}
	w.pos++ // '{'
	w.ws()
	if w.peek() == '}' {
		w.pos++
	} else {
		for !w.stop {
			name, ok := w.key()
			if !ok {
				return
			}
			w.path = append(w.path, seg{key: name})
			w.memberValue(t, name, base, ctx)
			w.path = w.path[:len(w.path)-1]
			w.ws()
			switch w.peek() {
			case ',':
				w.pos++
				w.ws()
				continue
			case '}':
				w.pos++
			default:
				w.malformed()
				return
			}
			break
		}
	}
	if !w.stop {
		w.finish(t, base)
	}
	w.cells = w.cells[:base]
}

// memberValue walks the value of member name of an object of type t.
func (w *walker) memberValue(t *model.Type, name []byte, base int, ctx objCtx) {
	if ctx.resource && string(name) == "resourceType" {
		w.skip()
		return
	}
	mb := t.Member(name)
	if mb == nil {
		w.report(codeStructure, "", "unknown element "+quoteName(name))
		w.skip()
		return
	}
	el := mb.Elem
	if el.Cell >= 0 {
		c := &w.cells[base+el.Cell]
		switch {
		case !el.Choice:
			*c = 1
		case *c == 0:
			*c = int32(mb.Choice)
		case *c > 0 && *c != int32(mb.Choice):
			*c = -1 // reported once
			w.path = w.path[:len(w.path)-1]
			w.report(codeStructure, el.Name, "only one "+el.Name+"[x] element is allowed")
			w.path = append(w.path, seg{key: name})
		}
	}
	var inner objCtx
	switch {
	case ctx.contained && el.Name == "contained" && !mb.Companion:
		w.report(codeInvariant, "", "a contained resource SHALL NOT contain additional contained resources (dom-2)")
	case ctx.contained && el.Name == "meta":
		inner.containedMeta = true
	case ctx.containedMeta && (el.Name == "versionId" || el.Name == "lastUpdated"):
		w.report(codeInvariant, "", "a contained resource SHALL NOT have a meta.versionId or a meta.lastUpdated (dom-4)")
	case ctx.containedMeta && el.Name == "security":
		w.report(codeInvariant, "", "a contained resource SHALL NOT have a security label (dom-5)")
	case ctx.targets != nil && el.Name == "reference" && !mb.Companion:
		w.checkTarget(ctx.targets)
	}
	if !el.Repeats {
		w.value(mb, inner, false)
		return
	}
	if w.peek() != '[' {
		w.report(codeStructure, "", "expected an array: this element repeats")
		w.skip()
		return
	}
	n := w.array(mb, inner)
	if len(t.Paired) > 0 && el.Cell >= 0 && mb.Type != nil && mb.Type.Kind == model.Primitive {
		i := base + el.Cell + 1
		if mb.Companion {
			i++
		}
		w.cells[i] = int32(n)
	}
}

// array walks the array at w.pos, each element a value of mb, and returns
// its length.
func (w *walker) array(mb *model.Member, ctx objCtx) int {
	w.pos++ // '['
	w.ws()
	n := 0
	if w.peek() == ']' {
		w.pos++
		return 0
	}
	for !w.stop {
		w.path = append(w.path, seg{index: n})
		w.value(mb, ctx, true)
		w.path = w.path[:len(w.path)-1]
		n++
		w.ws()
		switch w.peek() {
		case ',':
			w.pos++
			w.ws()
			continue
		case ']':
			w.pos++
		default:
			w.malformed()
		}
		break
	}
	return n
}

// value walks one value of mb (an element of an array when inArray).
func (w *walker) value(mb *model.Member, ctx objCtx, inArray bool) {
	c := w.peek()
	switch {
	case c == 'n' && inArray:
		// A placeholder that aligns "x" and "_x"; the guard has checked
		// that the other array exists.
		w.skip()
	case mb.Companion:
		if c != '{' {
			w.report(codeStructure, "", "expected a JSON object with the id and extensions of the primitive, found "+w.clipValue())
			w.skip()
			return
		}
		w.object(w.m.Companion(), objCtx{})
	case mb.Type == nil:
		if c != '{' {
			w.report(codeStructure, "", "expected a resource (a JSON object), found "+w.clipValue())
			w.skip()
			return
		}
		if w.shell && w.batchEntryResource() {
			w.skip()
			return
		}
		w.resource(objCtx{resource: true, contained: mb.Elem.Name == "contained"})
	case mb.Type.Kind == model.Primitive:
		w.primitive(mb)
	case c != '{':
		w.report(codeStructure, "", "expected a JSON object, found "+w.clipValue())
		w.skip()
	default:
		ctx.targets = mb.Targets
		w.object(mb.Type, ctx)
	}
}

// batchEntryResource reports whether the walk is at Bundle.entry[i].resource
// of the root.
func (w *walker) batchEntryResource() bool {
	return len(w.path) == 3 && string(w.path[0].key) == "entry" && string(w.path[2].key) == "resource"
}

// primitive checks the primitive value at w.pos.
func (w *walker) primitive(mb *model.Member) {
	t := mb.Type
	start := w.pos
	switch w.peek() {
	case '{':
		w.report(codeValue, "", "invalid "+t.Name+": expected a JSON "+jsonKind(t.Format)+", found an object (a primitive's id and extensions go in \"_"+mb.Elem.Name+"\")")
		w.skip()
		return
	case '[':
		w.report(codeStructure, "", "expected a single "+t.Name+", found an array: this element does not repeat")
		w.skip()
		return
	}
	w.skip()
	if w.stop {
		return
	}
	raw := w.data[start:w.pos]
	var unquoted []byte
	if raw[0] == '"' && hasEscape(raw) {
		unquoted, _ = unquote(raw)
	}
	if mb.Codes != nil && raw[0] == '"' {
		s := unquoted
		if s == nil {
			s = raw[1 : len(raw)-1]
		}
		if !mb.Codes.Has(s) {
			w.report(codeCodeInvalid, "", "invalid code "+clip(raw)+": not in the required value set "+mb.Codes.Name)
		}
		return
	}
	switch model.Check(t.Format, raw, unquoted) {
	case model.OK:
	case model.TooLong:
		w.report(codeValue, "", "string exceeds maximum size of 1 MB")
	case model.BadControl:
		w.report(codeValue, "", "string contains invalid characters (control characters other than tab, CR and LF)")
	case model.OutOfRange:
		w.report(codeValue, "", "invalid "+t.Name+" "+clip(raw)+": out of range")
	default:
		w.report(codeValue, "", "invalid "+t.Name+" "+clip(raw))
	}
}

// jsonKind names the JSON type that holds values of a primitive format.
func jsonKind(f model.Format) string {
	switch f {
	case model.Boolean:
		return "boolean"
	case model.Decimal, model.Integer, model.PositiveInt, model.UnsignedInt:
		return "number"
	}
	return "string"
}

// checkTarget checks the literal reference at w.pos (Reference.reference)
// against the allowed target types: "Type/id" and "Type/id/_history/v"
// name their type; other forms (absolute URLs, fragments) are not checked.
func (w *walker) checkTarget(targets []string) {
	end, kind, ok := valueEnd(w.data, w.pos)
	if !ok || kind != kString {
		return
	}
	raw := w.data[w.pos:end]
	ref, ok := unquote(raw)
	if !ok {
		return
	}
	typ, rest, ok := bytesCut(ref, '/')
	if !ok {
		return
	}
	if _, version, more := bytesCut(rest, '/'); more {
		history, v, ok := bytesCut(version, '/')
		if !ok || string(history) != "_history" || bytes.IndexByte(v, '/') >= 0 {
			return
		}
	}
	if !w.m.IsReferenceType(typ) {
		return
	}
	for _, t := range targets {
		if t == string(typ) {
			return
		}
	}
	w.path = w.path[:len(w.path)-1] // the issue is on the Reference
	w.report(codeValue, "", "reference "+clip(raw)+" points to "+article(string(typ))+", which is not allowed here (allowed: "+strings.Join(targets, ", ")+")")
	w.path = append(w.path, seg{key: []byte("reference")})
}

// article prefixes a resource type with "a" or "an".
func article(t string) string {
	if t != "" && strings.ContainsRune("AEIOU", rune(t[0])) {
		return "an " + t
	}
	return "a " + t
}

// finish checks what can only be checked once all the members of an
// object of type t are known.
func (w *walker) finish(t *model.Type, base int) {
	cells := w.cells[base:]
	for _, el := range t.Required {
		if cells[el.Cell] == 0 {
			name := el.Name
			if el.Choice {
				name += "[x]"
			}
			w.report(codeRequired, el.Name, "missing required element "+strconv.Quote(name))
		}
	}
	for _, el := range t.Paired {
		if x, under := cells[el.Cell+1], cells[el.Cell+2]; x > 0 && under > 0 && x != under {
			w.report(codeStructure, el.Name, quoteName([]byte(el.Name))+" and "+quoteName([]byte("_"+el.Name))+" must have the same number of items")
		}
	}
}

func (w *walker) ws() { w.pos = skipSpace(w.data, w.pos) }

func (w *walker) peek() byte {
	if w.pos < len(w.data) {
		return w.data[w.pos]
	}
	return 0
}

// key reads a member name and the colon after it, and leaves w.pos at the
// value.
func (w *walker) key() ([]byte, bool) {
	if w.peek() != '"' {
		w.malformed()
		return nil, false
	}
	end := skipString(w.data, w.pos)
	if end > len(w.data) {
		w.malformed()
		return nil, false
	}
	name, ok := unquote(w.data[w.pos:end])
	w.pos = skipSpace(w.data, end)
	if !ok || w.peek() != ':' {
		w.malformed()
		return nil, false
	}
	w.pos = skipSpace(w.data, w.pos+1)
	return name, true
}

// skip moves past the value at w.pos.
func (w *walker) skip() {
	end, _, ok := valueEnd(w.data, w.pos)
	if !ok {
		w.malformed()
		return
	}
	w.pos = end
}

// clipValue renders the value at w.pos for a message.
func (w *walker) clipValue() string {
	end := skipValue(w.data, w.pos)
	return clip(w.data[w.pos:min(end, len(w.data))])
}

// bytesCut is strings.Cut for bytes, without allocating.
func bytesCut(s []byte, sep byte) (before, after []byte, found bool) {
	if i := bytes.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, nil, false
}

func hasEscape(raw []byte) bool {
	for _, c := range raw {
		if c == '\\' {
			return true
		}
	}
	return false
}
