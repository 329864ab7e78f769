package fhirserver_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// A composite searched through its components' parameters keeps its
// meaning in a search over several types where another type defines the
// same code differently: Observation code-value-quantity:missing=true is
// "code or value-quantity missing" for Observations, and Encounter's own
// parameter decides for Encounters.
func TestConjoinedCompositeMissingAcrossTypes(t *testing.T) {
	h := newHarness(t)
	sp := `{"resourceType":"SearchParameter","url":"https://kiln.example/SearchParameter/enc-cvq","name":"cvq","status":"active","description":"x","code":"code-value-quantity","base":["Encounter"],"type":"token","expression":"Encounter.class"}`
	if r := h.do("POST", "/SearchParameter", []byte(sp)); r.status != http.StatusCreated {
		t.Fatalf("SearchParameter: %d %s", r.status, r.body)
	}
	for path, body := range map[string]string{
		"/Observation/o-novalue": `{"resourceType":"Observation","id":"o-novalue","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]}}`,
		"/Observation/o-value":   `{"resourceType":"Observation","id":"o-value","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":120}}`,
		"/Encounter/e-class":     `{"resourceType":"Encounter","id":"e-class","status":"finished","class":{"code":"AMB"}}`,
		"/Encounter/e-noclass":   `{"resourceType":"Encounter","id":"e-noclass","status":"finished","class":{"display":"no code"}}`,
	} {
		if r := h.do("PUT", path, []byte(body)); r.status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
	}
	for _, c := range []struct {
		missing string
		want    []string
	}{
		{"true", []string{"Encounter/e-noclass", "Observation/o-novalue"}},
		{"false", []string{"Encounter/e-class", "Observation/o-value"}},
	} {
		r := h.do("GET", "?_type=Observation,Encounter&"+url.QueryEscape("code-value-quantity:missing")+"="+c.missing, nil, "Prefer", "handling=strict")
		if r.status != http.StatusOK {
			t.Fatalf(":missing=%s: %d %s", c.missing, r.status, r.body)
		}
		var got []string
		for _, e := range bundleEntries(t, r) {
			res, _ := e["resource"].(map[string]any)
			got = append(got, res["resourceType"].(string)+"/"+res["id"].(string))
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf(":missing=%s finds %v, want %v", c.missing, got, c.want)
		}
	}
}
