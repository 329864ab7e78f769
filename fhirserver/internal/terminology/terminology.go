// Package terminology is the ValueSets and CodeSystems written to a FHIR
// service, as its searches' :in, :not-in, :above and :below see them.
package terminology

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// Held is the ValueSets and CodeSystems held in DB: the current resource
// whose url is the canonical asked for (a |version is ignored, as for the
// built-in ones). Reading them needs no grant: they hold no patient data.
type Held struct {
	Ctx      context.Context
	DB       store.Searcher
	Registry *search.Registry
	// The service's search options.
	DefaultCount, MaxCount int
	BaseURL                string
	Now                    func() time.Time
}

// held reads the current resource of typ whose url is canonical with parse.
func held[T any](h Held, typ, canonical string, parse func([]byte) (*T, error)) (*T, bool) {
	canonical, _, _ = strings.Cut(canonical, "|")
	p, err := h.Registry.Parse([]string{typ}, url.Values{"url": {canonical}},
		search.ParseOptions{DefaultCount: h.DefaultCount, MaxCount: h.MaxCount, BaseURL: h.BaseURL, Now: h.Now()})
	if err != nil {
		return nil, false
	}
	p.Query.Count = 1
	page, err := h.DB.Search(h.Ctx, p.Query)
	if err != nil || len(page.Matches) == 0 {
		return nil, false
	}
	v, err := parse(page.Matches[0].Body)
	return v, err == nil
}

func (h Held) ValueSet(canonical string) (*profiles.ValueSet, bool) {
	return held(h, "ValueSet", canonical, profiles.ParseValueSet)
}

func (h Held) CodeSystem(canonical string) (*profiles.CodeSystem, bool) {
	return held(h, "CodeSystem", canonical, profiles.ParseCodeSystem)
}
