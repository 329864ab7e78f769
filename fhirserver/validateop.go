package fhirserver

import (
	"cmp"
	"encoding/json"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/internal/parameters"
	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Validate is $validate: POST [base]/[type]/$validate and
// POST|GET [base]/[type]/[id]/$validate. The body is the resource, or a
// Parameters resource with "resource", "mode" and "profile" (which may also
// be query parameters). It always validates fully (structure, base
// definition, meta.profile, the type's profiles and the nominated
// profile), whatever the validation mode of writes, and answers 200 with
// an OperationOutcome whether or not the resource is valid. Nothing is
// stored.
func (c *Call) Validate(in OperationIn) (Response, error) {
	s, ctx := c.s, c.ctx
	if err := c.Authorize(Access{Interaction: Operation, Operation: "$validate", Type: c.typ, ID: c.id}); err != nil {
		return Response{}, err
	}
	if s.cfg.Validation.Validator == nil {
		return Response{}, outcome.New(http.StatusNotImplemented, "not-supported", "this server validates structure only: no profile validator is configured")
	}
	q := in.Params
	mode, profile := q.Get("mode"), q.Get("profile")
	var body []byte
	if in.Body != nil {
		raw, err := in.Body()
		if err != nil {
			return Response{}, err
		}
		p, err := parameters.OfValidate(raw, c.typ)
		if err != nil {
			return Response{}, err
		}
		body = p.Resource
		mode, profile = cmp.Or(p.Mode, mode), cmp.Or(p.Profile, profile)
	}
	switch mode {
	case "", "create", "update", "profile":
	case "delete":
		if c.id == "" {
			return Response{}, outcome.New(http.StatusBadRequest, "invalid", "mode=delete needs a resource id: POST [type]/[id]/$validate")
		}
		return Response{Status: http.StatusOK, Body: outcome.Render(outcome.Information("no rule of this server prevents deleting " + c.typ + "/" + c.id))}, nil
	default:
		return Response{}, outcome.New(http.StatusBadRequest, "invalid", "unknown $validate mode "+quote(mode)+"; want create, update, delete or profile")
	}
	if body == nil {
		if c.id == "" {
			return Response{}, outcome.New(http.StatusBadRequest, "required", "$validate needs a resource: POST it, or name a stored one with [type]/[id]/$validate")
		}
		v, err := s.db(ctx).Read(ctx, c.typ, c.id)
		if err != nil {
			return Response{}, s.notFound(err, c.typ, c.id)
		}
		if v.Deleted {
			return Response{}, gone(v)
		}
		body = v.Body
	}
	issues, err := c.validateAll(body, profile)
	if err != nil {
		return Response{}, err
	}
	if len(issues) == 0 {
		issues = outcome.Information("the resource is valid")
	}
	return Response{Status: http.StatusOK, Body: outcome.Render(issues)}, nil
}

// validateAll runs both layers on body, with the nominated profile (which
// must be known) on top, and returns their issues.
func (c *Call) validateAll(body []byte, profile string) ([]outcome.Issue, error) {
	s := c.s
	var extra []string
	if profile != "" {
		if k := s.cfg.Validation.Known; k == nil || !k(profile) {
			return []outcome.Issue{{Severity: "error", Code: "not-supported", Details: &outcome.Details{Text: "profile " + profile},
				Diagnostics: "the profile " + profile + " is not known to this server"}}, nil
		}
		extra = append(extra, profile)
	}
	issues, err := validation.Checker{Structural: s.validator, Validation: s.cfg.Validation}.Check(c.ctx, c.typ, body, extra...)
	if err != nil {
		return nil, err
	}
	if len(issues) == 0 && c.id != "" {
		if id, _ := idOf(body); id != "" && id != c.id {
			issues = append(issues, outcome.Issue{Severity: "error", Code: "invalid", Expression: []string{c.typ + ".id"},
				Diagnostics: "the resource's id " + quote(id) + " is not the id of the URL, " + quote(c.id)})
		}
	}
	return issues, nil
}

func idOf(body []byte) (string, error) {
	var x struct {
		ID string `json:"id"`
	}
	err := json.Unmarshal(body, &x)
	return x.ID, err
}
