package fhirjson

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/fhir/go/fhirversion"
	"github.com/google/fhir/go/jsonformat"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Validator checks FHIR R4 JSON. Safe for concurrent use.
//
// One google/fhir Unmarshaller is shared: its fields are only read while
// unmarshalling, and its caches (field maps, name maps) are guarded by a
// mutex and a sync.Map, so concurrent calls are safe without a pool
// (TestCheckConcurrent exercises this under -race).
type Validator struct {
	lim Limits
	um  *jsonformat.Unmarshaller
}

// maxSupportedDepth bounds Limits.MaxDepth: the guard and SetMeta recurse
// once per level.
const maxSupportedDepth = 1000

// NewValidator returns a Validator enforcing l. Zero fields take their
// defaults; negative values, or a depth above 1000, are an error.
func NewValidator(l Limits) (*Validator, error) {
	l = l.WithDefaults()
	if l.MaxResourceBytes < 0 || l.MaxBundleBytes < 0 || l.MaxDepth < 0 {
		return nil, errors.New("fhirjson: limits must not be negative")
	}
	if l.MaxDepth > maxSupportedDepth {
		return nil, fmt.Errorf("fhirjson: MaxDepth %d is above the supported %d", l.MaxDepth, maxSupportedDepth)
	}
	um, err := jsonformat.NewUnmarshaller("UTC", fhirversion.R4)
	if err != nil {
		return nil, fmt.Errorf("fhirjson: %w", err)
	}
	// google/fhir counts path segments rather than JSON levels; our guard is
	// the stricter of the two, this is a second line of defence.
	um.MaxNestingDepth = l.MaxDepth
	return &Validator{lim: l, um: um}, nil
}

// Info is what the server needs to know about a checked resource.
type Info struct {
	ResourceType string
	ID           string // "" when absent
	BundleType   string // Bundle.type of a Bundle, when a string
}

// Check validates one resource body (which may be a Bundle): first the
// guard (UTF-8, a JSON object, nesting depth, no duplicate keys, no null
// except as an array placeholder the spec allows, no empty strings, objects
// or arrays, a string resourceType), then google/fhir's structural R4 check,
// then each contained resource on its own, since google/fhir does not
// validate inside contained resources, then the XHTML of every narrative
// (narrative.go). Failures are *outcome.Error with
// status 400 (413 for a body over the size limits).
func (v *Validator) Check(body []byte) (Info, error) {
	return v.check(body, false)
}

// CheckBundle is Check, except that a Bundle of type batch is validated
// as a whole but its entries' resources only by the guard (well-formed
// JSON): each entry of a batch succeeds or fails on its own, so their
// resources are validated as each entry is processed. Info.BundleType
// says which it was.
func (v *Validator) CheckBundle(body []byte) (Info, error) {
	return v.check(body, true)
}

func (v *Validator) check(body []byte, batchShell bool) (Info, error) {
	if int64(len(body)) > v.lim.MaxBundleBytes {
		return Info{}, tooLarge(v.lim.MaxBundleBytes)
	}
	s := scanDoc(body, v.lim.MaxDepth)
	// After a fatal error the root's members are partial, but the resource
	// type, when already seen, still roots the expressions.
	info, rtOK := s.rootInfo(!s.fatal)
	if len(s.issues) > 0 {
		return Info{}, badRequest(guardIssues(s.issues, info.ResourceType))
	}
	if !rtOK { // cannot happen: rootInfo reports why
		return Info{}, outcome.New(http.StatusBadRequest, codeRequired, `missing required element "resourceType"`)
	}
	if info.ResourceType != "Bundle" && int64(len(body)) > v.lim.MaxResourceBytes {
		return Info{}, tooLarge(v.lim.MaxResourceBytes)
	}

	var issues []outcome.Issue
	switch {
	case info.ResourceType != "Bundle":
		issues = v.structural(body, "")
	case batchShell && info.BundleType == "batch":
		if shell, _, ok := splitBundle(body); ok {
			body = shell
		}
		return info, issuesErr(v.structural(body, ""))
	default:
		issues = v.structuralBundle(body)
	}
	issues = append(issues, v.checkContained(body, info.ResourceType, s.contained)...)
	issues = append(issues, checkNarratives(body, info.ResourceType, s.narratives)...)
	if len(issues) > 0 {
		return Info{}, badRequest(issues)
	}
	return info, nil
}

