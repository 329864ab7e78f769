// Package validate checks FHIR R4 resources (decoded JSON) against
// StructureDefinition snapshots: cardinality, types (choice, profiled,
// reference targets), fixed and pattern values, slicing, bindings,
// extensions and invariants (through package fhirpath). It is layer 2 of
// Kiln's validation (DESIGN.md "Validation"); layer 1, the structural
// parse, is fhirserver/fhirjson.
//
// Every resource is checked against the base definition of its type (the
// whole structure, recursively through the definitions of its data types)
// and then against each requested profile, whose snapshot may list only
// some elements: a profile adds its own rules on the elements it lists.
// Profiles are compiled once into plans, cached per URL; a Validator is
// safe for concurrent use.
//
// Not checked: discriminators whose path needs resolve() or functions
// other than extension('url') and ofType(T) (an information issue says
// the slices were not checked), re-slices, value discriminators taken
// from a binding, codes of code systems not held locally (SNOMED CT,
// LOINC, UCUM, BCP-47, MIME types…: an information issue), extensible
// bindings to ValueSets not held locally, FHIRPath extension contexts
// (only element and extension contexts are checked), minValue/maxValue
// other than numbers, and a Reference target's conformance to a non-core target
// profile (only its resource type is checked). The root resource's
// meta.profile is not applied: callers pass the profiles they want;
// contained resources and Bundle entries are checked against the known
// profiles in their meta.profile.
package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/profiles"
)

// Issue is one finding.
type Issue struct {
	Severity   string // error | warning | information
	Code       string // OperationOutcome issue-type code
	Expression string // FHIRPath location, e.g. "Patient.identifier[0].system"
	Message    string // human text
	Rule       string // the invariant key, or cardinality, type, fixed, pattern, slicing, binding, extension, reference, profile, structure
	Profile    string // canonical URL of the profile whose rule failed
}

// Result holds the issues of one validation.
type Result struct {
	Issues []Issue
	// Omitted counts the issues found past MaxIssues, which are counted
	// but not kept (a resource with 200,000 bad identifiers must not cost
	// 200,000 issues); OmittedSeverity is the worst of them.
	Omitted         int
	OmittedSeverity string
}

// MaxIssues is how many issues a validation keeps; an OperationOutcome
// lists no more (outcome.MaxIssues).
const MaxIssues = outcome.MaxIssues

// HasErrors reports whether any issue has severity error (or fatal).
func (r Result) HasErrors() bool {
	if r.OmittedSeverity == "error" || r.OmittedSeverity == "fatal" {
		return true
	}
	for _, is := range r.Issues {
		if is.Severity == "error" || is.Severity == "fatal" {
			return true
		}
	}
	return false
}

// Definitions is where the validator finds profiles, type definitions and
// terminology (a *profiles.Set, or CoreDefinitions).
type Definitions interface {
	StructureDefinition(url string) (*profiles.StructureDefinition, bool)
	TypeDefinition(name string) (*profiles.StructureDefinition, bool)
	ValueSet(url string) (*profiles.ValueSet, bool)
	CodeSystem(url string) (*profiles.CodeSystem, bool)
}

// CoreDefinitions are the embedded R4 core definitions of package profiles.
type CoreDefinitions struct{}

func (CoreDefinitions) StructureDefinition(url string) (*profiles.StructureDefinition, bool) {
	return profiles.StructureDefinitionByURL(url)
}
func (CoreDefinitions) TypeDefinition(name string) (*profiles.StructureDefinition, bool) {
	return profiles.TypeDefinition(name)
}
func (CoreDefinitions) ValueSet(url string) (*profiles.ValueSet, bool) {
	return profiles.ValueSetByURL(url)
}
func (CoreDefinitions) CodeSystem(url string) (*profiles.CodeSystem, bool) {
	return profiles.CodeSystemByURL(url)
}

// Options configure a Validator.
type Options struct {
	// UnknownExtensions is the policy for an extension whose url has no
	// definition: "ignore", "warning" (default) or "error". An unknown
	// modifierExtension is always an error.
	UnknownExtensions string
	// Now is the clock of FHIRPath today() and now(); time.Now if nil.
	Now func() time.Time
}

