package search

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/extract"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
)

// Skipped counts result items whose FHIR type has no index form for the
// parameter's type (a string parameter meeting a CodeableConcept, say).
// They are skipped silently, as the specification leaves such
// combinations undefined; the counter is for debugging expressions.
var Skipped atomic.Int64

// Extract evaluates every indexable parameter of resourceType on resource
// (decoded with encoding/json UseNumber) and returns its index entries,
// grouped by parameter in code order. An error names the parameter whose
// expression failed; it indicates malformed data, not an unsupported type.
// The *big.Rat values of the entries may be shared between entries and
// must not be modified.
func (r *Registry) Extract(ctx context.Context, resourceType string, resource map[string]any) ([]Entry, error) {
	return r.AppendExtract(ctx, nil, resourceType, resource)
}

// AppendExtract is Extract appending to dst: a writer indexing many
// resources (a transaction Bundle, a reindex) reuses one buffer, since an
// Entry is a few hundred bytes and the result of a resource tens of
// entries. On error dst is returned unchanged with the error.
func (r *Registry) AppendExtract(ctx context.Context, dst []Entry, resourceType string, resource map[string]any) ([]Entry, error) {
	tp := r.typeParams(resourceType)
	if tp == nil {
		return dst, fmt.Errorf("search: unknown resource type %q", resourceType)
	}
	x := extract.Get(ctx, resource, r.extractConfig(), nil)
	defer x.Release()
	if err := r.extractInto(ctx, x, tp, resource); err != nil {
		return dst, err
	}
	// One copy out of the pooled scratch: Entry is large, and growing the
	// result slice entry by entry cost more than the copy (measured).
	if dst == nil {
		return slices.Clone(x.Entries()), nil
	}
	return append(dst, x.Entries()...), nil
}

// ExtractRows is MakeRows of Extract, without copying the entries out of
// the extractor's scratch: the rows are all a writer keeps.
func (r *Registry) ExtractRows(ctx context.Context, resourceType string, resource map[string]any) (Rows, error) {
	tp := r.typeParams(resourceType)
	if tp == nil {
		return Rows{}, fmt.Errorf("search: unknown resource type %q", resourceType)
	}
	var b index.RowBuilder
	x := extract.Get(ctx, resource, r.extractConfig(), &b)
	defer x.Release()
	if err := r.extractInto(ctx, x, tp, resource); err != nil {
		return Rows{}, err
	}
	b.Add(x.Entries())
	return b.Finish(), nil
}

// extractConfig is what an extraction needs of the registry.
func (r *Registry) extractConfig() extract.Config {
	return extract.Config{Naive: r.whole, Base: &r.base, Skipped: &Skipped}
}

// extractInto evaluates the parameters of tp on resource into x.
func (r *Registry) extractInto(ctx context.Context, x *extract.Extractor, tp *typeParams, resource map[string]any) error {
	present := extract.ElementNames(resource)
	for _, p := range tp.list {
		if !p.Indexable() || len(p.Parts) > 0 || p.Conjoined != nil || !r.whole && !p.x.MayApply(present) {
			continue
		}
		// Between parameters: a composite's entries are complete here.
		x.MaybeFlush()
		n := x.Len()
		if err := x.Extract(&p.x); err != nil {
			if !p.Custom || ctx.Err() != nil {
				return err
			}
			// A custom parameter whose expression fails on this resource
			// (a type error FHIRPath finds only at run time) leaves the
			// resource out of its index: one bad SearchParameter must
			// not refuse every write of the type.
			x.Truncate(n)
			if _, told := r.failed.LoadOrStore(p, true); !told {
				if l := r.log.Load(); l != nil {
					l.WarnContext(ctx, "a custom search parameter fails on resources, which it then does not index (told once per version of the parameter)",
						"parameter", p.Code, "url", p.URL, "resourceType", resource["resourceType"])
				}
			}
		}
	}
	x.UnlinkForeign()
	return nil
}

// ExtractParam returns the entries of one parameter, for reindexing a
// newly added custom parameter.
func (r *Registry) ExtractParam(ctx context.Context, p *Param, resource map[string]any) ([]Entry, error) {
	if !p.Indexable() {
		return nil, nil
	}
	return extract.Entries(ctx, &p.x, resource, r.extractConfig())
}
