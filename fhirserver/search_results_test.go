package fhirserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The result parameters (_include, _revinclude, _sort, _summary,
// _elements, _total), the $everything operation, and how a search answers
// parameters it does not know or cannot read. Fixtures: see
// search_http_test.go.

func TestSearchInclude(t *testing.T) {
	h, _ := newSearchHarness(t)
	tests := []struct {
		query             string
		matches, included []string
	}{
		{"/Observation?_id=obs-mg-540&_include=Observation:subject", idset("obs-mg-540"), idset("pat-muller")},
		{"/Observation?_id=obs-mg-540&_include=Observation:subject:Patient", idset("obs-mg-540"), idset("pat-muller")},
		{"/Observation?_id=obs-open&_include=Observation:subject:Patient", idset("obs-open"), nil},
		{"/Observation?_id=obs-open&_include=Observation:subject", idset("obs-open"), idset("grp-1")},
		// Without :iterate, Patient:organization applies to matches only (there are no Patient matches).
		{"/Observation?_id=obs-mg-540&_include=Observation:subject&_include=Patient:organization", idset("obs-mg-540"), idset("pat-muller")},
		{"/Observation?_id=obs-mg-540&_include=Observation:subject&_include:iterate=Patient:organization", idset("obs-mg-540"), idset("pat-muller", "org-clinic")},
		{"/Observation?_id=obs-mg-540&_include=Observation:subject&_include:iterate=Patient:organization&_include:iterate=Organization:partof", idset("obs-mg-540"), idset("pat-muller", "org-clinic", "org-acme")},
		// Every reference parameter of Observation: subject/patient and encounter.
		{"/Observation?_id=obs-mg-540&_include=Observation:*", idset("obs-mg-540"), idset("pat-muller", "enc-1")},
		{"/Observation?_id=obs-mg-540&_include=*", idset("obs-mg-540"), idset("pat-muller", "enc-1")},
		{"/Observation?_id=obs-mg-540&_revinclude=Provenance:target", idset("obs-mg-540"), idset("prov-1")},
		{"/Patient?_id=pat-smith&_revinclude=Provenance:target", idset("pat-smith"), idset("prov-2")},
		{"/Patient?_id=pat-smith&_revinclude=Provenance:patient", idset("pat-smith"), idset("prov-2")},
		{"/Patient?_id=pat-smith&_revinclude=*", idset("pat-smith"), idset("obs-mg-546", "obs-bp", "enc-2", "cond-relapse", "prov-2")},
		{"/Organization?_id=org-clinic&_revinclude=Patient:organization", idset("org-clinic"), idset("pat-muller")},
		{"/Organization?_id=org-clinic&_revinclude=Patient:organization&_revinclude=Observation:subject", idset("org-clinic"), idset("pat-muller")},
		{"/Organization?_id=org-clinic&_revinclude=Patient:organization&_revinclude:iterate=Observation:subject", idset("org-clinic"), idset("pat-muller", "obs-mg-540", "obs-g")},
		{"/Organization?_id=org-clinic&_revinclude=Patient:organization&_revinclude:iterate=Observation:subject&_revinclude:iterate=Provenance:target", idset("org-clinic"), idset("pat-muller", "obs-mg-540", "obs-g", "prov-1")},
		// A resource that is a match is not repeated as an include.
		{"/Organization?_include=Organization:partof", idset("org-acme", "org-clinic", "org-other"), nil},
		{"/Patient?_id=pat-muller&_include=Patient:organization&_include:iterate=Organization:partof", idset("pat-muller"), idset("org-clinic", "org-acme")},
		// Includes of every page, one match per page.
		{"/Observation?code=http://loinc.org|2345-7&_include=Observation:subject&_count=1", glucose, idset("pat-muller", "pat-muller2", "pat-smith")},
		{"/Observation?code=http://loinc.org|2345-7&_include=Observation:subject&_revinclude=Provenance:target&_count=2", glucose, idset("pat-muller", "pat-muller2", "pat-smith", "prov-1")},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			got := h.search(t, tc.query)
			expectIDs(t, "matches", got.matches, tc.matches)
			expectIDs(t, "included", got.included, tc.included)
		})
	}
	t.Run("includes do not count toward _count", func(t *testing.T) {
		got := h.search(t, "/Observation?code=http://loinc.org|2345-7&_include=Observation:subject&_count=1")
		if len(got.pages) != 4 {
			t.Errorf("%d pages of one match for 4 matches", len(got.pages))
		}
	})
	t.Run("includes do not count toward total", func(t *testing.T) {
		r := h.with(t).do("GET", "/Observation?_id=obs-mg-540&_include=Observation:subject&_revinclude=Provenance:target&_total=accurate", nil)
		if total := r.json(t)["total"]; total != float64(1) {
			t.Errorf("total %v, want 1", total)
		}
	})
}

