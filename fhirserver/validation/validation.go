// Package validation is the second layer of validation, against
// StructureDefinitions: what writes are checked against (Config, applied
// by the FHIR service), and the full check of $validate and kiln validate
// (Checker). The first layer, structural R4, is fhirjson's.
package validation

import (
	"context"
	"net/http"
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/profiles/validate"
)

// Config configures the second layer of validation, against
// StructureDefinitions, for writes and for $validate. (The first layer,
// structural R4, always runs.)
type Config struct {
	// Mode is what writes are checked against:
	//   - Off: structural R4 only;
	//   - Base: also the base StructureDefinition of the type
	//     (cardinalities, invariants, required bindings);
	//   - Profiles: also every known profile in meta.profile and the
	//     profiles bound to the type (TypeProfiles).
	Mode Mode
	// Validator checks resources against StructureDefinitions; nil
	// turns the second layer (and $validate) off.
	Validator ProfileValidator
	// Known reports whether a profile is loaded; nil: none is.
	Known func(url string) bool
	// TypeProfiles lists the profiles every write of a type must meet,
	// e.g. the national Patient profile for Patient.
	TypeProfiles map[string][]string
	// UnknownProfile is what a meta.profile that is not known does to a
	// write: UnknownIgnore, UnknownWarn (default: accepted; $validate
	// reports a warning) or UnknownError (422).
	UnknownProfile string
}

// Mode selects what writes are validated against.
type Mode string

const (
	Off      Mode = "off"
	Base     Mode = "base"
	Profiles Mode = "profiles"
)

// Policies for a meta.profile the server does not know.
const (
	UnknownIgnore = "ignore"
	UnknownWarn   = "warn"
	UnknownError  = "error"
)

// ProfileValidator is profiles/validate's Validator as the server uses it.
type ProfileValidator interface {
	Validate(ctx context.Context, resource map[string]any, profileURLs ...string) (validate.Result, error)
}

// profilesFor lists the profiles resource res of type typ is checked
// against in mode, and issues for the meta.profile entries that are not
// known. No profile means the base definition of the type.
func (v *Config) profilesFor(typ string, res map[string]any, mode Mode) ([]string, []validate.Issue) {
	if mode != Profiles {
		return nil, nil
	}
	urls := slices.Clone(v.TypeProfiles[typ])
	var issues []validate.Issue
	for _, p := range metaProfiles(res) {
		switch {
		case slices.Contains(urls, p):
		case v.Known != nil && v.Known(p):
			urls = append(urls, p)
		case v.UnknownProfile == UnknownIgnore:
		default:
			sev := "warning"
			if v.UnknownProfile == UnknownError {
				sev = "error"
			}
			issues = append(issues, validate.Issue{Severity: sev, Code: "not-supported", Expression: typ + ".meta.profile",
				Rule: "profile", Profile: p, Message: "the profile " + p + " is not known to this server; the resource was not checked against it"})
		}
	}
	return urls, issues
}

// metaProfiles returns the strings of res.meta.profile.
func metaProfiles(res map[string]any) []string {
	meta, _ := res["meta"].(map[string]any)
	list, _ := meta["profile"].([]any)
	out := make([]string, 0, len(list))
	for _, p := range list {
		if s, ok := p.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Check validates res, a decoded resource of type typ, in mode (with the
// profiles extra too) and returns the issues found (the validator keeps
// validate.MaxIssues of them and counts the rest).
func (v *Config) Check(ctx context.Context, typ string, res map[string]any, mode Mode, extra ...string) (validate.Result, error) {
	if v.Validator == nil || mode == Off {
		return validate.Result{}, nil
	}
	urls, issues := v.profilesFor(typ, res, mode)
	for _, p := range extra {
		if !slices.Contains(urls, p) {
			urls = append(urls, p)
		}
	}
	r, err := v.Validator.Validate(ctx, res, urls...)
	if err != nil {
		return validate.Result{}, err
	}
	r.Issues = append(issues, r.Issues...)
	return r, nil
}

// CheckWrite is the second validation layer of a write of res, a decoded
// resource of type typ: errors refuse it with 422 and every issue found.
func (v *Config) CheckWrite(ctx context.Context, typ string, res map[string]any) error {
	r, err := v.Check(ctx, typ, res, v.Mode)
	if err != nil {
		return err
	}
	if !r.HasErrors() {
		return nil
	}
	return &outcome.Error{Status: http.StatusUnprocessableEntity, Issues: Issues(r)}
}

// Checker runs both validation layers on a resource body, fully (as in
// Profiles mode): the answer of $validate and of kiln validate.
type Checker struct {
	Structural *fhirjson.Validator
	Validation Config
}

// Check returns the issues of body, which must be a typ ("" for any
// type), checked against its base definition, its known meta.profile
// entries, the profiles bound to its type and extra. Structure errors end
// the check: the second layer needs a sound structure. Only cancellation
// and oversize bodies are Go errors.
func (c Checker) Check(ctx context.Context, typ string, body []byte, extra ...string) ([]outcome.Issue, error) {
	info, err := c.Structural.Check(body)
	if err != nil {
		oe, ok := outcome.As(err)
		if !ok || oe.Status == http.StatusRequestEntityTooLarge {
			return nil, err
		}
		return oe.Issues, nil
	}
	if typ != "" && info.ResourceType != typ {
		return []outcome.Issue{{Severity: "error", Code: "invalid", Expression: []string{"resourceType"},
			Diagnostics: "the resource is a " + info.ResourceType + ", not a " + typ}}, nil
	}
	res, err := fhirjson.Decode(body)
	if err != nil {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "the resource is not a JSON object: "+err.Error())
	}
	r, err := c.Validation.Check(ctx, info.ResourceType, res, Profiles, extra...)
	if err != nil {
		return nil, err
	}
	return Issues(r), nil
}

// Issues maps validator issues onto OperationOutcome issues; the failed
// rule and its profile go into details. The issues the validator only
// counted become one summary (outcome.Render caps the rest).
func Issues(r validate.Result) []outcome.Issue {
	out := make([]outcome.Issue, 0, len(r.Issues)+1)
	for _, i := range r.Issues {
		oi := outcome.Issue{Severity: i.Severity, Code: i.Code, Diagnostics: i.Message}
		if i.Expression != "" {
			oi.Expression = []string{i.Expression}
		}
		if d := ruleText(i); d != "" {
			oi.Details = &outcome.Details{Text: d}
		}
		out = append(out, oi)
	}
	if r.Omitted > 0 {
		out = append(out, outcome.Omitted(r.Omitted, r.OmittedSeverity))
	}
	return out
}

func ruleText(i validate.Issue) string {
	switch {
	case i.Rule != "" && i.Profile != "":
		return i.Rule + " (" + i.Profile + ")"
	case i.Rule != "":
		return i.Rule
	}
	return i.Profile
}
