// Package outcome carries FHIR OperationOutcome errors: an HTTP status plus
// issues. Every layer that rejects a request returns an *Error; the HTTP layer
// writes it as an OperationOutcome resource in one place.
package outcome

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Issue is one OperationOutcome.issue.
type Issue struct {
	Severity    string   `json:"severity"` // fatal | error | warning | information
	Code        string   `json:"code"`     // http://hl7.org/fhir/issue-type
	Details     *Details `json:"details,omitempty"`
	Diagnostics string   `json:"diagnostics,omitempty"`
	Expression  []string `json:"expression,omitempty"` // FHIRPath locations
	// More, when > 0, makes this issue a summary of More issues that were
	// found but not kept (see Omitted); Render folds it into its own
	// summary instead of listing it.
	More int `json:"-"`
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
	const most = 10 // an error string is for logs and tests, not a report
	msgs := make([]string, 0, min(len(e.Issues), most+1))
	for i, is := range e.Issues {
		if i == most {
			msgs = append(msgs, "and "+strconv.Itoa(len(e.Issues)-most)+" more")
			break
		}
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

// Limits of an OperationOutcome. A write of 200,000 bad identifiers used
// to answer with 48.7 MB of issues; now every OperationOutcome lists at
// most MaxIssues issues in at most MaxBytes (about: the summary issue
// comes on top), then one summary issue saying how many more there were.
const (
	MaxIssues = 1000
	MaxBytes  = 64 << 10
)

// Render renders an OperationOutcome with the given issues, capped at
// MaxIssues and MaxBytes.
func Render(issues []Issue) []byte {
	return RenderWithin(issues, MaxBytes)
}

// ResourceWithin is Resource with at most maxBytes of listed issues.
func (e *Error) ResourceWithin(maxBytes int) []byte {
	return RenderWithin(e.Issues, maxBytes)
}

// RenderWithin is Render with at most maxBytes of listed issues (at least
// one issue is always listed; maxBytes ≤ 0 means MaxBytes). It is the one
// place where issues are capped: past the caps, and for every summary
// issue (More > 0) in the list, one final issue counts what was left out.
// Its severity is the worst of what it stands for, so a refusal never
// reads as a warning; its code is too-costly (the server chose not to
// list them all), never informational.
func RenderWithin(issues []Issue, maxBytes int) []byte {
	if maxBytes <= 0 {
		maxBytes = MaxBytes
	}
	listed := make([]Issue, 0, min(len(issues), MaxIssues)+1)
	size, more, worst, full := 0, 0, "", false
	for _, is := range issues {
		if !full && is.More == 0 && len(listed) < MaxIssues {
			n := len(mustJSON(is)) + 1
			if len(listed) == 0 || size+n <= maxBytes {
				listed = append(listed, is)
				size += n
				continue
			}
			full = true
		}
		more += max(1, is.More)
		worst = worse(worst, is.Severity)
	}
	if more > 0 {
		listed = append(listed, Issue{Severity: worst, Code: "too-costly", Diagnostics: strconv.Itoa(more) +
			" more issues were found and are not listed; this OperationOutcome lists the first " +
			strconv.Itoa(len(listed)) + " (at most " + strconv.Itoa(MaxIssues) + ")"})
	}
	return mustJSON(struct {
		ResourceType string  `json:"resourceType"`
		Issue        []Issue `json:"issue"`
	}{"OperationOutcome", listed})
}

// Omitted is the summary issue of n issues found and not kept (a validator
// that stops collecting details), with the worst severity among them.
func Omitted(n int, severity string) Issue {
	return Issue{Severity: severity, Code: "too-costly", More: n,
		Diagnostics: strconv.Itoa(n) + " more issues were found and are not listed"}
}

// severityRank orders severities, worst last.
var severityRank = map[string]int{"information": 1, "warning": 2, "error": 3, "fatal": 4}

// worse returns the worse of two severities.
func worse(a, b string) string {
	if severityRank[b] > severityRank[a] {
		return b
	}
	return a
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
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

// Quote is a client's value as a diagnostic quotes it: Go-quoted, cut at
// 80 bytes, so that a huge value does not make a huge answer.
func Quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.Quote(s)
}
