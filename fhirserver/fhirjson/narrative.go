package fhirjson

import (
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson/internal/xhtml"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Narratives: every "div" string inside a "text" object is checked as
// XHTML (internal/xhtml): DomainResource.text at the root, in contained
// resources and in resources inside Bundles and Parameters, and
// Composition.section.text.

// narrativeRef locates one Narrative.div string found by the guard.
type narrativeRef struct {
	path       string // relative to the root, e.g. ".contained[0].text.div"
	start, end int    // the raw JSON string, quotes included
}

// noteNarrative records the "div" string member just scanned when its
// object is the value of a "text" member.
func (s *scanner) noteNarrative(start int) {
	if n := len(s.path); n >= 2 && string(s.path[n-2].key) == "text" {
		s.narratives = append(s.narratives, narrativeRef{path: s.relPath(), start: start, end: s.pos})
	}
}

// checkNarratives checks each narrative found by the guard; at most one
// issue is reported per narrative.
func checkNarratives(body []byte, rootType string, refs []narrativeRef) []outcome.Issue {
	var gs []guardIssue
	for _, r := range refs {
		if len(gs) >= maxIssues {
			break
		}
		div, ok := unquote(body[r.start:r.end])
		if !ok {
			continue // cannot happen: the guard validated the string
		}
		if code, msg := xhtml.Check(div); msg != "" {
			gs = append(gs, guardIssue{code: code, path: r.path, msg: msg})
		}
	}
	if len(gs) == 0 {
		return nil
	}
	return guardIssues(gs, rootType)
}
