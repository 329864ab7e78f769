package terminology

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// ExpandValueSet returns the codes of the ValueSet url as sorted
// "system|code" forms (see expandValueSet).
func (t Terms) ExpandValueSet(url string) ([]string, error) { return t.expandValueSet(url, 0) }

// maxExpansion bounds the codes of a ValueSet expansion.
const maxExpansion = 10000

type expandError string

func (e expandError) Error() string { return string(e) }

// maxValueSetDepth bounds how deep ValueSets include one another, which
// also ends a cycle.
const maxValueSetDepth = 8

// expandValueSet returns the codes of the ValueSet url as sorted
// "system|code" forms: from its expansion when it has one, else from its
// compose over CodeSystems this server holds. A ValueSet that is unknown,
// or that draws on a CodeSystem or filter this server cannot evaluate, is
// an error: answering with fewer codes would be silently wrong.
func (t Terms) expandValueSet(url string, depth int) ([]string, error) {
	if depth > maxValueSetDepth {
		return nil, expandError("ValueSet " + syntax.Quote(url) + " is included more than " + strconv.Itoa(maxValueSetDepth) +
			" levels deep (or includes itself); this server expands ValueSets up to that depth")
	}
	vs, ok := t.valueSet(url)
	if !ok {
		return nil, expandError("unknown ValueSet " + syntax.Quote(url))
	}
	set := map[string]bool{}
	if vs.Expansion != nil && len(vs.Expansion.Contains) > 0 {
		var walk func([]profiles.ExpansionContains)
		walk = func(list []profiles.ExpansionContains) {
			for _, c := range list {
				if c.Code != "" {
					set[c.System+"|"+c.Code] = true
				}
				walk(c.Contains)
			}
		}
		walk(vs.Expansion.Contains)
	} else if vs.Compose != nil {
		for _, inc := range vs.Compose.Include {
			codes, err := t.conceptSet(url, inc, depth)
			if err != nil {
				return nil, err
			}
			for _, c := range codes {
				set[c] = true
			}
		}
		for _, exc := range vs.Compose.Exclude {
			codes, err := t.conceptSet(url, exc, depth)
			if err != nil {
				return nil, err
			}
			for _, c := range codes {
				delete(set, c)
			}
		}
	}
	if len(set) == 0 {
		return nil, expandError("ValueSet " + syntax.Quote(url) + " cannot be expanded by this server")
	}
	if len(set) > maxExpansion {
		return nil, expandError("ValueSet " + syntax.Quote(url) + " is too large to search with")
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// conceptSet evaluates one compose include or exclude.
func (t Terms) conceptSet(url string, cs profiles.ConceptSet, depth int) ([]string, error) {
	var codes []string
	have := false
	if cs.System != "" {
		have = true
		if len(cs.Concept) > 0 && len(cs.Filter) == 0 {
			for _, c := range cs.Concept {
				codes = append(codes, cs.System+"|"+c.Code)
			}
		} else {
			sys, ok := t.codeSystem(cs.System)
			if !ok || sys.Content == "not-present" {
				return nil, expandError("ValueSet " + syntax.Quote(url) + " draws on CodeSystem " + syntax.Quote(cs.System) + ", which this server does not hold")
			}
			var err error
			if codes, err = filterCodes(url, sys, cs); err != nil {
				return nil, err
			}
		}
	}
	for _, ref := range cs.ValueSet {
		sub, err := t.expandValueSet(ref, depth+1)
		if err != nil {
			return nil, err
		}
		if !have {
			codes, have = sub, true
			continue
		}
		codes = slices.DeleteFunc(codes, func(c string) bool {
			_, found := slices.BinarySearch(sub, c)
			return !found
		})
	}
	return codes, nil
}

// filterCodes lists the codes of sys selected by the filters of cs (all
// of them without filters): is-a, descendent-of, is-not-a and in on the
// concept property.
func filterCodes(url string, sys *profiles.CodeSystem, cs profiles.ConceptSet) ([]string, error) {
	var all []string
	for i := range sys.Concept {
		all = descendants(&sys.Concept[i], all)
	}
	keep := all
	for _, f := range cs.Filter {
		if f.Property != "concept" && f.Property != "code" {
			return nil, expandError("ValueSet " + syntax.Quote(url) + " uses a filter on " + syntax.Quote(f.Property) + ", which this server cannot evaluate")
		}
		sel := map[string]bool{}
		switch f.Op {
		case "is-a", "descendent-of", "is-not-a":
			if c, ok := sys.Lookup(f.Value); ok {
				for i, d := range descendants(c, nil) {
					if i > 0 || f.Op != "descendent-of" {
						sel[d] = true
					}
				}
			}
		case "in", "=":
			for _, c := range strings.Split(f.Value, ",") {
				sel[c] = true
			}
		default:
			return nil, expandError("ValueSet " + syntax.Quote(url) + " uses filter op " + syntax.Quote(f.Op) + ", which this server cannot evaluate")
		}
		negate := f.Op == "is-not-a"
		keep = slices.DeleteFunc(slices.Clone(keep), func(c string) bool { return sel[c] == negate })
	}
	if len(cs.Concept) > 0 {
		listed := map[string]bool{}
		for _, r := range cs.Concept {
			listed[r.Code] = true
		}
		keep = slices.DeleteFunc(keep, func(c string) bool { return !listed[c] })
	}
	out := make([]string, len(keep))
	for i, c := range keep {
		out[i] = sys.URL + "|" + c
	}
	return out, nil
}
