package fhirjson

import (
	"runtime"
	"strconv"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// structuralBundle is the structural check of a Bundle, split so that it
// uses every CPU: google/fhir checks the Bundle without its entries'
// resources, and each resource on its own, concurrently. google/fhir is the
// bulk of the cost of accepting a transaction, and one large Bundle would
// otherwise keep a single core busy while the others idle. The issues are
// those of one whole check: an entry's expressions are rooted at
// Bundle.entry[i].resource.
func (v *Validator) structuralBundle(body []byte) []outcome.Issue {
	shell, resources, ok := splitBundle(body)
	if !ok || len(resources) < 2 {
		return v.structural(body, "")
	}

	// The shell (every entry's request and fullUrl) costs as much as a few
	// resources: it is one more job, taken first, not a wait at the end.
	perEntry := make([][]outcome.Issue, len(resources))
	var issues []outcome.Issue
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(resources)) {
		wg.Go(func() {
			for i := range next {
				if i < 0 {
					issues = v.structural(shell, "")
					continue
				}
				perEntry[i] = v.structural(resources[i], "Bundle.entry["+strconv.Itoa(i)+"].resource")
			}
		})
	}
	next <- -1
	for i, r := range resources {
		if len(r) > 0 {
			next <- i
		}
	}
	close(next)
	wg.Wait()

	for _, is := range perEntry {
		issues = append(issues, is...)
	}
	return issues
}

// splitBundle returns the Bundle without its entries' resources, and the
// resources by entry index (nil where an entry has none). body has passed
// the guard. The shell is compact; members keep the client's order and
// spelling (escapes in names included), and strings and numbers are copied
// byte for byte. ok is false when entry is not an array of objects.
func splitBundle(body []byte) (shell []byte, resources [][]byte, ok bool) {
	var buf [8]member
	top, ok := rootMembers(body, buf[:0])
	if !ok {
		return nil, nil, false
	}
	entry := -1
	for k := range top {
		if string(top[k].name) == "entry" {
			entry = k
		}
	}
	if entry < 0 {
		return body, nil, true
	}
	var elems []span
	switch top[entry].kind {
	case kNull: // no entries
	case kArray:
		if elems, ok = arrayElements(body, top[entry].start, nil); !ok {
			return nil, nil, false
		}
	default:
		return nil, nil, false
	}
	resources = make([][]byte, len(elems))
	out := make([]byte, 0, len(body)/4+64)
	var ms []member
	sep := byte('{')
	for k, m := range top {
		out = append(out, sep)
		sep = ','
		out = append(out, body[m.keyStart:m.keyEnd]...)
		out = append(out, ':')
		if k != entry || m.kind == kNull {
			out = appendCompact(out, body[m.start:m.end])
			continue
		}
		out = append(out, '[')
		for i, el := range elems {
			if i > 0 {
				out = append(out, ',')
			}
			switch body[el.start] {
			case 'n':
				out = append(out, "null"...)
				continue
			case '{':
			default:
				return nil, nil, false
			}
			var end int
			if ms, end, ok = objectMembers(body, el.start, ms[:0]); !ok || end != el.end {
				return nil, nil, false
			}
			esep := byte('{')
			for _, f := range ms {
				if string(f.name) == "resource" {
					resources[i] = body[f.start:f.end]
					continue
				}
				out = append(out, esep)
				esep = ','
				out = append(out, body[f.keyStart:f.keyEnd]...)
				out = append(out, ':')
				out = appendCompact(out, body[f.start:f.end])
			}
			if esep == '{' {
				out = append(out, '{')
			}
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	if sep == '{' {
		out = append(out, '{')
	}
	out = append(out, '}')
	return out, resources, true
}
