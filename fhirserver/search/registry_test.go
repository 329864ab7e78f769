package search

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/profiles"
)

func TestRegistryCoversAllResourceTypes(t *testing.T) {
	r := testRegistry(t)
	types := profiles.ResourceTypes()
	if len(types) != 146 {
		t.Fatalf("profiles has %d resource types, want the 146 of R4", len(types))
	}
	for _, typ := range types {
		ps := r.Params(typ)
		// Every type has at least the Resource-level parameters.
		for _, code := range []string{"_id", "_lastUpdated", "_tag", "_profile", "_security", "_source"} {
			if p, ok := r.Lookup(typ, code); !ok || !p.Indexable() {
				t.Errorf("%s: %s missing or not indexable", typ, code)
			}
		}
		if !slices.IsSortedFunc(ps, func(a, b *Param) int { return strings.Compare(a.Code, b.Code) }) {
			t.Errorf("%s: Params not sorted by code", typ)
		}
	}
}

// TestEverySearchParameterCompiles checks that every R4 SearchParameter
// with an expression is indexable on every base type, with the branch
// compiled for that type, and that the whole expression compiles too.
func TestEverySearchParameterCompiles(t *testing.T) {
	r := testRegistry(t)
	sps, err := profiles.SearchParameters()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sp := range sps {
		if sp.Expression == "" {
			continue
		}
		n++
		if _, err := fhirpath.Compile(sp.Expression); err != nil {
			t.Errorf("%s: %v", sp.URL, err)
		}
		if sp.Type == "special" {
			continue
		}
		for _, typ := range expandBase(sp.Base) {
			p, ok := r.Lookup(typ, sp.Code)
			if !ok {
				t.Errorf("%s: %s not registered", typ, sp.Code)
				continue
			}
			if !p.Indexable() {
				t.Errorf("%s: %s has an expression but is not indexable", typ, sp.Code)
			}
		}
	}
	if n < 1000 {
		t.Errorf("only %d SearchParameters with an expression", n)
	}
}

func TestNotIndexableKept(t *testing.T) {
	r := testRegistry(t)
	for _, code := range []string{"_text", "_content"} {
		p, ok := r.Lookup("Patient", code)
		if !ok {
			t.Errorf("%s not registered", code)
			continue
		}
		if p.Indexable() {
			t.Errorf("%s should not be indexable", code)
		}
	}
	if _, ok := r.Lookup("Patient", "no-such-param"); ok {
		t.Error("unknown code found")
	}
	if _, ok := r.Lookup("NoSuchType", "_id"); ok {
		t.Error("unknown type found")
	}
	if r.Params("NoSuchType") != nil {
		t.Error("Params of an unknown type")
	}
}

func TestLookupFields(t *testing.T) {
	r := testRegistry(t)
	p, ok := r.Lookup("Observation", "subject")
	if !ok || p.Type != "reference" || p.URL != "http://hl7.org/fhir/SearchParameter/Observation-subject" {
		t.Fatalf("Observation subject = %+v", p)
	}
	if !slices.Contains(p.Targets, "Patient") {
		t.Errorf("targets %v lack Patient", p.Targets)
	}
	c, ok := r.Lookup("Observation", "code-value-quantity")
	if !ok || len(c.Components) != 2 || c.Components[0].Type != "token" || c.Components[1].Type != "quantity" {
		t.Fatalf("code-value-quantity = %+v", c)
	}
}

