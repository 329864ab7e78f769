package fhirserver_test

import (
	"fmt"
	"net/http"
	"testing"
)

// :in, :not-in, :below and :above use the ValueSets and CodeSystems written
// to the server, not only the built-in R4 terminology.
func TestSearchHeldTerminology(t *testing.T) {
	h := newHarness(t)
	const cs = "http://example.org/fhir/CodeSystem/kiln-colour"
	for _, w := range []struct{ path, body string }{
		{"/CodeSystem/kiln-colour", `{"resourceType":"CodeSystem","id":"kiln-colour","url":"` + cs + `","status":"active","content":"complete",` +
			`"concept":[{"code":"warm","concept":[{"code":"red"},{"code":"orange"}]},{"code":"cool","concept":[{"code":"blue"}]}]}`},
		{"/ValueSet/warm", `{"resourceType":"ValueSet","id":"warm","url":"http://example.org/fhir/ValueSet/warm","status":"active",` +
			`"compose":{"include":[{"system":"` + cs + `","filter":[{"property":"concept","op":"descendent-of","value":"warm"}]}]}}`},
	} {
		if r := h.do("PUT", w.path, []byte(w.body)); r.status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", w.path, r.status, r.body)
		}
	}
	ids := map[string]string{}
	for _, c := range []string{"warm", "red", "orange", "blue"} {
		ids[c] = h.create(t, "Observation", fmt.Appendf(nil,
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":%q,"code":%q}]}}`, cs, c))
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"code:in=http://example.org/fhir/ValueSet/warm", []string{"red", "orange"}},
		{"code:in=http://example.org/fhir/ValueSet/warm|1.0", []string{"red", "orange"}},
		{"code:not-in=http://example.org/fhir/ValueSet/warm", []string{"warm", "blue"}},
		{"code:below=" + cs + "|warm", []string{"warm", "red", "orange"}},
		{"code:above=" + cs + "|red", []string{"warm", "red"}},
	} {
		var want []string
		for _, k := range c.want {
			want = append(want, ids[k])
		}
		expectIDs(t, c.query, h.matchIDs(t, "Observation", c.query), want)
	}
	// A ValueSet deleted from the server is unknown again.
	if r := h.do("DELETE", "/ValueSet/warm", nil); r.status >= 300 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	expectOutcome(t, h.do("GET", "/Observation?code:in=http://example.org/fhir/ValueSet/warm", nil), http.StatusBadRequest, "code:in")
}