func TestSortMultiKey(t *testing.T) {
	h := newHarness(t)
	h.loadFixtures(t, "search/sort", nil)
	// sort-a Adams 1990, sort-b Adams 1985-06-15, sort-c Baker 1970,
	// sort-d Adams 2000, sort-e Carter 1985-06-15.
	tests := []struct {
		sort string
		want []string
	}{
		{"family,-birthdate", idset("sort-d", "sort-a", "sort-b", "sort-c", "sort-e")},
		{"-family,birthdate", idset("sort-e", "sort-c", "sort-b", "sort-a", "sort-d")},
		{"birthdate,family", idset("sort-c", "sort-b", "sort-e", "sort-a", "sort-d")},
		{"birthdate,-family", idset("sort-c", "sort-e", "sort-b", "sort-a", "sort-d")},
		{"-birthdate", idset("sort-d", "sort-a", "sort-b", "sort-e", "sort-c")[:2]},
		{"_id", idset("sort-a", "sort-b", "sort-c", "sort-d", "sort-e")},
		{"-_id", idset("sort-e", "sort-d", "sort-c", "sort-b", "sort-a")},
		{"family,_id", idset("sort-a", "sort-b", "sort-d", "sort-c", "sort-e")},
		{"family,-_id", idset("sort-d", "sort-b", "sort-a", "sort-c", "sort-e")},
	}
	for _, tc := range tests {
		for _, count := range []string{"", "&_count=2", "&_count=1"} {
			q := "/Patient?_sort=" + tc.sort + count
			t.Run(q, func(t *testing.T) {
				got := h.search(t, q).matches
				if len(tc.want) < 5 {
					// -birthdate: sort-b and sort-e tie; only the first two are fixed.
					if len(got) != 5 || !slices.Equal(got[:2], tc.want) || got[4] != "sort-c" {
						t.Errorf("%s: order %v", q, got)
					}
					return
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: order %v, want %v", q, got, tc.want)
				}
			})
		}
	}
}

