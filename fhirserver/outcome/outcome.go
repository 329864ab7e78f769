// Package outcome carries FHIR OperationOutcome errors: an HTTP status plus
// issues. Every layer that rejects a request returns an *Error; the HTTP layer
// writes it as an OperationOutcome resource in one place.
package outcome

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// Issue is one OperationOutcome.issue.
type Issue struct {
	Severity    string   `json:"severity"` // fatal | error | warning | information
	Code        string   `json:"code"`     // http://hl7.org/fhir/issue-type
	Details     *Details `json:"details,omitempty"`
	Diagnostics string   `json:"diagnostics,omitempty"`
	Expression  []string `json:"expression,omitempty"` // FHIRPath locations
}

// Details is OperationOutcome.issue.details, reduced to its text: which
// rule failed (e.g. a profile's invariant key and the profile).
type Details struct {
	Text string `json:"text"`
}

// Error is a failure the client should see as an OperationOutcome.
type Error struct {
	Status int
	Issues []Issue
}

// New builds an error with a single issue of severity "error".
func New(status int, code, diagnostics string, expression ...string) *Error {
	return &Error{Status: status, Issues: []Issue{{Severity: "error", Code: code, Diagnostics: diagnostics, Expression: expression}}}
}

func (e *Error) Error() string {
	msgs := make([]string, 0, len(e.Issues))
	for _, is := range e.Issues {
		m := is.Diagnostics
		if len(is.Expression) > 0 {
			m = strings.Join(is.Expression, ",") + ": " + m
		}
		msgs = append(msgs, m)
	}
	return http.StatusText(e.Status) + ": " + strings.Join(msgs, "; ")
}

// As returns err as an *Error when it is one (or wraps one).
func As(err error) (*Error, bool) {
	var oe *Error
	ok := errors.As(err, &oe)
	return oe, ok
}

// Resource renders the OperationOutcome resource as JSON.
func (e *Error) Resource() []byte {
	return Render(e.Issues)
}

// Render renders an OperationOutcome with the given issues.
func Render(issues []Issue) []byte {
	b, err := json.Marshal(struct {
		ResourceType string  `json:"resourceType"`
		Issue        []Issue `json:"issue"`
	}{"OperationOutcome", issues})
	if err != nil { // cannot happen: plain strings only
		panic(err)
	}
	return b
}

// Information builds a single informational issue, used for success outcomes
// (Prefer: return=OperationOutcome).
func Information(diagnostics string) []Issue {
	return []Issue{{Severity: "information", Code: "informational", Diagnostics: diagnostics}}
}
