// Package paramexpr reads the FHIRPath expressions of SearchParameters:
// which top-level union branches apply to a resource type, which
// elements a resource must have for an expression to yield anything, and
// where a composite's component starts. Expressions are compiled once,
// in a bounded cache shared by every registry.
package paramexpr

import (
	"slices"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/profiles"
)

// compiled caches compiled expressions by source: the same branch (e.g.
// "Resource.meta.tag") is shared by every resource type. Expressions are
// immutable, so sharing is safe. Custom parameters bring expressions from
// clients, so the cache is bounded, least recently used out first; the R4
// parameters need about 1,700 entries.
var compiled = func() *lru.Cache[string, *fhirpath.Expression] {
	c, err := lru.New[string, *fhirpath.Expression](maxCompiled)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}()

const maxCompiled = 8192

// Compile compiles src, or returns its compiled form from the cache.
func Compile(src string) (*fhirpath.Expression, error) {
	if e, ok := compiled.Get(src); ok {
		return e, nil
	}
	e, err := fhirpath.Compile(src)
	if err != nil {
		return nil, err
	}
	compiled.Add(src, e)
	return e, nil
}

// Branches returns the top-level union branches of expr as the
// FHIRPath parser reads them; nil when expr does not compile.
func Branches(expr string) []fhirpath.Branch {
	e, err := Compile(expr)
	if err != nil {
		return nil
	}
	return e.Branches()
}

// Kept keeps the branches bs of expr that can apply to resource
// type t: those whose first step is t, and those that are type-agnostic
// (Resource.…, or a first step that is not a resource type). R4 writes
// multi-base parameters as "Patient.name | Practitioner.name | …";
// evaluating the branches of other types is wasted work (they yield
// nothing), so they are dropped at build time. A branch holding a union
// is kept whole: it may name several types. src is the kept branches
// joined; with a single branch, or when nothing is kept, it is expr
// unchanged and every branch is returned.
func Kept(expr string, bs []fhirpath.Branch, t string) (src string, kept []fhirpath.Branch) {
	if len(bs) < 2 {
		return expr, bs
	}
	var parts []string
	for _, b := range bs {
		if b.First == t || !profiles.IsResourceType(b.First) || b.Union {
			kept = append(kept, b)
			parts = append(parts, b.Source)
		}
	}
	if len(kept) == 0 {
		return expr, bs
	}
	return strings.Join(parts, " | "), kept
}

// Needs returns the top-level element names the branches start with
// ("Patient.name | Patient.address" → name, address), or nil when a
// branch is not of the form Type.element… made of steps that yield
// nothing when the element is absent (a function at the top, an
// operator, a nested union, a variable).
func Needs(bs []fhirpath.Branch) []string {
	var out []string
	for _, b := range bs {
		if b.Union || !emptyPropagating(b.Path) || len(b.Path) < 2 {
			return nil
		}
		first, elem := b.Path[0], b.Path[1]
		if first.Call || first.Index || first.Operator ||
			first.Name != "Resource" && first.Name != "DomainResource" && !profiles.IsResourceType(first.Name) {
			return nil
		}
		if elem.Call || elem.Index || elem.Operator {
			return nil // a function on the resource, not an element
		}
		if !slices.Contains(out, elem.Name) {
			out = append(out, elem.Name)
		}
	}
	return out
}

// emptyFuncs are the functions that return empty on empty input; a path
// made only of steps, these functions and the infix as/is yields nothing
// when its first element is absent. Others (exists(), empty(), not(),
// count(), and, =, …) make values from nothing: Patient.deceased.exists()
// and … is false, not empty, for a Patient without deceased[x].
var emptyFuncs = map[string]bool{
	"where": true, "as": true, "ofType": true, "resolve": true, "extension": true,
	"first": true, "last": true, "select": true, "is": true, "single": true,
	"tail": true, "distinct": true, "children": true, "descendants": true,
}

// emptyPropagating reports whether path is a navigation path in the
// sense of emptyFuncs (function arguments are not inspected: they are
// only evaluated for items that exist).
func emptyPropagating(path []fhirpath.Step) bool {
	if path == nil {
		return false
	}
	for _, st := range path {
		if st.Call && !emptyFuncs[st.Name] {
			return false
		}
	}
	return true
}

// RelativeNeed returns the element of the item a relative path such as
// "code" or "value.as(Quantity)" starts from, or "" when it starts
// otherwise (a function, a resource type, a literal) or holds a union or
// a variable. A choice narrowed to one type gives the JSON name of that
// choice ("value.as(Quantity)" → "valueQuantity"), so that items with
// another type of value are skipped without evaluation.
func RelativeNeed(e *fhirpath.Expression) string {
	bs := e.Branches()
	if len(bs) != 1 {
		return ""
	}
	b := bs[0]
	if b.Union || b.Variables || b.FirstCall || b.First == "" || profiles.IsResourceType(b.First) {
		return ""
	}
	if len(b.Path) == 2 {
		st := b.Path[1]
		// Quantity has subtypes (Age, Duration…) that as() accepts under
		// other JSON names: not narrowed.
		if st.Call && (st.Name == "as" || st.Name == "ofType") && st.TypeNS == "" && st.Type != "" && st.Type != "Quantity" {
			return b.First + strings.ToUpper(st.Type[:1]) + st.Type[1:]
		}
	}
	return b.First
}
