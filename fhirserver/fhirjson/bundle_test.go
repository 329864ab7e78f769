package fhirjson

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// The split check of a Bundle (shell plus each entry resource, in
// parallel) reports every issue of google/fhir's check of the whole. It
// may report more: google/fhir stops at the first part that does not
// parse, while the parts of a split check are parsed independently (the
// third Bundle's missing type is reported next to its entries' bad values).
func TestStructuralBundleMatchesWholeCheck(t *testing.T) {
	v, err := NewValidator(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	bundles := []string{
		`{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}},{"resource":{"resourceType":"Observation","code":{"text":"x"}},"request":{"method":"POST","url":"Observation"}}]}`,
		`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","foo":1}},{"resource":{"resourceType":"Nope"}},{"fullUrl":"urn:uuid:1"}]}`,
		`{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Patient","gender":"x"}},{"resource":{"resourceType":"Patient","birthDate":"2020-13"}}]}`,
		`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET"}},{"resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"code":"a  b"}},"request":{"method":"PUT","url":"Observation/1"}}]}`,
		`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","x":1}}]}},{"resource":{"resourceType":"Patient","active":"yes"}}]}`,
	}
	render := func(is []outcome.Issue) []string {
		var out []string
		for _, i := range sortIssues(is) {
			out = append(out, fmt.Sprint(i.Code, i.Expression, i.Diagnostics))
		}
		return out
	}
	for _, b := range bundles {
		whole := render(v.structural([]byte(b), ""))
		split := render(v.structuralBundle([]byte(b)))
		if !isSubset(whole, split) || len(whole) == 0 {
			t.Errorf("%s\nwhole: %q\nsplit: %q", b, whole, split)
		}
	}
}

func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
