package sealed

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// TestRefusals: each search the blind index cannot answer is a 400 whose
// diagnostics name the parameter and say why, and quote no searched
// value; the queries come from the FHIR search parser.
func TestRefusals(t *testing.T) {
	s, _ := sealedSQLite(t, t.TempDir(), newTestKeys(t).config("workforce"))
	for _, c := range []struct {
		name  string
		types []string
		query string
		want  []string // fragments of the diagnostics, one issue each
	}{
		{"string prefix (the default string search)", []string{"Patient"}, "name=Quillf", []string{`"name"`, "start of values", ":exact"}},
		{"string :contains", []string{"Patient"}, "family:contains=eather", []string{`"family:contains"`, ":contains"}},
		{"date equality", []string{"Patient"}, "birthdate=1979-02-28", []string{`"birthdate"`, "date comparison"}},
		{"date range", []string{"Patient"}, "birthdate=ge1979", []string{`"birthdate"`, "date comparison"}},
		{"quantity", []string{"Observation"}, "value-quantity=5.4", []string{`"value-quantity"`, "number or quantity"}},
		{"number", []string{"RiskAssessment"}, "probability=gt0.5", []string{`"probability"`, "number or quantity"}},
		{"_sort on a string", []string{"Patient"}, "_sort=family", []string{`"_sort=family"`, "sorting needs the values"}},
		{"_sort on a date", []string{"Patient"}, "_sort=-birthdate", []string{`"_sort=birthdate"`, "sorting needs the values"}},
		{"token :text", []string{"Observation"}, "code:text=fitness", []string{`"code:text"`, ":text"}},
		{"token system|", []string{"Patient"}, "identifier=https://example.org/sid/employee-id|", []string{`"identifier"`, "system|"}},
		{"uri :below", []string{"ValueSet"}, "url:below=https://example.org/fhir/", []string{`"url:below"`, ":below"}},
		{"a prefix in a chain", []string{"Observation"}, "subject:Patient.name=Quill", []string{`"subject:Patient.name"`, "start of values"}},
		{"a date in a chain", []string{"Observation"}, "subject:Patient.birthdate=1979", []string{`"subject:Patient.birthdate"`, "date comparison"}},
		{"a quantity in _has", []string{"Patient"}, "_has:Observation:subject:value-quantity=5", []string{`"_has:Observation:subject:value-quantity"`, "number or quantity"}},
		{"several at once", []string{"Patient"}, "name=Quill&birthdate=1979&_sort=family", []string{"start of values", "date comparison", "sorting needs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Search(t.Context(), parse(t, c.types, c.query))
			oe, ok := outcome.As(err)
			if !ok || oe.Status != http.StatusBadRequest {
				t.Fatalf("%s: %v, want a 400 OperationOutcome", c.query, err)
			}
			var diags []string
			for _, is := range oe.Issues {
				diags = append(diags, is.Diagnostics)
				if is.Severity != "error" || is.Code != "not-supported" {
					t.Errorf("issue %+v: want severity error, code not-supported", is)
				}
				if !strings.Contains(is.Diagnostics, "encrypted partition") {
					t.Errorf("%q does not say it is the encrypted partition that refuses", is.Diagnostics)
				}
				for _, value := range []string{"Quill", "eather", "1979", "5.4", "0.5", "fitness", "employee-id", "example.org"} {
					if strings.Contains(is.Diagnostics, value) {
						t.Errorf("%q quotes the searched value %q", is.Diagnostics, value)
					}
				}
			}
			all := strings.Join(diags, "\n")
			for _, f := range c.want {
				if !strings.Contains(all, f) {
					t.Errorf("%s: diagnostics %q lack %q", c.query, all, f)
				}
			}
			if strings.Count(c.query, "&") > 0 && len(oe.Issues) != strings.Count(c.query, "&")+1 {
				t.Errorf("%s: %d issues, want one per refused parameter: %q", c.query, len(oe.Issues), all)
			}
		})
	}
}

