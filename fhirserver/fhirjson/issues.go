package fhirjson

import (
	"slices"
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

func exprs(e string) []string {
	if e == "" {
		return nil
	}
	return []string{e}
}

func clipString(s string) string { return clip([]byte(s)) }

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

// sortIssues orders issues by expression (numbers in index order), drops
// exact duplicates and caps the count.
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
