package fhirjson

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Validator checks FHIR R4 JSON. Safe for concurrent use: the model is
// read-only and each check has its own state (TestCheckConcurrent runs
// this under -race).
type Validator struct {
	lim   Limits
	model *model.Model
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
	m, err := model.Get()
	if err != nil {
		return nil, fmt.Errorf("fhirjson: %w", err)
	}
	return &Validator{lim: l, model: m}, nil
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
// or arrays, a string resourceType), then the structural R4 check
// (structure.go), contained resources and the resources of a Bundle
// included, then the XHTML of every narrative (narrative.go). Failures are
// *outcome.Error with status 400 (413 for a body over the size limits).
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

	slices.SortFunc(s.late, func(a, b lateType) int { return a.obj - b.obj })
	if batchShell && info.ResourceType == "Bundle" && info.BundleType == "batch" {
		return info, issuesErr(v.structure(body, s.late, true))
	}
	issues := v.structure(body, s.late, false)
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
			if m.kind == kString { // other kinds are the structural check's to report
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
