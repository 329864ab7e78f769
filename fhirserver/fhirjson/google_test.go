package fhirjson

// google/fhir's structural check as Kiln ran it up to f7dada6 (the
// Unmarshaller with extended validation, its errors turned into issues,
// and each contained resource validated on its own), kept as the oracle
// of the differential tests: the code below is that version's, renamed.

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/fhir/go/fhirversion"
	"github.com/google/fhir/go/jsonformat"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apb "github.com/google/fhir/go/proto/google/fhir/proto/annotations_go_proto"
	crpb "github.com/google/fhir/go/proto/google/fhir/proto/r4/core/resources/bundle_and_contained_resource_go_proto"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// googleChecker is the structural half of the old Check.
type googleChecker struct {
	um *jsonformat.Unmarshaller
}

func newGoogleChecker() (*googleChecker, error) {
	um, err := jsonformat.NewUnmarshaller("UTC", fhirversion.R4)
	if err != nil {
		return nil, err
	}
	um.MaxNestingDepth = DefaultLimits().MaxDepth
	return &googleChecker{um: um}, nil
}

// check is what the old Check added to the guard for a body the guard
// accepted: google/fhir on the whole, then each contained resource. parsed
// is false when google/fhir could not build its model, in which case it
// ran none of its validation (required elements, reference types, formats).
func (g *googleChecker) check(body []byte, rootType string) (issues []outcome.Issue, parsed bool) {
	issues, parsed = g.structuralParsed(body, "")
	issues = append(issues, g.checkContained(body, rootType, gFindContained(body))...)
	return issues, parsed
}

func (g *googleChecker) structuralParsed(body []byte, prefix string) (issues []outcome.Issue, parsed bool) {
	issues = g.structural(body, prefix)
	func() {
		defer func() { _ = recover() }()
		var rep gReporter
		_, err := g.um.UnmarshalWithErrorReporter(body, &rep)
		parsed = err == nil
	}()
	return issues, parsed
}

// gFindContained lists the elements of every "contained" array, as the
// old guard recorded them.
func gFindContained(body []byte) []gContainedRef {
	var out []gContainedRef
	var walk func(i int, path string)
	walk = func(i int, path string) {
		switch {
		case i < len(body) && body[i] == '{':
			ms, _, ok := objectMembers(body, i, nil)
			if !ok {
				return
			}
			for _, m := range ms {
				p := path + "." + string(m.name)
				if string(m.name) == "contained" && m.kind == kArray {
					els, _ := arrayElements(body, m.start, nil)
					for k, el := range els {
						if body[el.start] == '{' {
							out = append(out, gContainedRef{path: p + "[" + strconv.Itoa(k) + "]", start: el.start, end: el.end})
						}
					}
				}
				walk(m.start, p)
			}
		case i < len(body) && body[i] == '[':
			els, _ := arrayElements(body, i, nil)
			for k, el := range els {
				walk(el.start, path+"["+strconv.Itoa(k)+"]")
			}
		}
	}
	walk(skipSpace(body, 0), "")
	return out
}

type gContainedRef struct {
	path       string
	start, end int
}

// checkContained validates every contained resource on its own: google/fhir
// parses contained resources (so unknown elements and bad primitives are
// already caught) but never runs its validation (required elements,
// reference targets, primitive formats) inside them. It also applies the
// DomainResource invariants for contained resources (dom-2, dom-4, dom-5).
func (g *googleChecker) checkContained(body []byte, rootType string, refs []gContainedRef) []outcome.Issue {
	var issues []outcome.Issue
	// Elements are recorded as they end, so inner ones come first.
	slices.SortFunc(refs, func(a, b gContainedRef) int { return a.start - b.start })
	outerEnd := -1
	for _, c := range refs {
		if c.start < outerEnd {
			continue // nested contained: dom-2 is gReported on its container
		}
		outerEnd = c.end
		expr := rootType + c.path
		sub := body[c.start:c.end]
		issues = append(issues, gContainedInvariants(sub, expr)...)
		issues = append(issues, g.structural(sub, expr)...)
	}
	return issues
}

