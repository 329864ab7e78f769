package fhirjson

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// OperationOutcome issue-type codes (http://hl7.org/fhir/issue-type) used here.
const (
	codeStructure   = "structure"
	codeValue       = "value"
	codeRequired    = "required"
	codeInvariant   = "invariant"
	codeCodeInvalid = "code-invalid"
	codeTooCostly   = "too-costly"
	codeInvalid     = "invalid"
)

func issue(code, expr, msg string) outcome.Issue {
	return outcome.Issue{Severity: "error", Code: code, Diagnostics: msg, Expression: exprs(expr)}
}

// guardIssues turns scanner issues into outcome issues, rooting their
// relative paths at the resource type.
func guardIssues(gs []guardIssue, rootType string) []outcome.Issue {
	if !isTypeName(rootType) {
		rootType = "" // a garbled type would only garble the expressions
	}
	out := make([]outcome.Issue, 0, len(gs))
	for _, g := range gs {
		expr := rootType + g.path
		if rootType == "" {
			expr = strings.TrimPrefix(g.path, ".")
		}
		out = append(out, issue(g.code, expr, g.msg))
	}
	return out
}

// isTypeName reports whether t looks like a resource type name.
func isTypeName(t string) bool {
	if t == "" || len(t) > maxShown || t[0] < 'A' || t[0] > 'Z' {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// umError holds what google/fhir says about one parse error: the
// exported fields of its jsonpbhelper.UnmarshalError.
type umError struct {
	Path, Details, Diagnostics string
}

// unmarshalErrors extracts the parse errors from err, the error
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
func unmarshalErrors(err error) (out []umError, ok bool) {
	v := reflect.ValueOf(err)
	switch v.Kind() {
	case reflect.Pointer:
		e, ok := umFields(v)
		if !ok {
			return nil, false
		}
		return []umError{e}, true
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			e, ok := umFields(v.Index(i))
			if !ok {
				return nil, false
			}
			out = append(out, e)
		}
		return out, len(out) > 0
	}
	return nil, false
}

func umFields(p reflect.Value) (umError, bool) {
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return umError{}, false
	}
	v := p.Elem()
	if v.Kind() != reflect.Struct || v.Type().Name() != "UnmarshalError" {
		return umError{}, false
	}
	str := func(name string) (string, bool) {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.String {
			return "", false
		}
		return f.String(), true
	}
	var e umError
	var ok1, ok2, ok3 bool
	e.Path, ok1 = str("Path")
	e.Details, ok2 = str("Details")
	e.Diagnostics, ok3 = str("Diagnostics")
	return e, ok1 && ok2 && ok3
}

// reportedDetails reads a validation error handed to the ErrorReporter
// hook through its public surface: the hook gives the element path, and
// Error() is `error at "<path>": <details>` (one line per error when
// several are reported together). google/fhir's validation errors carry no
// diagnostics, and their kind (required element, reference type, primitive
// format) shows in the details' wording.
func reportedDetails(path string, err error) []string {
	prefix := "error at " + strconv.Quote(path) + ": "
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		if path != "" {
			l = strings.TrimPrefix(l, prefix)
		} else if rest, ok := strings.CutPrefix(l, "error at "); ok {
			// An error at the root is reported with an empty element path
			// but may still carry its own.
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				l = strings.TrimPrefix(rest[len(q):], ": ")
			}
		}
		lines[i] = l
	}
	return lines
}

// converter maps google/fhir's errors for one unmarshalled body to issues.
type converter struct {
	body   []byte
	prefix string // replaces the leading resource type, for contained resources
}

