// Package extract evaluates the search parameters of a resource type on a
// resource and turns each result item, by the parameter's kind and the
// item's FHIR type, into index entries: normalized strings, tokens, date
// ranges, numbers and quantities with their implicit precision ranges
// (quantities also in canonical UCUM units), references and URIs, and the
// item-by-item combinations of composites. Package search compiles the
// parameters (Param) and decides which to evaluate; this package does the
// evaluation, with a memo of converted elements and pooled scratch.
package extract

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/profiles"
)

// Param is a search parameter compiled for one resource type, as the
// extractor evaluates it.
type Param struct {
	Code string
	Expr *fhirpath.Expression
	// Need lists the top-level elements (base names of choices) one of
	// which the resource must have for Expr to yield anything; nil when
	// the expression is not a plain path and must always be evaluated.
	// Most parameters of a resource type are absent from any one
	// resource, and skipping them is the main saving of extraction.
	Need []string
	// Components are those of a composite, in order.
	Components []Component
	Kind       index.Kind
	// Skip are the parts of HumanName and Address values whose entries
	// are marked Covered: other parameters index them (search.Param.Covered).
	Skip Parts
}

// Component is one part of a composite parameter.
type Component struct {
	Code string
	// Expr evaluates the component's expression on the item bound to
	// %item (the item keeps its FHIR type, which a raw JSON node would
	// lose).
	Expr *fhirpath.Expression
	// Plain is the expression compiled as is, evaluated directly on the
	// resource when the composite's item is the resource itself
	// (Observation code-value-*), which saves binding %item.
	Plain *fhirpath.Expression
	// Need is the element of the item the component starts from ("" when
	// not a plain path): an item without it cannot match, and composites
	// are skipped before any evaluation (an Observation with a Quantity
	// value has no code-value-concept entry).
	Need string
	Kind index.Kind
}

// MayApply reports whether the resource has an element the parameter's
// expression starts from (present is ElementNames of the resource); false
// means the expression would yield nothing.
func (p *Param) MayApply(present map[string]struct{}) bool {
	if p.Need == nil {
		return true
	}
	for _, n := range p.Need {
		if _, ok := present[n]; ok {
			return true
		}
	}
	return false
}

// ElementNames returns the top-level element names of a resource, with
// choice elements also under their base name (valueQuantity → value) and
// primitive extensions (_birthDate) under the element's name.
func ElementNames(resource map[string]any) map[string]struct{} {
	m := make(map[string]struct{}, 2*len(resource))
	for k := range resource {
		k = strings.TrimPrefix(k, "_")
		m[k] = struct{}{}
		for i := 1; i < len(k); i++ {
			if c := k[i]; 'A' <= c && c <= 'Z' {
				m[k[:i]] = struct{}{}
			}
		}
	}
	return m
}

// hasAllNeeds reports whether item has the starting element of every
// component that has one.
func hasAllNeeds(item map[string]any, comps []Component) bool {
	for i := range comps {
		if n := comps[i].Need; n != "" && !hasElement(item, n) {
			return false
		}
	}
	return true
}

// hasElement reports whether m has element name, directly, as a
// primitive extension, or as a choice (valueQuantity for value).
func hasElement(m map[string]any, name string) bool {
	if _, ok := m[name]; ok {
		return true
	}
	if _, ok := m["_"+name]; ok {
		return true
	}
	for k := range m {
		if len(k) > len(name) && strings.HasPrefix(k, name) && 'A' <= k[len(name)] && k[len(name)] <= 'Z' {
			return true
		}
	}
	return false
}

// Config is what an extraction needs of the registry it serves.
type Config struct {
	// Naive disables the shortcuts (element filters, root composites) for
	// the reference configuration the tests compare against.
	Naive bool
	// Base is the server's FHIR base with a trailing slash (nil: every
	// absolute reference is local); see UnlinkForeign.
	Base *atomic.Pointer[string]
	// Skipped counts result items whose FHIR type has no index form for
	// the parameter's kind (search.Skipped).
	Skipped *atomic.Int64
}

// unlinkForeign drops the Type/id of absolute references to other servers
// than base; their URL stays searchable.
func (c *Config) unlinkForeign(es []index.Entry) {
	if c.Base == nil {
		return
	}
	base := c.Base.Load()
	if base == nil {
		return
	}
	unlinkForeign(*base, es)
}

func unlinkForeign(base string, es []index.Entry) {
	for i := range es {
		e := &es[i]
		if e.Kind == index.KindComposite {
			unlinkForeign(base, e.Components)
			continue
		}
		if e.Kind == index.KindReference && e.URL != "" && e.RefID != "" && !strings.HasPrefix(e.URL, base) {
			e.RefType, e.RefID, e.RefVersion = "", "", ""
		}
	}
}

// resolveOpt lets "where(resolve() is Patient)" work at write time without
// loading the target: resolve() only needs the type, which a literal
// reference states, so the stub resource carries just resourceType.
var resolveOpt = fhirpath.WithResolver(resolveStub)

// stubs holds one read-only {"resourceType": T} per resource type, so
// resolve() allocates nothing.
var stubs = func() map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, t := range profiles.ResourceTypes() {
		m[t] = map[string]any{"resourceType": t}
	}
	return m
}()

func resolveStub(_ context.Context, ref string) (any, error) {
	typ, _, _, _ := parseReference(ref)
	if s, ok := stubs[typ]; ok {
		return s, nil
	}
	return nil, nil
}