// gContainedInvariants checks what R4 says of a resource inside contained.
func gContainedInvariants(sub []byte, expr string) []outcome.Issue {
	var issues []outcome.Issue
	s := scanDoc(sub, maxSupportedDepth)
	if s.fatal {
		return nil
	}
	add := func(path, msg string) {
		issues = append(issues, outcome.Issue{Severity: "error", Code: codeInvariant, Diagnostics: msg, Expression: []string{expr + path}})
	}
	for _, m := range s.top {
		switch string(m.name) {
		case "contained":
			add(".contained", "a contained resource SHALL NOT contain additional contained resources (dom-2)")
		case "meta":
			if m.kind != kObject {
				continue
			}
			ms := scanDoc(sub[m.start:m.end], maxSupportedDepth)
			for _, mm := range ms.top {
				switch string(mm.name) {
				case "versionId", "lastUpdated":
					add(".meta."+string(mm.name), "a contained resource SHALL NOT have a meta.versionId or a meta.lastUpdated (dom-4)")
				case "security":
					add(".meta.security", "a contained resource SHALL NOT have a security label (dom-5)")
				}
			}
		}
	}
	return issues
}

// structural runs google/fhir on body. prefix, when set, replaces the
// resource type at the start of every expression (for contained resources).
func (g *googleChecker) structural(body []byte, prefix string) (issues []outcome.Issue) {
	defer func() {
		// google/fhir is not ours; a panic on odd input must not take the
		// request (or the server) down.
		if r := recover(); r != nil {
			issues = []outcome.Issue{{Severity: "error", Code: codeStructure, Diagnostics: "the resource could not be parsed: " + clipString(fmt.Sprint(r)), Expression: exprs(prefix)}}
		}
	}()
	var rep gReporter
	_, err := g.um.UnmarshalWithErrorReporter(body, &rep)
	conv := gConverter{body: body, prefix: prefix}
	if err != nil {
		return conv.parseIssues(err)
	}
	return conv.validationIssues(rep.errs)
}

// gReporter collects google/fhir's validation errors (required elements,
// reference types, primitive formats) with their element paths.
type gReporter struct {
	errs []gReported
}

type gReported struct {
	path string
	err  error
}

func (r *gReporter) ReportValidationError(path string, err error) error {
	if len(r.errs) < maxIssues {
		r.errs = append(r.errs, gReported{path, err})
	}
	return nil
}

// ReportValidationWarning ignores warnings: Check only rejects.
func (r *gReporter) ReportValidationWarning(string, error) error { return nil }

// gUmError holds what google/fhir says about one parse error: the
// exported fields of its jsonpbhelper.UnmarshalError.
type gUmError struct {
	Path, Details, Diagnostics string
}

// gUnmarshalErrors extracts the parse errors from err, the error
// Unmarshaller returns when it cannot build its model (a single
// *UnmarshalError or an UnmarshalErrorList). ok is false for other errors.
//
// Parse errors, unlike validation errors, never reach the ErrorReporter
// hook, and the type that carries them lives in an internal package whose
// only public methods are Error and Unwrap; Error drops Diagnostics (the
// unknown member's name, the value found), which the messages need. So
// this one place reads the exported fields by reflection.
// TestParseErrorShape fails if an upgrade changes that shape, rather than
// every message silently degrading to the generic one.
func gUnmarshalErrors(err error) (out []gUmError, ok bool) {
	v := reflect.ValueOf(err)
	switch v.Kind() {
	case reflect.Pointer:
		e, ok := gUmFields(v)
		if !ok {
			return nil, false
		}
		return []gUmError{e}, true
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			e, ok := gUmFields(v.Index(i))
			if !ok {
				return nil, false
			}
			out = append(out, e)
		}
		return out, len(out) > 0
	}
	return nil, false
}

func gUmFields(p reflect.Value) (gUmError, bool) {
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return gUmError{}, false
	}
	v := p.Elem()
	if v.Kind() != reflect.Struct || v.Type().Name() != "UnmarshalError" {
		return gUmError{}, false
	}
	str := func(name string) (string, bool) {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.String {
			return "", false
		}
		return f.String(), true
	}
	var e gUmError
	var ok1, ok2, ok3 bool
	e.Path, ok1 = str("Path")
	e.Details, ok2 = str("Details")
	e.Diagnostics, ok3 = str("Diagnostics")
	return e, ok1 && ok2 && ok3
}