// rebase roots expr at c.prefix. google/fhir's paths start with the
// resource type ("Observation.status"), which the prefix replaces; a path
// without one (an error at the root, such as a missing resourceType) is
// relative to the resource. Element names never start with an upper-case
// letter (the guard rejects them), resource types always do.
func (c converter) rebase(expr string) string {
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

func (c converter) issue(code, expr, msg string) outcome.Issue {
	return issue(code, c.rebase(expr), msg)
}

// parseIssues maps the error google/fhir returns when it cannot parse the
// body into its model (unknown elements, bad primitive values, wrong JSON
// types, unknown resource types).
func (c converter) parseIssues(err error) []outcome.Issue {
	ues, ok := unmarshalErrors(err)
	if !ok {
		return []outcome.Issue{issue(codeStructure, c.prefix, "the resource could not be parsed: "+err.Error())}
	}
	out := make([]outcome.Issue, 0, len(ues))
	for _, ue := range ues {
		out = append(out, c.parseIssue(ue))
	}
	return out
}

func (c converter) parseIssue(ue umError) outcome.Issue {
	expr := jsonPathExpr(ue.Path)
	d, diag := ue.Details, ue.Diagnostics
	switch {
	case d == "unknown field":
		name := unquoteDiag(diag)
		return c.issue(codeStructure, appendName(expr, name), "unknown element "+quoteName([]byte(name)))
	case d == "code type mismatch":
		return c.issue(codeCodeInvalid, expr, codeMismatch(diag))
	case d == "expected array":
		return c.issue(codeStructure, expr, "expected an array: this element repeats")
	case strings.HasPrefix(d, "expected ") && strings.HasPrefix(diag, "found "):
		return c.issue(codeValue, expr, "invalid "+typeName(d[len("expected "):])+" "+clipString(diag[len("found "):]))
	case (d == "invalid positive integer" || d == "invalid non-negative integer") && strings.HasPrefix(diag, "found "):
		return c.issue(codeValue, expr, "invalid "+typeName(strings.TrimPrefix(d, "invalid "))+" "+clipString(diag[len("found "):]))
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
		return c.issue(codeValue, jsonPathExpr(parentPath(ue.Path)), "unknown resourceType "+clipString(diag))
	case d == "invalid resource type":
		return c.issue(codeStructure, appendName(expr, "resourceType"), "resourceType must be a string")
	case strings.HasPrefix(d, "missing required field "):
		name := unquoteDiag(strings.TrimPrefix(d, "missing required field "))
		return c.issue(codeRequired, appendName(expr, name), "missing required element "+strconv.Quote(name))
	case strings.HasPrefix(d, "cannot accept multiple values for ") && strings.HasSuffix(d, " field"):
		// Which of the two members is named depends on map order, so point
		// at the choice element itself.
		choice := strings.TrimSuffix(strings.TrimPrefix(d, "cannot accept multiple values for "), " field")
		return c.issue(codeStructure, appendName(expr, choice), "only one "+choice+"[x] element is allowed")
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

// validationIssues maps what google/fhir's validation pass reported.
func (c converter) validationIssues(reps []reported) []outcome.Issue {
	out := make([]outcome.Issue, 0, len(reps))
	for _, r := range reps {
		expr, md := protoPathExpr(r.path)
		for _, d := range reportedDetails(r.path, r.err) {
			out = append(out, c.validationIssue(d, expr, md))
		}
	}
	return out
}

func (c converter) validationIssue(d string, expr string, md msgDesc) outcome.Issue {
	switch {
	case strings.HasPrefix(d, "missing required field "):
		name := unquoteDiag(strings.TrimPrefix(d, "missing required field "))
		shown := name
		if isChoiceField(md, name) {
			shown += "[x]"
		}
		return c.issue(codeRequired, appendName(expr, name), "missing required element "+strconv.Quote(shown))
	case strings.HasPrefix(d, "invalid reference to a "):
		msg := d
		if rest, ok := strings.CutPrefix(d, "invalid reference to a "); ok {
			if got, want, ok := strings.Cut(rest, " resource, want "); ok {
				msg = "a reference to " + article(got) + " is not allowed here (allowed: " + want + ")"
				if raw := lookupRaw(c.body, expr+".reference"); raw != nil {
					msg = "reference " + clip(raw) + " points to " + article(got) + ", which is not allowed here (allowed: " + want + ")"
				}
			}
		}
		return c.issue(codeValue, expr, msg)
	}
	// Primitive checks: a regex or range failed. Show the value.
	msg := d
	if t, ok := strings.CutPrefix(d, "invalid "); ok {
		t = strings.TrimSuffix(t, " format")
		msg = "invalid " + typeName(t)
		if raw := lookupRaw(c.body, expr); raw != nil {
			msg += " " + clip(raw)
		}
	}
	return c.issue(codeValue, expr, msg)
}

// article prefixes a resource type with "a" or "an".
func article(t string) string {
	if t != "" && strings.ContainsRune("AEIOU", rune(t[0])) {
		return "an " + t
	}
	return "a " + t
}

// typeName turns google/fhir's wording of a type into the FHIR type name.
func typeName(t string) string {
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

// codeMismatch rewords `"mal" is not a AdministrativeGenderCode`.
func codeMismatch(diag string) string {
	val, typ, ok := strings.Cut(diag, " is not a ")
	if !ok {
		return "invalid code: " + clipString(diag)
	}
	return "invalid code " + clipString(val) + ": not in the required value set " + strings.TrimSuffix(typ, "Code")
}

// unquoteDiag reads a Go-quoted name from a diagnostic.
func unquoteDiag(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func clipString(s string) string { return clip([]byte(s)) }

// appendName adds a member name to a FHIRPath expression.
func appendName(expr, name string) string {
	var b strings.Builder
	b.WriteString(expr)
	if expr != "" {
		b.WriteByte('.')
	}
	writeName(&b, []byte(name))
	return b.String()
}

// jsonPathExpr converts a google/fhir parse path, built from the client's
// JSON member names, to an expression. google/fhir inserts the resource type
// as a segment wherever a resource starts ("Bundle.entry[0].resource.Patient",
// "Patient.contained[0].Organization"); FHIRPath does not, so those
// segments are dropped. Element names never start with an upper-case letter
// (the guard rejects such names), so any such segment after the first is a
// resource type.
func jsonPathExpr(p string) string {
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

func parentPath(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// sortIssues orders issues by expression (numbers in index order), drops
// exact duplicates (a contained resource's parse errors are found both in
// the container and on its own) and caps the count.
func sortIssues(issues []outcome.Issue) []outcome.Issue {
	// A total order, so an unstable (faster) sort is still deterministic.
	slices.SortFunc(issues, func(a, b outcome.Issue) int {
		if c := naturalCompare(firstExpr(a), firstExpr(b)); c != 0 {
			return c
		}
		if c := strings.Compare(firstExpr(a), firstExpr(b)); c != 0 {
			return c // e.g. "[01]" and "[1]"
		}
		if c := strings.Compare(a.Diagnostics, b.Diagnostics); c != 0 {
			return c
		}
		return strings.Compare(a.Code, b.Code)
	})
	issues = slices.CompactFunc(issues, func(a, b outcome.Issue) bool {
		return firstExpr(a) == firstExpr(b) && a.Diagnostics == b.Diagnostics && a.Code == b.Code
	})
	if len(issues) > maxIssues {
		issues = issues[:maxIssues]
	}
	return issues
}

func firstExpr(i outcome.Issue) string {
	if len(i.Expression) == 0 {
		return ""
	}
	return i.Expression[0]
}

// naturalCompare compares strings treating digit runs as numbers, so that
// "entry[2]" sorts before "entry[10]".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, nb := digitRun(a), digitRun(b)
			ta, tb := strings.TrimLeft(a[:na], "0"), strings.TrimLeft(b[:nb], "0")
			if len(ta) != len(tb) {
				return len(ta) - len(tb)
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			a, b = a[na:], b[nb:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
