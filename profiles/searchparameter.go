package profiles

import (
	"slices"
	"sync"
)

// SearchParameter is a trimmed FHIR SearchParameter.
type SearchParameter struct {
	ID   string `json:"id"`
	URL  string `json:"url"`
	Name string `json:"name"`
	// Code is the name used in the query string, e.g. "family".
	Code string `json:"code"`
	// Base lists the resource types the parameter applies to; "Resource"
	// and "DomainResource" mean all (domain) resources.
	Base []string `json:"base"`
	// Type is number, date, string, token, reference, composite, quantity,
	// uri or special.
	Type string `json:"type"`
	// Expression is the FHIRPath expression that extracts the values; it is
	// empty for a few parameters the server implements itself (_content,
	// _query, _text).
	Expression  string                     `json:"expression,omitempty"`
	Target      []string                   `json:"target,omitempty"`
	MultipleOr  *bool                      `json:"multipleOr,omitempty"`
	MultipleAnd *bool                      `json:"multipleAnd,omitempty"`
	Comparator  []string                   `json:"comparator,omitempty"`
	Modifier    []string                   `json:"modifier,omitempty"`
	Chain       []string                   `json:"chain,omitempty"`
	Component   []SearchParameterComponent `json:"component,omitempty"`
}

// SearchParameterComponent is one part of a composite search parameter.
type SearchParameterComponent struct {
	// Definition is the canonical URL of the component's SearchParameter.
	Definition string `json:"definition"`
	// Expression is evaluated relative to the composite's expression.
	Expression string `json:"expression"`
}

var loadSearchParameters = sync.OnceValues(decodeSearchParameters)

// decodeSearchParameters decodes the embedded SearchParameters.
func decodeSearchParameters() ([]SearchParameter, error) {
	var list []SearchParameter
	if err := decodeGzip("searchparameters.json.gz", &list); err != nil {
		return nil, err
	}
	return list, nil
}

// SearchParameters returns the FHIR R4 core SearchParameters, in the order
// of the specification's search-parameters.json. The caller owns the slice
// but must not modify the slices inside its elements.
func SearchParameters() ([]SearchParameter, error) {
	list, err := loadSearchParameters()
	if err != nil {
		return nil, err
	}
	return slices.Clone(list), nil
}