// rootInfo reads resourceType and id from the root members. When report is
// set it adds an issue if resourceType is missing or not a string.
func (s *scanner) rootInfo(report bool) (Info, bool) {
	var info Info
	found := false
	for _, m := range s.top {
		switch string(m.name) {
		case "resourceType":
			found = true
			if m.kind != kString {
				if report {
					s.addIssue(codeStructure, ".resourceType", "resourceType must be a string")
				}
				continue
			}
			rt, _ := unquote(s.data[m.start:m.end])
			info.ResourceType = string(rt)
		case "id":
			if m.kind == kString { // other kinds are google/fhir's to report
				id, _ := unquote(s.data[m.start:m.end])
				info.ID = string(id)
			}
		case "type":
			if m.kind == kString {
				t, _ := unquote(s.data[m.start:m.end])
				info.BundleType = string(t)
			}
		}
	}
	if !found && report {
		s.addIssue(codeRequired, "", `missing required element "resourceType"`)
	}
	if info.ResourceType != "Bundle" {
		info.BundleType = ""
	}
	return info, found && info.ResourceType != ""
}

// checkContained validates every contained resource on its own: google/fhir
// parses contained resources (so unknown elements and bad primitives are
// already caught) but never runs its validation (required elements,
// reference targets, primitive formats) inside them. It also applies the
// DomainResource invariants for contained resources (dom-2, dom-4, dom-5).
func (v *Validator) checkContained(body []byte, rootType string, refs []containedRef) []outcome.Issue {
	var issues []outcome.Issue
	// Elements are recorded as they end, so inner ones come first.
	slices.SortFunc(refs, func(a, b containedRef) int { return a.start - b.start })
	outerEnd := -1
	for _, c := range refs {
		if c.start < outerEnd {
			continue // nested contained: dom-2 is reported on its container
		}
		outerEnd = c.end
		expr := rootType + c.path
		sub := body[c.start:c.end]
		issues = append(issues, containedInvariants(sub, expr)...)
		issues = append(issues, v.structural(sub, expr)...)
	}
	return issues
}

// containedInvariants checks what R4 says of a resource inside contained.
func containedInvariants(sub []byte, expr string) []outcome.Issue {
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
func (v *Validator) structural(body []byte, prefix string) (issues []outcome.Issue) {
	defer func() {
		// google/fhir is not ours; a panic on odd input must not take the
		// request (or the server) down.
		if r := recover(); r != nil {
			issues = []outcome.Issue{{Severity: "error", Code: codeStructure, Diagnostics: "the resource could not be parsed: " + clipString(fmt.Sprint(r)), Expression: exprs(prefix)}}
		}
	}()
	var rep reporter
	_, err := v.um.UnmarshalWithErrorReporter(body, &rep)
	conv := converter{body: body, prefix: prefix}
	if err != nil {
		return conv.parseIssues(err)
	}
	return conv.validationIssues(rep.errs)
}

func exprs(e string) []string {
	if e == "" {
		return nil
	}
	return []string{e}
}

// reporter collects google/fhir's validation errors (required elements,
// reference types, primitive formats) with their element paths.
type reporter struct {
	errs []reported
}

type reported struct {
	path string
	err  error
}

func (r *reporter) ReportValidationError(path string, err error) error {
	if len(r.errs) < maxIssues {
		r.errs = append(r.errs, reported{path, err})
	}
	return nil
}

// ReportValidationWarning ignores warnings: Check only rejects.
func (r *reporter) ReportValidationWarning(string, error) error { return nil }

func issuesErr(issues []outcome.Issue) error {
	if len(issues) == 0 {
		return nil
	}
	return badRequest(issues)
}

func badRequest(issues []outcome.Issue) *outcome.Error {
	issues = sortIssues(issues)
	return &outcome.Error{Status: http.StatusBadRequest, Issues: issues}
}

func tooLarge(limit int64) *outcome.Error {
	return outcome.New(http.StatusRequestEntityTooLarge, codeTooCostly,
		"the request body is larger than the limit of "+formatBytes(limit))
}

func formatBytes(n int64) string {
	const kib, mib = 1 << 10, 1 << 20
	switch {
	case n >= mib && n%mib == 0:
		return strconv.FormatInt(n/mib, 10) + " MiB"
	case n >= kib && n%kib == 0:
		return strconv.FormatInt(n/kib, 10) + " KiB"
	default:
		return strconv.FormatInt(n, 10) + " bytes"
	}
}