// TestAnswered: the searches the blind index answers run, from the
// parser, without refusal (what they find is TestEqualitySearch's and
// TestCanaries' business).
func TestAnswered(t *testing.T) {
	s, _ := sealedSQLite(t, t.TempDir(), newTestKeys(t).config("workforce"))
	for _, c := range []struct {
		types []string
		query string
	}{
		{[]string{"Patient"}, "identifier=https://example.org/sid/employee-id|EMP-1"},
		{[]string{"Patient"}, "identifier:of-type=http://terminology.hl7.org/CodeSystem/v2-0203|MR|123"},
		{[]string{"Patient"}, "name:exact=Quillfeatherson"},
		{[]string{"Patient"}, "gender=female,other"},
		{[]string{"Patient"}, "gender:not=male"},
		{[]string{"Patient"}, "_id=0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a02"},
		{[]string{"Patient"}, "_lastUpdated=gt2024-01-01"},
		{[]string{"Patient"}, "_sort=-_lastUpdated"},
		{[]string{"Patient"}, "_sort=_id"},
		{[]string{"Patient"}, "phone:missing=true"},
		{[]string{"Patient"}, "birthdate:missing=false"},
		{[]string{"Patient"}, "organization=Organization/0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a01"},
		{[]string{"Observation"}, "subject:Patient.identifier=EMP-1&_include=Observation:subject"},
		{[]string{"Patient"}, "_has:Observation:subject:code=https://example.org/CodeSystem/screening|fitness-for-work&_revinclude=Observation:subject"},
		{[]string{"Patient"}, "organization.name:exact=Brackwater"},
		{[]string{"ValueSet"}, "url=https://example.org/fhir/ValueSet/x"},
	} {
		if _, err := s.Search(t.Context(), parse(t, c.types, c.query)); err != nil {
			t.Errorf("%s: %v", c.query, err)
		}
	}
}