// gReportedDetails reads a validation error handed to the ErrorReporter
// hook through its public surface: the hook gives the element path, and
// Error() is `error at "<path>": <details>` (one line per error when
// several are gReported together). google/fhir's validation errors carry no
// diagnostics, and their kind (required element, reference type, primitive
// format) shows in the details' wording.
func gReportedDetails(path string, err error) []string {
	prefix := "error at " + strconv.Quote(path) + ": "
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		if path != "" {
			l = strings.TrimPrefix(l, prefix)
		} else if rest, ok := strings.CutPrefix(l, "error at "); ok {
			// An error at the root is gReported with an empty element path
			// but may still carry its own.
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				l = strings.TrimPrefix(rest[len(q):], ": ")
			}
		}
		lines[i] = l
	}
	return lines
}

// gConverter maps google/fhir's errors for one unmarshalled body to issues.
type gConverter struct {
	body   []byte
	prefix string // replaces the leading resource type, for contained resources
}

// rebase roots expr at c.prefix. google/fhir's paths start with the
// resource type ("Observation.status"), which the prefix replaces; a path
// without one (an error at the root, such as a missing resourceType) is
// relative to the resource. Element names never start with an upper-case
// letter (the guard rejects them), resource types always do.
func (c gConverter) rebase(expr string) string {
	if c.prefix == "" {
		return expr
	}
	if expr == "" {
		return c.prefix
	}
	if expr[0] < 'A' || expr[0] > 'Z' {
		return c.prefix + "." + expr
	}
	i := strings.IndexAny(expr, ".[")
	if i < 0 {
		return c.prefix
	}
	return c.prefix + expr[i:]
}

func (c gConverter) issue(code, expr, msg string) outcome.Issue {
	return issue(code, c.rebase(expr), msg)
}

// parseIssues maps the error google/fhir returns when it cannot parse the
// body into its model (unknown elements, bad primitive values, wrong JSON
// types, unknown resource types).
func (c gConverter) parseIssues(err error) []outcome.Issue {
	ues, ok := gUnmarshalErrors(err)
	if !ok {
		return []outcome.Issue{issue(codeStructure, c.prefix, "the resource could not be parsed: "+err.Error())}
	}
	out := make([]outcome.Issue, 0, len(ues))
	for _, ue := range ues {
		out = append(out, c.parseIssue(ue))
	}
	return out
}

func (c gConverter) parseIssue(ue gUmError) outcome.Issue {
	expr := gJsonPathExpr(ue.Path)
	d, diag := ue.Details, ue.Diagnostics
	switch {
	case d == "unknown field":
		name := gUnquoteDiag(diag)
		return c.issue(codeStructure, gAppendName(expr, name), "unknown element "+quoteName([]byte(name)))
	case d == "code type mismatch":
		return c.issue(codeCodeInvalid, expr, gCodeMismatch(diag))
	case d == "expected array":
		return c.issue(codeStructure, expr, "expected an array: this element repeats")
	case strings.HasPrefix(d, "expected ") && strings.HasPrefix(diag, "found "):
		return c.issue(codeValue, expr, "invalid "+gTypeName(d[len("expected "):])+" "+clipString(diag[len("found "):]))
	case (d == "invalid positive integer" || d == "invalid non-negative integer") && strings.HasPrefix(diag, "found "):
		return c.issue(codeValue, expr, "invalid "+gTypeName(strings.TrimPrefix(d, "invalid "))+" "+clipString(diag[len("found "):]))
	case d == "invalid JSON" && ue.Path == "":
		// Syntax was checked by the guard, so this is google/fhir's JSON
		// library refusing something (e.g. a number it cannot represent).
		msg := diag
		if i := strings.Index(msg, ", error found"); i >= 0 {
			msg = msg[:i]
		}
		return c.issue(codeStructure, c.prefix, "the JSON could not be read by the FHIR parser: "+clipString(msg))
	case d == "invalid JSON":
		return c.issue(codeStructure, expr, "expected a JSON object, found "+clipString(diag))
	case d == "unknown resource type":
		// The path ends in the unknown type itself; point at its container.
		return c.issue(codeValue, gJsonPathExpr(gParentPath(ue.Path)), "unknown resourceType "+clipString(diag))
	case d == "invalid resource type":
		return c.issue(codeStructure, gAppendName(expr, "resourceType"), "resourceType must be a string")
	case strings.HasPrefix(d, "missing required field "):
		name := gUnquoteDiag(strings.TrimPrefix(d, "missing required field "))
		return c.issue(codeRequired, gAppendName(expr, name), "missing required element "+strconv.Quote(name))
	case strings.HasPrefix(d, "cannot accept multiple values for ") && strings.HasSuffix(d, " field"):
		// Which of the two members is named depends on map order, so point
		// at the choice element itself.
		choice := strings.TrimSuffix(strings.TrimPrefix(d, "cannot accept multiple values for "), " field")
		return c.issue(codeStructure, gAppendName(expr, choice), "only one "+choice+"[x] element is allowed")
	case strings.HasPrefix(d, "array length mismatch"):
		// Reported on whichever of "x" and "_x" came second in map order;
		// always point at "x".
		name := expr[strings.LastIndexByte(expr, '.')+1:]
		if strings.HasPrefix(name, "_") {
			expr = expr[:len(expr)-len(name)] + name[1:]
			name = name[1:]
		}
		return c.issue(codeStructure, expr, quoteName([]byte(name))+" and "+quoteName([]byte("_"+name))+" must have the same number of items")
	}
	msg := d
	if diag != "" {
		msg += ": " + clipString(diag)
	}
	return c.issue(codeStructure, expr, msg)
}