// Validator validates resources. It is safe for concurrent use.
type Validator struct {
	defs Definitions
	opts Options

	mu       sync.Mutex // serialises plan building
	types    sync.Map   // type name -> *typePlan (nil entries: unknown)
	profiles sync.Map   // canonical URL -> *profilePlan (nil: unknown)
	vsets    sync.Map   // ValueSet URL -> *expansion

	negatives atomic.Int64 // cached misses
}

// New returns a Validator over defs.
func New(defs Definitions, opts Options) *Validator {
	if defs == nil {
		defs = CoreDefinitions{}
	}
	switch opts.UnknownExtensions {
	case "ignore", "warning", "error":
	default:
		opts.UnknownExtensions = "warning"
	}
	return &Validator{defs: defs, opts: opts}
}

// Prepare compiles the plans of the given profiles (and of the base
// definitions of their types) ahead of use. Unknown URLs are reported.
func (v *Validator) Prepare(profileURLs ...string) error {
	var missing []string
	for _, u := range profileURLs {
		p := v.profile(u)
		if p == nil {
			missing = append(missing, u)
			continue
		}
		v.typePlan(p.sd.Type)
	}
	if len(missing) > 0 {
		return &UnknownProfileError{URLs: missing}
	}
	return nil
}

// UnknownProfileError is returned by Prepare for URLs with no definition.
type UnknownProfileError struct{ URLs []string }

func (e *UnknownProfileError) Error() string {
	return "validate: unknown profile(s): " + strings.Join(e.URLs, ", ")
}

// ValidateJSON decodes body (numbers kept exact) and validates it.
// Malformed JSON is an error issue, not a Go error.
func (v *Validator) ValidateJSON(ctx context.Context, body []byte, profileURLs ...string) (Result, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var res any
	err := d.Decode(&res)
	if err == nil {
		if _, err2 := d.Token(); err2 != io.EOF {
			err = errTrailing
		}
	}
	if err != nil {
		return Result{Issues: []Issue{{Severity: "error", Code: "structure", Rule: "structure", Message: "malformed JSON: " + err.Error()}}}, ctx.Err()
	}
	m, ok := res.(map[string]any)
	if !ok {
		return Result{Issues: []Issue{{Severity: "error", Code: "structure", Rule: "structure", Message: "a resource must be a JSON object"}}}, ctx.Err()
	}
	return v.Validate(ctx, m, profileURLs...)
}

type constError string

func (e constError) Error() string { return string(e) }

const errTrailing = constError("data after the top-level value")

// Validate checks a decoded resource against its base definition and the
// given profiles (canonical URLs, optionally with |version). An unknown
// profile is a warning issue; the error is only ctx's.
func (v *Validator) Validate(ctx context.Context, resource map[string]any, profileURLs ...string) (Result, error) {
	w := newWalker(ctx, v)
	defer w.release()
	rt, _ := resource["resourceType"].(string)
	root := &loc{name: rt, index: -1}
	if rt == "" {
		w.issue("error", "structure", root, "structure", "", "resource has no resourceType")
		root.name = "Resource"
	}
	tp := v.typePlan(rt)
	if rt != "" && (tp == nil || tp.kind != "resource" || tp.abstract) {
		w.issue("error", "structure", root, "structure", "", "unknown resource type '"+rt+"'")
		tp = nil
	}
	rc := w.resourceCtx(resource, rt)
	if tp != nil {
		w.item(rc, tp.root, nil, resource, nil, root)
	}
	for _, u := range profileURLs {
		p := v.profile(u)
		if p == nil {
			w.issue("warning", "not-supported", root, "profile", u, "profile '"+u+"' is not known; not checked")
			continue
		}
		if p.sd.Type != rt {
			w.issue("error", "structure", root, "profile", p.sd.URL, "resource type '"+rt+"' does not match the profile's type '"+p.sd.Type+"'")
			continue
		}
		w.item(rc, p.root, nil, resource, nil, root)
	}
	if err := w.err(); err != nil {
		return Result{}, err
	}
	return Result{Issues: w.result(), Omitted: w.omitted, OmittedSeverity: w.omittedWorst}, nil
}