// Sorting the shared fixtures: dates sort by their start ascending.
func TestSortFixtures(t *testing.T) {
	h, _ := newSearchHarness(t)
	tests := []struct {
		query string
		want  []string
	}{
		{"/Patient?_id=pat-mueller,pat-muller,pat-smith,pat-garcia&_sort=birthdate", idset("pat-mueller", "pat-muller", "pat-smith", "pat-garcia")},
		{"/Patient?_id=pat-mueller,pat-muller,pat-smith,pat-garcia&_sort=-birthdate", idset("pat-garcia", "pat-smith", "pat-muller", "pat-mueller")},
		// 1980 starts before 1980-05-14.
		{"/Patient?birthdate=1980&_sort=birthdate", idset("pat-muller2", "pat-muller")},
		{"/Observation?code=http://loinc.org|2345-7&_sort=date", idset("obs-mg-540", "obs-mg-535", "obs-mg-546", "obs-g")},
		{"/Observation?code=http://loinc.org|2345-7&_sort=-date&_count=3", idset("obs-g", "obs-mg-546", "obs-mg-535", "obs-mg-540")},
		{"/Observation?value-quantity=lt10|http://unitsofmeasure.org|mg&_sort=value-quantity", idset("obs-mg-535", "obs-mg-540", "obs-mg-546")},
		{"/Organization?_sort=name", idset("org-acme", "org-clinic", "org-other")},
		{"/Organization?_sort=-name", idset("org-other", "org-clinic", "org-acme")},
		{"/ValueSet?_sort=-_lastUpdated,_id", idset("vs-456", "vs-123", "vs-other")},
		{"/ValueSet?_sort=_lastUpdated,-_id", idset("vs-other", "vs-123", "vs-456")},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			if got := h.search(t, tc.query).matches; !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

// onlyMatch returns the resource of the only match of a search.
func onlyMatch(t *testing.T, h *harness, query string) map[string]any {
	t.Helper()
	got := h.search(t, query)
	if len(got.matches) != 1 {
		t.Fatalf("%s: matches %v, want one", query, got.matches)
	}
	for _, e := range pageEntries(got.pages[0]) {
		if e["search"].(map[string]any)["mode"] == "match" {
			return e["resource"].(map[string]any)
		}
	}
	t.Fatal("no match entry")
	return nil
}

func tagCodes(res map[string]any) []string {
	m, _ := res["meta"].(map[string]any)
	tags, _ := m["tag"].([]any)
	var out []string
	for _, tag := range tags {
		c, _ := tag.(map[string]any)["code"].(string)
		out = append(out, c)
	}
	return out
}

func TestSummaryAndElements(t *testing.T) {
	h, _ := newSearchHarness(t)
	tests := []struct {
		query     string
		has, lack []string
		subsetted bool
	}{
		{"_summary=true", idset("id", "meta", "identifier", "name", "gender", "birthDate", "managingOrganization", "active"), idset("text", "maritalStatus"), true},
		{"_summary=text", idset("id", "meta", "text"), idset("name", "birthDate", "identifier", "maritalStatus"), true},
		{"_summary=data", idset("id", "meta", "name", "birthDate", "maritalStatus"), idset("text"), true},
		{"_summary=false", idset("id", "meta", "text", "name", "birthDate", "maritalStatus"), nil, false},
		{"_elements=birthDate,gender", idset("id", "meta", "birthDate", "gender"), idset("text", "name", "identifier", "maritalStatus", "managingOrganization"), true},
		{"_elements=name", idset("id", "meta", "name"), idset("text", "birthDate", "gender"), true},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			res := onlyMatch(t, h, "/Patient?_id=pat-muller&"+tc.query)
			for _, k := range tc.has {
				if _, ok := res[k]; !ok {
					t.Errorf("%s: no %s in %v", tc.query, k, res)
				}
			}
			for _, k := range tc.lack {
				if _, ok := res[k]; ok {
					t.Errorf("%s: %s was not removed", tc.query, k)
				}
			}
			tags := tagCodes(res)
			if got := slices.Contains(tags, "SUBSETTED"); got != tc.subsetted {
				t.Errorf("%s: SUBSETTED tag %v, want %v (tags %v)", tc.query, got, tc.subsetted, tags)
			}
			if !slices.Contains(tags, "vip") {
				t.Errorf("%s: the resource's own tag is lost: %v", tc.query, tags)
			}
		})
	}
	t.Run("_summary=text keeps mandatory elements", func(t *testing.T) {
		res := onlyMatch(t, h, "/Observation?_id=obs-mg-540&_summary=text")
		for _, k := range []string{"id", "meta", "status", "code"} {
			if _, ok := res[k]; !ok {
				t.Errorf("no %s in %v", k, res)
			}
		}
		for _, k := range []string{"valueQuantity", "subject", "effectiveDateTime", "encounter"} {
			if _, ok := res[k]; ok {
				t.Errorf("%s was not removed", k)
			}
		}
		if !slices.Contains(tagCodes(res), "SUBSETTED") {
			t.Errorf("no SUBSETTED tag: %v", res["meta"])
		}
	})
	// isSummary applies inside the resource's backbone elements too;
	// inside data types everything is summary but Attachment.data
	// (ElementDefinition.isSummary).
	t.Run("_summary=true in backbone elements", func(t *testing.T) {
		hn := h.with(t)
		obs := `{"resourceType":"Observation","id":"sum-bp","status":"final","code":{"text":"BP"},` +
			`"component":[{"code":{"text":"systolic"},"valueQuantity":{"value":120,"unit":"mm[Hg]"},"interpretation":[{"text":"normal"}],` +
			`"referenceRange":[{"text":"<140"}]}]}`
		doc := `{"resourceType":"DocumentReference","id":"sum-doc","status":"current",` +
			`"content":[{"attachment":{"contentType":"text/plain","data":"aGVsbG8=","title":"note"},"format":{"code":"urn:x"}}]}`
		for _, c := range []struct{ path, body string }{{"/Observation/sum-bp", obs}, {"/DocumentReference/sum-doc", doc}} {
			if r := hn.do("PUT", c.path, []byte(c.body)); r.status != http.StatusCreated {
				t.Fatalf("PUT %s: %d %s", c.path, r.status, r.body)
			}
		}
		res := onlyMatch(t, h, "/Observation?_id=sum-bp&_summary=true")
		comp, _ := dig(res, "component", 0).(map[string]any)
		if comp["code"] == nil || comp["valueQuantity"] == nil {
			t.Errorf("component lost its summary elements: %v", comp)
		}
		if comp["interpretation"] != nil || comp["referenceRange"] != nil {
			t.Errorf("component kept elements that are not summary: %v", comp)
		}
		res = onlyMatch(t, h, "/DocumentReference?_id=sum-doc&_summary=true")
		att, _ := dig(res, "content", 0, "attachment").(map[string]any)
		if att["data"] != nil || att["title"] != "note" || att["contentType"] != "text/plain" {
			t.Errorf("attachment: want all but data, got %v", att)
		}
		if dig(res, "content", 0, "format", "code") != "urn:x" {
			t.Errorf("content.format was removed: %v", res["content"])
		}
	})
	t.Run("read and vread take _summary and _elements", func(t *testing.T) {
		hn := h.with(t)
		for _, path := range []string{"/Patient/pat-muller", "/Patient/pat-muller/_history/1"} {
			r := hn.do("GET", path+"?_summary=true", nil)
			if r.status != http.StatusOK || bytes.Contains(r.body, []byte("maritalStatus")) || !bytes.Contains(r.body, []byte("SUBSETTED")) {
				t.Errorf("%s?_summary=true: %d %s", path, r.status, r.body)
			}
			r = hn.do("GET", path+"?_elements=birthDate", nil)
			if r.status != http.StatusOK || bytes.Contains(r.body, []byte(`"name"`)) || !bytes.Contains(r.body, []byte("birthDate")) {
				t.Errorf("%s?_elements=birthDate: %d %s", path, r.status, r.body)
			}
		}
		expectOutcome(t, hn.do("GET", "/Patient/pat-muller?_summary=count", nil), http.StatusBadRequest, "")
		expectOutcome(t, hn.do("GET", "/Patient/pat-muller?_summary=maybe", nil), http.StatusBadRequest, "_summary")
		// History too, at every level.
		for _, path := range []string{"/Patient/pat-muller/_history", "/Patient/_history", "/_history"} {
			r := hn.do("GET", path+"?_summary=true&_count=500", nil)
			if r.status != http.StatusOK || bytes.Contains(r.body, []byte("maritalStatus")) || !bytes.Contains(r.body, []byte("SUBSETTED")) {
				t.Errorf("%s?_summary=true: %d %.300s", path, r.status, r.body)
			}
		}
		expectOutcome(t, hn.do("GET", "/Patient/pat-muller/_history?_summary=count", nil), http.StatusBadRequest, "")
		// The parameters are checked whether or not the resource exists.
		expectOutcome(t, hn.do("GET", "/Patient/nobody?_summary=maybe", nil), http.StatusBadRequest, "_summary")
	})
	t.Run("_elements with a choice element", func(t *testing.T) {
		res := onlyMatch(t, h, "/Observation?_id=obs-mg-540&_elements=value")
		if _, ok := res["valueQuantity"]; !ok {
			t.Errorf("_elements=value dropped valueQuantity: %v", res)
		}
		for _, k := range []string{"subject", "effectiveDateTime", "encounter"} {
			if _, ok := res[k]; ok {
				t.Errorf("%s was not removed", k)
			}
		}
	})
	t.Run("stored resource untouched", func(t *testing.T) {
		r := h.with(t).do("GET", "/Patient/pat-muller", nil)
		if bytes.Contains(r.body, []byte("SUBSETTED")) || !bytes.Contains(r.body, []byte("maritalStatus")) {
			t.Errorf("a shaped search changed the stored resource: %s", r.body)
		}
	})
	t.Run("_summary=count", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			want  float64
		}{{"/Patient?_summary=count", 6}, {"/Patient?family=mul&_summary=count", 2}, {"/Observation?_summary=count&code=http://loinc.org|2345-7", 4}} {
			query, want := tc.query, tc.want
			r := h.with(t).do("GET", query, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d %s", query, r.status, r.body)
			}
			page := r.json(t)
			if page["total"] != want {
				t.Errorf("%s: total %v, want %v", query, page["total"], want)
			}
			for _, e := range pageEntries(page) {
				if e["search"].(map[string]any)["mode"] == "match" {
					t.Errorf("%s: a match entry with _summary=count", query)
				}
			}
		}
	})
}