// validationIssues maps what google/fhir's validation pass gReported.
func (c gConverter) validationIssues(reps []gReported) []outcome.Issue {
	out := make([]outcome.Issue, 0, len(reps))
	for _, r := range reps {
		expr, md := gProtoPathExpr(r.path)
		for _, d := range gReportedDetails(r.path, r.err) {
			out = append(out, c.validationIssue(d, expr, md))
		}
	}
	return out
}

func (c gConverter) validationIssue(d string, expr string, md gMsgDesc) outcome.Issue {
	switch {
	case strings.HasPrefix(d, "missing required field "):
		name := gUnquoteDiag(strings.TrimPrefix(d, "missing required field "))
		shown := name
		if gIsChoiceField(md, name) {
			shown += "[x]"
		}
		return c.issue(codeRequired, gAppendName(expr, name), "missing required element "+strconv.Quote(shown))
	case strings.HasPrefix(d, "invalid reference to a "):
		msg := d
		if rest, ok := strings.CutPrefix(d, "invalid reference to a "); ok {
			if got, want, ok := strings.Cut(rest, " resource, want "); ok {
				msg = "a reference to " + gArticle(got) + " is not allowed here (allowed: " + want + ")"
				if raw := gLookupRaw(c.body, expr+".reference"); raw != nil {
					msg = "reference " + clip(raw) + " points to " + gArticle(got) + ", which is not allowed here (allowed: " + want + ")"
				}
			}
		}
		return c.issue(codeValue, expr, msg)
	}
	// Primitive checks: a regex or range failed. Show the value.
	msg := d
	if t, ok := strings.CutPrefix(d, "invalid "); ok {
		t = strings.TrimSuffix(t, " format")
		msg = "invalid " + gTypeName(t)
		if raw := gLookupRaw(c.body, expr); raw != nil {
			msg += " " + clip(raw)
		}
	}
	return c.issue(codeValue, expr, msg)
}

// gArticle prefixes a resource type with "a" or "an".
func gArticle(t string) string {
	if t != "" && strings.ContainsRune("AEIOU", rune(t[0])) {
		return "an " + t
	}
	return "a " + t
}

// gTypeName turns google/fhir's wording of a type into the FHIR type name.
func gTypeName(t string) string {
	switch t {
	case "datetime":
		return "dateTime"
	case "ID", "Id":
		return "id"
	case "OID", "Oid":
		return "oid"
	case "UUID", "Uuid":
		return "uuid"
	case "Code":
		return "code"
	case "positive integer":
		return "positiveInt"
	case "non-negative integer":
		return "unsignedInt"
	case "binary data":
		return "base64Binary"
	}
	return t
}

// gCodeMismatch rewords `"mal" is not a AdministrativeGenderCode`.
func gCodeMismatch(diag string) string {
	val, typ, ok := strings.Cut(diag, " is not a ")
	if !ok {
		return "invalid code: " + clipString(diag)
	}
	return "invalid code " + clipString(val) + ": not in the required value set " + strings.TrimSuffix(typ, "Code")
}