func TestAddCustom(t *testing.T) {
	r, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	sp := profiles.SearchParameter{
		URL: "http://example.org/SearchParameter/patient-nickname", Code: "nickname",
		Base: []string{"Patient"}, Type: "string",
		Expression: "Patient.name.where(use = 'nickname').text",
	}
	if err := r.AddCustom(sp); err != nil {
		t.Fatal(err)
	}
	p, ok := r.Lookup("Patient", "nickname")
	if !ok || !p.Custom || !p.Indexable() {
		t.Fatalf("custom parameter not registered: %+v", p)
	}
	es, err := r.Extract(context.Background(), "Patient", loadFixture(t, "patient.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := byParam(es, "nickname")
	if len(got) != 1 || got[0].Str != "jo muller" {
		t.Errorf("nickname entries = %v", got)
	}
	// Replacing by URL is allowed.
	sp.Expression = "Patient.name.where(use = 'nickname').given"
	if err := r.AddCustom(sp); err != nil {
		t.Errorf("replace: %v", err)
	}

	bad := []struct {
		name string
		sp   profiles.SearchParameter
		want string
	}{
		{"no url", profiles.SearchParameter{Code: "x", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "url"},
		{"bad code", profiles.SearchParameter{URL: "u1", Code: "a b", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "code"},
		{"code with a chain's dot", profiles.SearchParameter{URL: "u1", Code: "a.b", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "code"},
		{"code reserved by the specification", profiles.SearchParameter{URL: "u1", Code: "_has", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "code"},
		{"code starting with a digit", profiles.SearchParameter{URL: "u1", Code: "1x", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "code"},
		{"bad base", profiles.SearchParameter{URL: "u2", Code: "x", Base: []string{"Patientt"}, Type: "string", Expression: "Patient.id"}, "base"},
		{"bad type", profiles.SearchParameter{URL: "u3", Code: "x", Base: []string{"Patient"}, Type: "text", Expression: "Patient.id"}, "type"},
		{"no expression", profiles.SearchParameter{URL: "u4", Code: "x", Base: []string{"Patient"}, Type: "token"}, "expression"},
		{"special", profiles.SearchParameter{URL: "u4", Code: "x", Base: []string{"Patient"}, Type: "special", Expression: "Patient.id"}, "special"},
		{"bad expression", profiles.SearchParameter{URL: "u5", Code: "x", Base: []string{"Patient"}, Type: "token", Expression: "Patient.name.("}, "x"},
		{"clash with core", profiles.SearchParameter{URL: "u6", Code: "family", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "already exists"},
		{"core url", profiles.SearchParameter{URL: "http://hl7.org/fhir/SearchParameter/individual-family", Code: "fam2", Base: []string{"Patient"}, Type: "string", Expression: "Patient.id"}, "core"},
		{"bad target", profiles.SearchParameter{URL: "u7", Code: "x", Base: []string{"Patient"}, Type: "reference", Expression: "Patient.link.other", Target: []string{"Nope"}}, "target"},
		{"unknown component", profiles.SearchParameter{URL: "u8", Code: "x", Base: []string{"Patient"}, Type: "composite", Expression: "Patient",
			Component: []profiles.SearchParameterComponent{{Definition: "http://nope", Expression: "id"}, {Definition: "http://nope2", Expression: "id"}}}, "component"},
	}
	for _, tt := range bad {
		err := r.AddCustom(tt.sp)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want mention of %q", tt.name, err, tt.want)
		}
	}
	if _, ok := r.Lookup("Patient", "x"); ok {
		t.Error("a refused parameter was registered")
	}
}

func TestAddCustomResourceBase(t *testing.T) {
	r, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	err = r.AddCustom(profiles.SearchParameter{URL: "http://example.org/sp/version", Code: "version-id", Base: []string{"Resource"}, Type: "token", Expression: "Resource.meta.versionId"})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"Patient", "Observation", "Bundle"} {
		if _, ok := r.Lookup(typ, "version-id"); !ok {
			t.Errorf("%s lacks version-id", typ)
		}
	}
	es, err := r.Extract(context.Background(), "Observation", loadFixture(t, "observation.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := byParam(es, "version-id"); len(got) != 1 || got[0].Code != "2" {
		t.Errorf("version-id entries = %v", got)
	}
}

// Registries start from one shared build of the core parameters: what one
// registers or removes is invisible to the others and to later ones.
func TestRegistriesAreIndependent(t *testing.T) {
	newReg := func() *Registry {
		t.Helper()
		r, err := NewRegistry()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := newReg(), newReg()
	tag := profiles.SearchParameter{URL: "http://example.org/sp/a-tag", Code: "a-tag", Base: []string{"Resource"}, Type: "token", Expression: "Resource.meta.tag"}
	if err := a.AddCustom(tag); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup("Patient", "a-tag"); ok {
		t.Error("a parameter added to one registry is in another")
	}
	if _, ok := newReg().Lookup("Observation", "a-tag"); ok {
		t.Error("a parameter added to one registry is in a later one")
	}
	// The other registry knows nothing of a's URL: a composite on it is
	// refused there, and the same code under another URL is accepted.
	composite := profiles.SearchParameter{URL: "http://example.org/sp/tag-id", Code: "tag-id", Base: []string{"Patient"}, Type: "composite", Expression: "Patient",
		Component: []profiles.SearchParameterComponent{{Definition: tag.URL, Expression: "meta.tag"}, {Definition: "http://hl7.org/fhir/SearchParameter/Resource-id", Expression: "id"}}}
	if err := b.AddCustom(composite); err == nil {
		t.Error("a composite on a component registered only in another registry was accepted")
	}
	if err := b.AddCustom(profiles.SearchParameter{URL: "http://example.org/sp/b-tag", Code: "a-tag", Base: []string{"Patient"}, Type: "token", Expression: "Patient.meta.tag"}); err != nil {
		t.Errorf("the code of another registry's parameter: %v", err)
	}
	if !a.RemoveCustom(tag.URL) {
		t.Fatal("RemoveCustom found nothing")
	}
	if p, ok := b.Lookup("Patient", "a-tag"); !ok || p.URL != "http://example.org/sp/b-tag" {
		t.Errorf("removing from one registry changed another: %+v", p)
	}
	if p, ok := a.Lookup("Patient", "family"); !ok || p.Custom {
		t.Errorf("core parameter after RemoveCustom: %+v", p)
	}
}

func byParam(es []Entry, code string) []Entry {
	var out []Entry
	for _, e := range es {
		if e.Param == code {
			out = append(out, e)
		}
	}
	return out
}

// TestConcurrentExtractAndAddCustom runs under -race: readers extract
// while a writer registers custom parameters.
func TestConcurrentExtractAndAddCustom(t *testing.T) {
	r, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	res := loadFixture(t, "observation.json")
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				if _, err := r.Extract(context.Background(), "Observation", res); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 10 {
		code := "custom-" + string(rune('a'+i))
		if err := r.AddCustom(profiles.SearchParameter{URL: "http://example.org/sp/" + code, Code: code, Base: []string{"Observation"}, Type: "token", Expression: "Observation.status"}); err != nil {
			t.Error(err)
		}
	}
	<-done
	<-done
	es, _ := r.Extract(context.Background(), "Observation", res)
	if got := byParam(es, "custom-j"); len(got) != 1 || got[0].Code != "final" {
		t.Errorf("custom-j = %v", got)
	}
}

// The composites searched through their components' own parameters are
// exactly the root ones whose components extract what those parameters
// do; the others keep their rows.
func TestConjoinedComposites(t *testing.T) {
	r := testRegistry(t)
	want := map[string][]string{
		"code-value-quantity": {"code", "value-quantity"},
		"code-value-concept":  {"code", "value-concept"},
	}
	for _, typ := range profiles.ResourceTypes() {
		for _, p := range r.Params(typ) {
			var got []string
			for _, q := range p.Conjoined {
				got = append(got, q.Code)
			}
			exp := want[p.Code]
			if typ != "Observation" {
				exp = nil
			}
			if !slices.Equal(got, exp) {
				t.Errorf("%s %s conjoined %v, want %v", typ, p.Code, got, exp)
			}
		}
	}
}

// TestAliasedParams proves that a parameter indexed exactly like another
// (Patient phonetic = name) has no rows of its own and is searched,
// tested for :missing and sorted through the other's rows.
func TestAliasedParams(t *testing.T) {
	r := testRegistry(t)
	rows, err := r.ExtractRows(context.Background(), "Patient", decode(t, `{"resourceType":"Patient","name":[{"family":"Okafor","given":["Ada"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rows.Keys {
		if strings.HasPrefix(k, "phonetic") {
			t.Errorf("aliased parameter has key %q", k)
		}
	}
	for _, s := range rows.Sorts {
		if s.Param == "phonetic" {
			t.Errorf("aliased parameter has a sort row")
		}
	}
	if !slices.Contains(rows.Keys, "name\x1fokafor") {
		t.Errorf("keys %q lack name\\x1fokafor", rows.Keys)
	}
	tests := []struct {
		query string
		want  Match
		n     int // matches: name's, then family's and given's (covered by name)
	}{
		{"phonetic=oka", Match{Op: OpKeyPrefix, Prefix: "name\x1foka"}, 3},
		{"phonetic:exact=Okafor", Match{Op: OpKey, Keys: []string{"name:exact\x1fOkafor"}}, 3},
		{"phonetic:missing=true", Match{Op: OpMissing, Param: "name", Missing: true}, 1},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.Parse([]string{"Patient"}, q, testOpts())
		if err != nil {
			t.Fatalf("%s: %v", tt.query, err)
		}
		cs := p.Query.Where
		if len(cs) != 1 || len(cs[0].Any) != tt.n {
			t.Fatalf("%s: clauses %+v", tt.query, cs)
		}
		m := cs[0].Any[0]
		if m.Op != tt.want.Op || m.Prefix != tt.want.Prefix || !slices.Equal(m.Keys, tt.want.Keys) || m.Missing != tt.want.Missing ||
			tt.want.Op == OpMissing && m.Param != tt.want.Param {
			t.Errorf("%s: match %+v, want %+v", tt.query, m, tt.want)
		}
	}
	p, err := r.Parse([]string{"Patient"}, url.Values{"_sort": {"-phonetic"}}, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Query.Sort) != 1 || p.Query.Sort[0].Param != "name" || !p.Query.Sort[0].Desc {
		t.Errorf("_sort=-phonetic sorts by %+v, want name descending", p.Query.Sort)
	}
}