func TestSearchTotal(t *testing.T) {
	h, _ := newSearchHarness(t)
	r := h.with(t).do("GET", "/Patient?_total=accurate&_count=2", nil)
	page := r.json(t)
	if page["total"] != float64(6) {
		t.Errorf("_total=accurate: total %v, want 6", page["total"])
	}
	if n := len(pageEntries(page)); n != 2 {
		t.Errorf("_count=2: %d entries", n)
	}
	if r := h.with(t).do("GET", "/Patient?family=smith&_total=accurate", nil); r.json(t)["total"] != float64(2) {
		t.Errorf("family=smith total %v, want 2", r.json(t)["total"])
	}
	// none and estimate may leave the total out, but must not change the matches.
	for _, q := range []string{"_total=none", "_total=estimate"} {
		expectIDs(t, q, h.search(t, "/Patient?family=smith&_count=1&"+q).matches, idset("pat-smith", "pat-smithson"))
	}
}

// $everything: the patient and its compartment, never another patient's
// data; _type, _since and _count.
func TestEverything(t *testing.T) {
	h, c := newSearchHarness(t)
	// obs-g changes in March; nothing else does.
	c.set(laterWritten)
	body := strings.Replace(string(fixture(t, "search/Observation-obs-g.json")), "0.012", "0.013", 1)
	if r := h.with(t).do("PUT", "/Observation/obs-g", []byte(body)); r.status != http.StatusOK {
		t.Fatalf("update obs-g: %d %s", r.status, r.body)
	}
	c.set(searchTime)

	compartment := idset("pat-muller", "obs-mg-540", "obs-g", "enc-1", "cond-active")
	others := idset("pat-muller2", "pat-mueller", "pat-smith", "pat-smithson", "pat-garcia",
		"obs-mg-535", "obs-mg-546", "obs-open", "obs-openstart", "obs-bp", "obs-logical", "obs-abs",
		"enc-2", "cond-relapse", "cond-resolved", "prov-2", "vs-123", "vs-456", "vs-other")
	all := func(r searchResult) []string { return append(slices.Clone(r.matches), r.included...) }

	t.Run("everything", func(t *testing.T) {
		got := all(h.search(t, "/Patient/pat-muller/$everything"))
		for _, id := range compartment {
			if !slices.Contains(got, id) {
				t.Errorf("$everything lacks %s: %v", id, got)
			}
		}
		for _, id := range others {
			if slices.Contains(got, id) {
				t.Errorf("$everything of pat-muller returned %s", id)
			}
		}
	})
	t.Run("_count paging", func(t *testing.T) {
		whole := h.search(t, "/Patient/pat-muller/$everything")
		paged := h.search(t, "/Patient/pat-muller/$everything?_count=2")
		expectIDs(t, "paged $everything", paged.matches, whole.matches)
		if len(paged.pages) < 3 {
			t.Errorf("%d pages of 2 for %d resources", len(paged.pages), len(paged.matches))
		}
	})
	t.Run("_type", func(t *testing.T) {
		got := h.search(t, "/Patient/pat-muller/$everything?_type=Observation,Encounter")
		expectIDs(t, "_type=Observation,Encounter", all(got), idset("obs-mg-540", "obs-g", "enc-1"))
		// _type repeats (0..*): the lists add up.
		got = h.search(t, "/Patient/pat-muller/$everything?_type=Observation&_type=Encounter,Observation")
		expectIDs(t, "_type=Observation&_type=Encounter,Observation", all(got), idset("obs-mg-540", "obs-g", "enc-1"))
	})
	t.Run("_type=Patient", func(t *testing.T) {
		expectIDs(t, "_type=Patient", all(h.search(t, "/Patient/pat-muller/$everything?_type=Patient")), idset("pat-muller"))
	})
	for _, since := range []string{"2024-03-01T00:00:00Z", "2024-03-01T01:00:00%2B01:00", "2024-03-01T01:00:00+01:00"} {
		t.Run("_since="+since, func(t *testing.T) {
			got := h.search(t, "/Patient/pat-muller/$everything?_since="+since)
			expectIDs(t, "_since", all(got), idset("obs-g"))
		})
	}
	t.Run("_since after every change", func(t *testing.T) {
		expectIDs(t, "_since=2024-04-01", all(h.search(t, "/Patient/pat-muller/$everything?_since=2024-04-01T00:00:00Z")), nil)
	})
	// "any resources referenced from those" come with the compartment,
	// as include entries, within _type.
	t.Run("referenced resources", func(t *testing.T) {
		got := h.search(t, "/Patient/pat-muller/$everything")
		if !slices.Contains(got.included, "org-clinic") {
			t.Errorf("$everything lacks org-clinic, the managingOrganization and serviceProvider: included %v", got.included)
		}
		for _, id := range []string{"org-acme", "org-other"} {
			if slices.Contains(all(got), id) {
				t.Errorf("$everything of pat-muller returned %s, which only other patients reference", id)
			}
		}
		if got := all(h.search(t, "/Patient/pat-muller/$everything?_type=Encounter")); slices.Contains(got, "org-clinic") {
			t.Errorf("_type=Encounter returned org-clinic: %v", got)
		}
		// A referenced type may be asked for with the compartment types
		// that reference it, not alone.
		expectIDs(t, "_type=Encounter,Organization", all(h.search(t, "/Patient/pat-muller/$everything?_type=Encounter,Organization")), idset("enc-1", "org-clinic"))
		expectOutcome(t, h.with(t).do("GET", "/Patient/pat-muller/$everything?_type=Organization", nil), http.StatusBadRequest, "_type")
		expectOutcome(t, h.with(t).do("GET", "/Patient/pat-muller/$everything?_type=Nonsense", nil), http.StatusBadRequest, "_type")
	})
	t.Run("POST with Parameters", func(t *testing.T) {
		body := `{"resourceType":"Parameters","parameter":[{"name":"_type","valueCode":"Observation"},{"name":"_count","valueInteger":1}]}`
		got := h.walk(t, h.with(t).do("POST", "/Patient/pat-muller/$everything", []byte(body)))
		expectIDs(t, "POST _type=Observation", all(got), idset("obs-mg-540", "obs-g"))
		if len(got.pages) != 2 {
			t.Errorf("%d pages, want 2 of _count=1", len(got.pages))
		}
		expectOutcome(t, h.with(t).do("POST", "/Patient/pat-muller/$everything", []byte(`{"resourceType":"Patient"}`)), http.StatusBadRequest, "")
		expectOutcome(t, h.with(t).do("POST", "/Patient/pat-muller/$everything", []byte(`{"resourceType":"Parameters","parameter":[{"name":"_type"}]}`)), http.StatusBadRequest, "_type")
		expectOutcome(t, h.with(t).do("POST", "/Patient/pat-muller/$everything", []byte(`{"resourceType":"Parameters","parameter":[{"name":"_count","valueInteger":2,"valueString":"3"}]}`)), http.StatusBadRequest, "_count")
	})
	t.Run("start and end are reported, not applied", func(t *testing.T) {
		got := h.search(t, "/Patient/pat-muller/$everything?start=2024-01-01&_type=Encounter")
		expectIDs(t, "start", all(got), idset("enc-1"))
		if b, _ := json.Marshal(got.outcomes); !bytes.Contains(b, []byte("start")) {
			t.Errorf("no outcome names start: %s", b)
		}
		expectOutcome(t, h.with(t).do("GET", "/Patient/pat-muller/$everything?end=2024-01-01", nil, "Prefer", "handling=strict"), http.StatusBadRequest, "end")
	})
	t.Run("another patient referenced is left out", func(t *testing.T) {
		obs := `{"resourceType":"Observation","id":"obs-other-performer","status":"final","code":{"text":"x"},` +
			`"subject":{"reference":"Patient/pat-muller"},"performer":[{"reference":"Patient/pat-smith"}]}`
		if r := h.with(t).do("PUT", "/Observation/obs-other-performer", []byte(obs)); r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		got := all(h.search(t, "/Patient/pat-muller/$everything"))
		if !slices.Contains(got, "obs-other-performer") || slices.Contains(got, "pat-smith") {
			t.Errorf("want obs-other-performer and not pat-smith: %v", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		expectOutcome(t, h.with(t).do("GET", "/Patient/nobody/$everything", nil), http.StatusNotFound, "")
		expectOutcome(t, h.with(t).do("GET", "/Patient/pat-muller/$everything?_since=last-week", nil), http.StatusBadRequest, "_since")
	})
}

// Unknown parameters are ignored and reported, unless the client asks for
// strict handling.
func TestSearchUnknownParameters(t *testing.T) {
	h, _ := newSearchHarness(t)
	for _, query := range []string{"/Patient?family=smith&foo=bar", "/Patient?foo=bar&family=smith&_nonsense=1"} {
		t.Run(query, func(t *testing.T) {
			got := h.search(t, query)
			expectIDs(t, query, got.matches, idset("pat-smith", "pat-smithson"))
			if len(got.outcomes) == 0 || got.outcomes[0]["resourceType"] != "OperationOutcome" {
				t.Fatalf("no OperationOutcome entry with search.mode=outcome: %v", got.pages[0])
			}
			b, _ := json.Marshal(got.outcomes)
			if !bytes.Contains(b, []byte("foo")) {
				t.Errorf("the outcome does not name the parameter foo: %s", b)
			}
			self := bundleLink(got.pages[0], "self")
			u, err := url.Parse(self)
			if err != nil {
				t.Fatalf("self link %q: %v", self, err)
			}
			if q := u.Query(); q.Get("family") != "smith" || q.Has("foo") || q.Has("_nonsense") {
				t.Errorf("self link %q: want family=smith and none of the ignored parameters", self)
			}
			// Strict handling refuses the search, naming an unknown parameter.
			strict := h.with(t).do("GET", query, nil, "Prefer", "handling=strict")
			expectOutcome(t, strict, http.StatusBadRequest, "")
			if !bytes.Contains(strict.body, []byte("foo")) && !bytes.Contains(strict.body, []byte("_nonsense")) {
				t.Errorf("the strict refusal names no unknown parameter: %s", strict.body)
			}
		})
	}
	t.Run("POST", func(t *testing.T) {
		got := h.searchPost(t, "/Patient/_search", "family=smith&foo=bar")
		expectIDs(t, "POST with foo", got.matches, idset("pat-smith", "pat-smithson"))
		if len(got.outcomes) == 0 {
			t.Error("no outcome entry for foo")
		}
		strict := h.with(t).do("POST", "/Patient/_search", []byte("family=smith&foo=bar"), "Content-Type", "application/x-www-form-urlencoded", "Prefer", "handling=strict")
		expectOutcome(t, strict, http.StatusBadRequest, "foo")
	})
	t.Run("strict accepts _format, _pretty and page links", func(t *testing.T) {
		got := h.search(t, "/Patient?_count=2&_format=json&_pretty=true", "Prefer", "handling=strict")
		expectIDs(t, "strict paging", got.matches, allPatient)
		if len(got.outcomes) != 0 {
			t.Errorf("outcome entries for HTTP parameters: %v", got.outcomes)
		}
	})
	t.Run("lenient", func(t *testing.T) {
		got := h.search(t, "/Patient?family=smith&foo=bar", "Prefer", "handling=lenient")
		expectIDs(t, "lenient", got.matches, idset("pat-smith", "pat-smithson"))
	})
}

// Malformed values are errors whatever the handling asked for, and the
// OperationOutcome names the parameter.
func TestSearchRejectsMalformedValues(t *testing.T) {
	h, _ := newSearchHarness(t)
	tests := []struct{ query, param string }{
		{"/Patient?birthdate=xx2000", "birthdate"},
		{"/Patient?birthdate=2000-13-45", "birthdate"},
		{"/Patient?birthdate=yesterday", "birthdate"},
		{"/Patient?birthdate=2001-02-29", "birthdate"},
		{"/Observation?date=2020-01-01T25:00:00Z", "date"},
		{"/Observation?value-quantity=abc", "value-quantity"},
		{"/Observation?value-quantity=xx5.4", "value-quantity"},
		{"/Observation?value-quantity=5.4.1", "value-quantity"},
		{"/Observation?patient.birthdate=xx2000", "patient.birthdate"},
		{"/Patient?birthdate:exact=1980", "birthdate"}, // a modifier dates do not have
		{"/Patient?family:nonsense=x", "family"},       // no such modifier
		{"/Patient?_count=many", "_count"},
		{"/Patient?_count=-1", "_count"},
		{"/Patient?_summary=maybe", "_summary"},
		{"/Patient?_total=exact", "_total"},
		{"/Patient?_include=Patient:nonsense", "_include"},
		{"/Patient?_lastUpdated=gt2024-99", "_lastUpdated"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			for _, prefer := range []string{"handling=lenient", "handling=strict"} {
				r := h.with(t).do("GET", tc.query, nil, "Prefer", prefer)
				expectOutcome(t, r, http.StatusBadRequest, tc.param)
			}
			r := h.with(t).do("POST", strings.Replace(tc.query, "?", "/_search?", 1), []byte{}, "Content-Type", "application/x-www-form-urlencoded")
			expectOutcome(t, r, http.StatusBadRequest, tc.param)
		})
	}
}

// A malformed escape in the query string is a 400: dropping the pair, as
// url.Values does, would run the search without the client's filter.
func TestMalformedQueryString(t *testing.T) {
	h, _ := newSearchHarness(t)
	for _, path := range []string{"/Patient?_id=%zz", "/ValueSet?url:below=%%", "/Patient/pat-muller?_summary=%zz", "/Patient?family=smith&x=%G1"} {
		expectOutcome(t, h.with(t).do("GET", path, nil), http.StatusBadRequest, "")
	}
}