// gUnquoteDiag reads a Go-quoted name from a diagnostic.
func gUnquoteDiag(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// gAppendName adds a member name to a FHIRPath expression.
func gAppendName(expr, name string) string {
	var b strings.Builder
	b.WriteString(expr)
	if expr != "" {
		b.WriteByte('.')
	}
	writeName(&b, []byte(name))
	return b.String()
}

// gJsonPathExpr converts a google/fhir parse path, built from the client's
// JSON member names, to an expression. google/fhir inserts the resource type
// as a segment wherever a resource starts ("Bundle.entry[0].resource.Patient",
// "Patient.contained[0].Organization"); FHIRPath does not, so those
// segments are dropped. Element names never start with an upper-case letter
// (the guard rejects such names), so any such segment after the first is a
// resource type.
func gJsonPathExpr(p string) string {
	if p == "" {
		return ""
	}
	segs := strings.Split(p, ".")
	out := segs[:1]
	for _, s := range segs[1:] {
		if s != "" && 'A' <= s[0] && s[0] <= 'Z' {
			continue
		}
		out = append(out, s)
	}
	return strings.Join(out, ".")
}

func gParentPath(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

type gMsgDesc = protoreflect.MessageDescriptor

var gContainedDesc = (&crpb.ContainedResource{}).ProtoReflect().Descriptor()

type gPathSeg struct {
	name  string
	index string // "[n]" or ""
}

func gSplitPath(p string) []gPathSeg {
	parts := strings.Split(p, ".")
	segs := make([]gPathSeg, 0, len(parts))
	for _, s := range parts {
		name, idx := s, ""
		if i := strings.IndexByte(s, '['); i >= 0 {
			name, idx = s[:i], s[i:]
		}
		segs = append(segs, gPathSeg{name, idx})
	}
	return segs
}

// gProtoPathExpr converts a path from google/fhir's validation pass, which
// names proto fields ("Observation.value.quantity.code",
// "Bundle.entry[0].resource.patient.birthDate",
// "Patient.birthDate.extension[0]"), into the JSON member names the client
// wrote ("Observation.valueQuantity.code", "Bundle.entry[0].resource.birthDate",
// "Patient._birthDate.extension[0]"), by walking the proto descriptors. It
// also returns the descriptor of the last element, for required-field
// messages. Unknown segments are kept as they are.
func gProtoPathExpr(p string) (string, gMsgDesc) {
	if p == "" {
		return "", nil
	}
	segs := gSplitPath(p)
	root := gContainedDesc.Fields().ByJSONName(gLowerFirst(segs[0].name))
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
		var next *gPathSeg
		if i+1 < len(segs) {
			next = &segs[i+1]
		}
		switch {
		case fm.FullName() == gContainedDesc.FullName():
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
		case gIsChoice(fm) && next != nil:
			// "value.quantity" is the JSON member "valueQuantity".
			if cf := fm.Fields().ByJSONName(next.name); cf != nil && cf.Message() != nil {
				b.WriteString("." + name + gUpperFirst(next.name) + sg.index + next.index)
				md = cf.Message()
				i++
				continue
			}
		case gIsPrimitive(fm) && next != nil && (next.name == "extension" || next.name == "id"):
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

func gIsChoice(md gMsgDesc) bool {
	return md != nil && proto.HasExtension(md.Options(), apb.E_IsChoiceType)
}

func gIsPrimitive(md gMsgDesc) bool {
	if md == nil {
		return false
	}
	k, _ := proto.GetExtension(md.Options(), apb.E_StructureDefinitionKind).(apb.StructureDefinitionKindValue)
	return k == apb.StructureDefinitionKindValue_KIND_PRIMITIVE_TYPE
}

// gIsChoiceField reports whether the member name of md is a choice (value[x]).
func gIsChoiceField(md gMsgDesc, name string) bool {
	if md == nil {
		return false
	}
	f := md.Fields().ByJSONName(name)
	return f != nil && gIsChoice(f.Message())
}

func gLowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}

func gUpperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// gLookupRaw returns the raw JSON at expr ("Patient.name[0].given[1]"; the
// first segment is the root) in data, which has passed the guard, or nil.
// It is only used to quote offending values in messages.
func gLookupRaw(data []byte, expr string) []byte {
	segs := gSplitPath(expr)
	i := skipSpace(data, 0)
	for _, sg := range segs[1:] {
		var ok bool
		if i, ok = gMemberValue(data, i, sg.name); !ok {
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
			if i, ok = gArrayElem(data, i, n); !ok {
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

// gMemberValue finds member name of the object at d[i] and returns where its
// value starts.
func gMemberValue(d []byte, i int, name string) (int, bool) {
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

// gArrayElem returns where element n of the array at d[i] starts.
func gArrayElem(d []byte, i, n int) (int, bool) {
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
