package fhirserver

import (
	"net/http"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// preconditions are a write's If-Match and If-None-Match headers.
type preconditions struct {
	ifMatch, ifNoneMatch negotiate.ETagSet
}

// parsePreconditions reads the lines of a write's If-Match and
// If-None-Match headers.
func parsePreconditions(ifMatch, ifNoneMatch []string) (preconditions, error) {
	var p preconditions
	var ok bool
	if p.ifMatch, ok = negotiate.ParseETagSet(ifMatch); !ok {
		return p, outcome.New(http.StatusBadRequest, "invalid", `If-Match must be "*" or version ETags such as W/"3"; got `+strconv.Quote(firstLine(ifMatch)))
	}
	if p.ifNoneMatch, ok = negotiate.ParseETagSet(ifNoneMatch); !ok {
		return p, outcome.New(http.StatusBadRequest, "invalid", `If-None-Match must be "*" or version ETags such as W/"3"; got `+strconv.Quote(firstLine(ifNoneMatch)))
	}
	return p, nil
}

// firstLine is a header's first line, as http.Header.Get returns it.
func firstLine(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// strict reports whether the client made the write conditional on the
// version it saw; a lost race then fails with 412 instead of retrying.
func (p preconditions) strict() bool { return p.ifMatch.Present || p.ifNoneMatch.Present }

// check returns a 412 OperationOutcome when the current version cur (nil:
// none) of typ/id fails the preconditions.
func (p preconditions) check(typ, id string, cur *store.Version) error {
	current := "the resource does not exist"
	if cur != nil {
		current = "the current version is " + strconv.FormatInt(cur.Version, 10)
		if cur.Deleted {
			current += " (deleted)"
		}
	}
	if p.ifMatch.Present && !p.ifMatch.Matches(cur) {
		return outcome.New(http.StatusPreconditionFailed, "conflict", "If-Match does not hold for "+typ+"/"+id+": "+current)
	}
	if p.ifNoneMatch.Present && p.ifNoneMatch.Matches(cur) {
		return outcome.New(http.StatusPreconditionFailed, "conflict", "If-None-Match does not hold for "+typ+"/"+id+": "+current)
	}
	return nil
}