// TestQueryIsNotChanged: the caller's query is left as it was (the FHIR
// service keeps using it for links).
func TestQueryIsNotChanged(t *testing.T) {
	s, _ := sealedSQLite(t, t.TempDir(), newTestKeys(t).config("workforce"))
	q := parse(t, []string{"Observation"}, "code=https://example.org/CodeSystem/screening|fit&subject:Patient.identifier=EMP-1")
	before := describe(q)
	if _, err := s.Search(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	if after := describe(q); after != before {
		t.Errorf("the query changed:\n before %s\n after  %s", before, after)
	}
}

func describe(q *search.Query) string {
	var b strings.Builder
	for _, cl := range q.Where {
		for _, m := range cl.Any {
			b.WriteString(strings.Join(m.Keys, ",") + ";")
			if m.Chain != nil {
				b.WriteString("(" + describe(m.Chain.Query) + ")")
			}
		}
	}
	return b.String()
}

// equalityFixture is the equality part of the conformance suite's search
// fixture, written through the sealed store.
func equalityFixture(t *testing.T) store.Store {
	cfg := newTestKeys(t).config("workforce")
	cfg.OpaqueID = anyID
	s, _ := sealedSQLite(t, filepath.Join(t.TempDir()), cfg)
	k := func(param, val string) string { return param + keySep + val }
	n := 0
	w := func(typ, id string, keys []string, sorts ...string) store.Write {
		out := plainWrite(typ, id, 1, `{"resourceType":"`+typ+`","id":"`+id+`"}`)
		// Each resource written earlier than the one before: _lastUpdated
		// order is not creation order.
		n++
		out.LastUpdated = t0.Add(-time.Duration(n) * time.Minute)
		rows := &search.Rows{Keys: slices.Sorted(slices.Values(keys))}
		for _, p := range sorts {
			rows.Sorts = append(rows.Sorts, search.SortRow{Param: p, Lo: "v", Hi: "v"})
		}
		out.Index = rows
		return out
	}
	mustPut(t, s,
		w("Patient", "p1", []string{k("family", "smith"), k("gender", "male"), k("organization", "Organization/org1"), k("general-practitioner", "Practitioner/dr1")}, "birthdate", "family"),
		w("Patient", "p2", []string{k("family", "jones"), k("family", "smithers"), k("gender", "female"), k("organization", "Organization/org2")}, "birthdate", "family"),
		w("Patient", "p3", []string{k("family", "brown"), k("gender", "male")}, "family"),
		w("Observation", "o1", []string{k("subject", "Patient/p1"), k("code", "http://loinc.org|1234"), k("code", "1234")}),
		w("Observation", "o2", []string{k("subject", "Patient/p1"), k("code", "http://loinc.org|5678"), k("code", "5678")}),
		w("Observation", "o3", []string{k("subject", "Patient/p2"), k("code", "http://loinc.org|1234"), k("code", "1234")}),
		w("Organization", "org1", []string{k("name", "acme")}),
		w("Organization", "org2", []string{k("name", "globex")}),
		w("Practitioner", "dr1", []string{k("organization", "Organization/org1")}),
	)
	return s
}

// TestEqualitySearch: keys, negations, typed matches, :missing, chains
// and _has find through the sealed store what they find in the plain one
// (the equality cases of the conformance tests that are not run).
func TestEqualitySearch(t *testing.T) {
	s := equalityFixture(t)
	k := func(param, val string) search.Match {
		return search.Match{Op: search.OpKey, Keys: []string{param + keySep + val}}
	}
	one := func(ms ...search.Match) search.Clause { return search.Clause{Any: ms} }
	q := func(typ string, cls ...search.Clause) *search.Query {
		return &search.Query{Types: []string{typ}, Where: cls, Count: 100}
	}
	not := func(m search.Match) search.Match { m.Not = true; return m }
	missing := func(p string, m bool) search.Match { return search.Match{Op: search.OpMissing, Param: p, Missing: m} }
	chain := func(ref, typ string, cls ...search.Clause) search.Match {
		return search.Match{Op: search.OpChain, Chain: &search.Chain{RefParam: ref, Query: &search.Query{Types: []string{typ}, Where: cls}}}
	}
	has := func(typ, param string, cls ...search.Clause) search.Match {
		return search.Match{Op: search.OpHas, Has: &search.Has{Param: param, Query: &search.Query{Types: []string{typ}, Where: cls}}}
	}
	typed := k("gender", "male")
	typed.Type = "Patient"
	for _, c := range []struct {
		name string
		q    *search.Query
		want string
	}{
		{"one key", q("Patient", one(k("family", "smith"))), "Patient/p1"},
		{"a key is no prefix", q("Patient", one(k("family", "smi"))), ""},
		{"OR of keys", q("Patient", one(k("family", "brown"), k("family", "jones"))), "Patient/p2,Patient/p3"},
		{"AND of clauses", q("Patient", one(k("gender", "male")), one(k("family", "brown"))), "Patient/p3"},
		{"not", q("Patient", one(not(k("gender", "male")))), "Patient/p2"},
		{"typed match", &search.Query{Types: []string{"Patient", "Organization"}, Where: []search.Clause{one(typed, k("name", "acme"))}, Count: 100}, "Patient/p1,Patient/p3,Organization/org1"},
		{"plain reference", q("Observation", one(k("subject", "Patient/p1"))), "Observation/o1,Observation/o2"},
		{"missing", q("Patient", one(missing("birthdate", true))), "Patient/p3"},
		{"present", q("Patient", one(missing("birthdate", false))), "Patient/p1,Patient/p2"},
		{"chain", q("Observation", one(chain("subject", "Patient", one(k("family", "smith"))))), "Observation/o1,Observation/o2"},
		{"two hops", q("Observation", one(chain("subject", "Patient", one(chain("organization", "Organization", one(k("name", "globex"))))))), "Observation/o3"},
		{"has", q("Patient", one(has("Observation", "subject", one(k("code", "http://loinc.org|1234"))))), "Patient/p1,Patient/p2"},
		{"not has", q("Patient", one(not(has("Observation", "subject")))), "Patient/p3"},
		{"nested has", q("Organization", one(has("Patient", "organization", one(has("Observation", "subject", one(k("code", "5678"))))))), "Organization/org1"},
	} {
		page, err := s.Search(t.Context(), c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := refsOf(page.Matches)
		slices.Sort(got)
		want := []string{}
		if c.want != "" {
			want = strings.Split(c.want, ",")
		}
		slices.Sort(want)
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: found %v, want %v", c.name, got, want)
		}
	}
}

// TestPagingByIDAndLastUpdated: the sorts that remain (_id and
// _lastUpdated, columns of the store) page forwards with cursors, with
// an equality filter, and a foreign cursor is refused.
func TestPagingByIDAndLastUpdated(t *testing.T) {
	s := equalityFixture(t)
	for _, sort := range []search.Sort{{Param: "_id", Desc: true}, {Param: "_lastUpdated"}} {
		q := &search.Query{Types: []string{"Patient"}, Sort: []search.Sort{sort}, Count: 1,
			Where: []search.Clause{{Any: []search.Match{{Op: search.OpMissing, Param: "family"}}}}}
		var got []string
		for range 10 {
			page, err := s.Search(t.Context(), q)
			if err != nil {
				t.Fatalf("sort %v: %v", sort, err)
			}
			got = append(got, refsOf(page.Matches)...)
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		want := []string{"Patient/p3", "Patient/p2", "Patient/p1"}
		if !slices.Equal(got, want) {
			t.Errorf("sort %v: pages %v, want %v", sort, got, want)
		}
		q.Cursor = "garbage"
		if _, err := s.Search(t.Context(), q); err == nil {
			t.Errorf("sort %v: a garbage cursor was taken", sort)
		}
	}
}
