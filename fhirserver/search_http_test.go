package fhirserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
)

// The search tests run against the hand-written resources of
// testdata/search (see the table below), loaded with PUT so that their ids
// are known. Every expected result is derived from those files and the
// FHIR R4 search specification (https://hl7.org/fhir/R4/search.html).
//
//	Patient       family    gender  birthDate   other
//	pat-muller    Müller    male    1980-05-14  MR|MRN-1001, org-clinic, active, tag vip, security R, profile kiln-patient, source registry
//	pat-muller2   Muller    female  1980        DL|MRN-1001, MR|MRN-2002, org-acme, security HTEST
//	pat-mueller   Mueller   male    1965-12
//	pat-smith     Smith     male    1990-01-01  org-other, active, tag test, security N, source lab
//	pat-smithson  Smithson  -       -
//	pat-garcia    García    female  2001-03-04  given José
//
//	Observation    code     status       subject                 effective                  value
//	obs-mg-540     glucose  final        pat-muller (enc-1)      2020-01-01T10:00:00+02:00  5.40 mg
//	obs-mg-535     glucose  amended      pat-muller2             2020-01-02                 5.35 mg
//	obs-mg-546     glucose  preliminary  pat-smith               2020-02-01 .. 2020-02-10   5.46 mg
//	obs-g          glucose  final        pat-muller              2020-03-15T12:00:00Z       0.012 g
//	obs-open       heart    final        Group/grp-1             2021-06-01 ..              72 /min
//	obs-openstart  heart    cancelled    pat-mueller             .. 2019-03-01              -
//	obs-bp         BP       corrected    pat-smith               2021-01-01T12:00:00Z       components 120 and 80 mm[Hg]
//	obs-logical    heart    final        identifier MRN-1001     2022-05-05                 60 /min
//	obs-abs        heart    final        [base]/Patient/pat-garcia 2022-06-06               65 /min
//
// Organizations: org-acme (tag vip) ← partOf ← org-clinic; org-other.
// Encounters: enc-1 (pat-muller, 2020-01-01 09:00–11:00Z, org-clinic),
// enc-2 (pat-smith, from 2021-01-01T12:00Z, open, org-other). Conditions:
// cond-active (pat-muller), cond-relapse (pat-smith), cond-resolved
// (pat-muller2). Provenance: prov-1 → obs-mg-540, prov-2 → pat-smith.
// ValueSets: vs-123, vs-456 (written later than the rest), vs-other.

const (
	fixturesWritten = "2024-01-10T00:00:00Z"
	laterWritten    = "2024-03-10T00:00:00Z" // vs-456
	searchTime      = "2024-06-01T00:00:00Z" // the server's clock during the searches
)

// fixtureTypeOrder is the load order: referenced resources first.
var fixtureTypeOrder = []string{"Organization", "Group", "Patient", "Encounter", "Observation", "Condition", "Provenance", "ValueSet"}

// with returns the harness reporting to t (for subtests).
func (h *harness) with(t testing.TB) *harness {
	c := *h
	c.t = t
	return &c
}

// loadFixtures PUTs every resource of testdata/<dir>; before, when set, is
// called with each id before its write (to set the clock).
func (h *harness) loadFixtures(t *testing.T, dir string, before func(id string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	type resource struct {
		typ, id string
		body    []byte
	}
	var all []resource
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			ResourceType string `json:"resourceType"`
			ID           string `json:"id"`
		}
		if err := json.Unmarshal(b, &head); err != nil || head.ID == "" {
			t.Fatalf("%s: not a resource with an id: %v", f, err)
		}
		all = append(all, resource{head.ResourceType, head.ID, bytes.ReplaceAll(b, []byte("{{BASE}}"), []byte(h.base))})
	}
	rank := func(typ string) int {
		if i := slices.Index(fixtureTypeOrder, typ); i >= 0 {
			return i
		}
		return len(fixtureTypeOrder)
	}
	slices.SortFunc(all, func(a, b resource) int {
		if d := rank(a.typ) - rank(b.typ); d != 0 {
			return d
		}
		return strings.Compare(a.id, b.id)
	})
	hh := h.with(t)
	for _, r := range all {
		if before != nil {
			before(r.id)
		}
		if resp := hh.do("PUT", "/"+r.typ+"/"+r.id, r.body); resp.status != http.StatusCreated {
			t.Fatalf("loading %s/%s: %d %s", r.typ, r.id, resp.status, resp.body)
		}
	}
}

// newSearchHarness is a server holding the resources of testdata/search.
func newSearchHarness(t *testing.T, mutate ...func(*fhirserver.Config)) (*harness, *clock) {
	t.Helper()
	c := &clock{}
	c.set(fixturesWritten)
	h := newHarness(t, append([]func(*fhirserver.Config){func(cfg *fhirserver.Config) { cfg.Now = c.now }}, mutate...)...)
	h.loadFixtures(t, "search", func(id string) {
		if id == "vs-456" {
			c.set(laterWritten)
		} else {
			c.set(fixturesWritten)
		}
	})
	c.set(searchTime)
	return h, c
}

// searchResult is what a search returned over all its pages.
type searchResult struct {
	matches  []string         // ids of the search.mode=match entries, in the order served
	included []string         // ids of the search.mode=include entries, sorted, each once
	outcomes []map[string]any // the resources of search.mode=outcome entries
	pages    []map[string]any // every page, in order
}

// search GETs path and follows the next links to the end.
func (h *harness) search(t *testing.T, path string, headers ...string) searchResult {
	t.Helper()
	return h.walk(t, h.with(t).do("GET", path, nil, headers...), headers...)
}

// searchPost POSTs a form to path (e.g. /Patient/_search) and follows the
// next links to the end.
func (h *harness) searchPost(t *testing.T, path, form string, headers ...string) searchResult {
	t.Helper()
	hs := append([]string{"Content-Type", "application/x-www-form-urlencoded"}, headers...)
	return h.walk(t, h.with(t).do("POST", path, []byte(form), hs...), headers...)
}

// walk checks each page of a searchset, starting from first, and collects
// the entries. Every match must be served once; no page may hold a
// resource twice (Bundle invariant bdl-7).
func (h *harness) walk(t *testing.T, first response, headers ...string) searchResult {
	t.Helper()
	var res searchResult
	seen := map[string]bool{}
	included := map[string]bool{}
	r := first
	for {
		if r.status != http.StatusOK {
			t.Fatalf("search page %d: status %d: %s", len(res.pages)+1, r.status, r.body)
		}
		page := r.json(t)
		if page["resourceType"] != "Bundle" || page["type"] != "searchset" {
			t.Fatalf("not a searchset Bundle: %s", r.body)
		}
		res.pages = append(res.pages, page)
		onPage := map[string]bool{}
		for _, e := range pageEntries(page) {
			res2, _ := e["resource"].(map[string]any)
			mode, _ := e["search"].(map[string]any)["mode"].(string)
			if mode == "outcome" {
				res.outcomes = append(res.outcomes, res2)
				continue
			}
			typ, _ := res2["resourceType"].(string)
			id, _ := res2["id"].(string)
			if full := e["fullUrl"]; full != h.base+"/"+typ+"/"+id {
				t.Errorf("entry %s/%s has fullUrl %v", typ, id, full)
			}
			if onPage[typ+"/"+id] {
				t.Errorf("%s/%s appears twice on one page", typ, id)
			}
			onPage[typ+"/"+id] = true
			switch mode {
			case "match":
				if seen[id] {
					t.Errorf("match %s served twice", id)
				}
				seen[id] = true
				res.matches = append(res.matches, id)
			case "include":
				included[id] = true
			default:
				t.Errorf("entry %s/%s has search.mode %q", typ, id, mode)
			}
		}
		next := bundleLink(page, "next")
		if next == "" {
			break
		}
		if len(res.pages) >= 100 {
			t.Fatalf("more than 100 pages")
		}
		r = h.with(t).do("GET", next, nil, headers...)
	}
	for id := range included {
		res.included = append(res.included, id)
	}
	slices.Sort(res.included)
	return res
}

func pageEntries(page map[string]any) []map[string]any {
	raw, _ := page["entry"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, e := range raw {
		out = append(out, e.(map[string]any))
	}
	return out
}

// bundleLink returns the url of a Bundle's link with the relation, or "".
func bundleLink(page map[string]any, relation string) string {
	links, _ := page["link"].([]any)
	for _, l := range links {
		if m, _ := l.(map[string]any); m["relation"] == relation {
			s, _ := m["url"].(string)
			return s
		}
	}
	return ""
}

// expectIDs compares id sets, order ignored.
func expectIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %v, want %v", what, g, w)
	}
}

// searchCase is a query (a path under the base; {{BASE}} stands for the
// base URL) and the ids of its matches, in any order.
type searchCase struct {
	query string
	want  []string
}

func runSearchCases(t *testing.T, h *harness, cases []searchCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			got := h.search(t, strings.ReplaceAll(tc.query, "{{BASE}}", h.base))
			expectIDs(t, tc.query, got.matches, tc.want)
		})
	}
}

func idset(s ...string) []string { return s }

var (
	glucose    = idset("obs-mg-540", "obs-mg-535", "obs-mg-546", "obs-g")
	allPatient = idset("pat-muller", "pat-muller2", "pat-mueller", "pat-smith", "pat-smithson", "pat-garcia")
)

func TestSearchInteractions(t *testing.T) {
	h, _ := newSearchHarness(t)
	check := func(t *testing.T, what string, got searchResult, want []string) {
		t.Helper()
		expectIDs(t, what, got.matches, want)
	}
	t.Run("GET type", func(t *testing.T) {
		check(t, "GET /Patient?family=muller", h.search(t, "/Patient?family=muller"), idset("pat-muller", "pat-muller2"))
	})
	t.Run("GET type without parameters", func(t *testing.T) {
		check(t, "GET /Patient", h.search(t, "/Patient"), allPatient)
	})
	t.Run("POST _search form", func(t *testing.T) {
		check(t, "POST family=muller", h.searchPost(t, "/Patient/_search", "family=muller"), idset("pat-muller", "pat-muller2"))
	})
	t.Run("POST _search form and query string", func(t *testing.T) {
		// Parameters may be split between the URL and the body; both apply.
		got := h.searchPost(t, "/Patient/_search?gender=male", "family=muller")
		check(t, "POST ?gender=male + family=muller", got, idset("pat-muller"))
		// The self link is a GET of the same search.
		self := bundleLink(got.pages[0], "self")
		check(t, "GET "+self, h.search(t, self), idset("pat-muller"))
	})
	t.Run("POST _search encoded form values", func(t *testing.T) {
		form := url.Values{"date": {"2020-01-01T10:00:00+02:00"}, "value-quantity": {"5.4|http://unitsofmeasure.org|mg"}}
		check(t, "POST "+form.Encode(), h.searchPost(t, "/Observation/_search", form.Encode()), idset("obs-mg-540"))
	})
	t.Run("POST _search repeated and comma-separated", func(t *testing.T) {
		check(t, "POST birthdate=ge1980&birthdate=lt1990", h.searchPost(t, "/Patient/_search", "birthdate=ge1980&birthdate=lt1990"), idset("pat-muller", "pat-muller2"))
		check(t, "POST family=smith,garcia", h.searchPost(t, "/Patient/_search", "family=smith%2Cgarcia"), idset("pat-smith", "pat-smithson", "pat-garcia"))
	})
	t.Run("one page when all fit", func(t *testing.T) {
		got := h.search(t, "/Patient?_count=100")
		if len(got.pages) != 1 || bundleLink(got.pages[0], "next") != "" {
			t.Errorf("%d pages, next link %q", len(got.pages), bundleLink(got.pages[0], "next"))
		}
	})
	t.Run("POST _search with a charset", func(t *testing.T) {
		r := h.with(t).do("POST", "/Patient/_search", []byte("family=m%C3%BCller"), "Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		check(t, "POST with charset", h.walk(t, r), idset("pat-muller", "pat-muller2"))
	})
	t.Run("POST _search without a Content-Type is a form", func(t *testing.T) {
		r := h.with(t).do("POST", "/Patient/_search", []byte("family=m%C3%BCller"), "Content-Type", "")
		check(t, "POST without Content-Type", h.walk(t, r), idset("pat-muller", "pat-muller2"))
	})
	t.Run("POST _search pages through GET links", func(t *testing.T) {
		got := h.searchPost(t, "/Observation/_search", "code=http://loinc.org|2345-7&_count=1")
		check(t, "POST code, _count=1", got, glucose)
		if len(got.pages) != 4 {
			t.Errorf("%d pages, want 4", len(got.pages))
		}
	})
	t.Run("system GET _type", func(t *testing.T) {
		check(t, "_type + _tag", h.search(t, "?_type=Patient,Organization&_tag=http://example.org/tags|vip"), idset("pat-muller", "org-acme"))
		check(t, "_type + common parameter name", h.search(t, "?_type=Patient,Organization&name=acme"), idset("org-acme"))
		check(t, "_type + _id", h.search(t, "?_type=Patient,Observation&_id=pat-smith,obs-bp,org-acme"), idset("pat-smith", "obs-bp"))
	})
	t.Run("system GET without _type", func(t *testing.T) {
		check(t, "_tag over all types", h.search(t, "?_tag=http://example.org/tags|vip"), idset("pat-muller", "org-acme"))
		check(t, "_id over all types", h.search(t, "?_id=pat-smith,obs-bp,org-acme"), idset("pat-smith", "obs-bp", "org-acme"))
	})
	t.Run("system POST _search", func(t *testing.T) {
		check(t, "POST /_search", h.searchPost(t, "/_search", "_type=Observation,Condition&_id=obs-bp,cond-active,pat-muller"), idset("obs-bp", "cond-active"))
	})
	t.Run("system search with _include", func(t *testing.T) {
		got := h.search(t, "?_type=Observation&_id=obs-mg-540&_include=Observation:subject")
		check(t, "matches", got, idset("obs-mg-540"))
		expectIDs(t, "included", got.included, idset("pat-muller"))
	})
	t.Run("compartment search with _include", func(t *testing.T) {
		got := h.search(t, "/Patient/pat-muller/Observation?_include=Observation:encounter")
		check(t, "matches", got, idset("obs-mg-540", "obs-g"))
		expectIDs(t, "included", got.included, idset("enc-1"))
	})
	t.Run("types of a system search", func(t *testing.T) {
		got := h.search(t, "?_type=Patient,Organization&_tag=http://example.org/tags|vip")
		for _, p := range got.pages {
			for _, e := range pageEntries(p) {
				if rt := e["resource"].(map[string]any)["resourceType"]; rt != "Patient" && rt != "Organization" {
					t.Errorf("a %v in a search of _type=Patient,Organization", rt)
				}
			}
		}
	})
}

func TestCompartmentSearch(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/Patient/pat-muller/Observation", idset("obs-mg-540", "obs-g")},
		{"/Patient/pat-muller/Observation?date=2020-01", idset("obs-mg-540")},
		{"/Patient/pat-muller/Observation?_count=1", idset("obs-mg-540", "obs-g")},
		{"/Patient/pat-muller/Observation?code=http://loinc.org|8867-4", nil}, // obs-logical refers by identifier only
		{"/Patient/pat-smith/Observation", idset("obs-mg-546", "obs-bp")},
		{"/Patient/pat-garcia/Observation", idset("obs-abs")}, // an absolute reference to this server
		{"/Patient/pat-muller/Encounter", idset("enc-1")},
		{"/Patient/pat-muller/Condition", idset("cond-active")},
		{"/Patient/pat-smith/Provenance", idset("prov-2")},
		{"/Patient/pat-muller/Patient", idset("pat-muller")},
	})
}

// All nine prefixes on dates, with the ranges of partial dates: the
// stored value is a range (1980 is all of 1980) and so is the query value.
func TestSearchDatePrefixes(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/Patient?birthdate=1980", idset("pat-muller", "pat-muller2")},
		{"/Patient?birthdate=eq1980", idset("pat-muller", "pat-muller2")},
		{"/Patient?birthdate=1980-05", idset("pat-muller")},
		{"/Patient?birthdate=1980-05-14", idset("pat-muller")},
		{"/Patient?birthdate=1965", idset("pat-mueller")},
		{"/Patient?birthdate=1965-12-25", nil}, // December 1965 is not within that day
		{"/Patient?birthdate=2000-02-29", nil}, // a valid day, nobody born on it
		{"/Patient?birthdate=ne1980&birthdate:missing=false", idset("pat-mueller", "pat-smith", "pat-garcia")},
		{"/Patient?birthdate=gt1980", idset("pat-smith", "pat-garcia")},
		{"/Patient?birthdate=lt1980", idset("pat-mueller")},
		{"/Patient?birthdate=ge1980", idset("pat-muller", "pat-muller2", "pat-smith", "pat-garcia")},
		{"/Patient?birthdate=le1980", idset("pat-mueller", "pat-muller", "pat-muller2")},
		{"/Patient?birthdate=sa1980", idset("pat-smith", "pat-garcia")},
		{"/Patient?birthdate=eb1980", idset("pat-mueller")},
		{"/Patient?birthdate=ap1980", idset("pat-muller", "pat-muller2")},
		// The year 1980 extends past 1980-05-14 on both sides.
		{"/Patient?birthdate=gt1980-05-14", idset("pat-muller2", "pat-smith", "pat-garcia")},
		{"/Patient?birthdate=lt1980-05-14", idset("pat-muller2", "pat-mueller")},
		{"/Patient?birthdate=sa1980-05-14", idset("pat-smith", "pat-garcia")},
		{"/Patient?birthdate=eb1980-05-14", idset("pat-mueller")},
		{"/Patient?birthdate=ge1990-01-01", idset("pat-smith", "pat-garcia")},
		{"/Patient?birthdate=le1990-01-01", idset("pat-mueller", "pat-muller", "pat-muller2", "pat-smith")},
		// Repeated parameters are ANDed: a range.
		{"/Patient?birthdate=ge1980&birthdate=lt1990", idset("pat-muller", "pat-muller2")},
		// Comma-separated values are ORed.
		{"/Patient?birthdate=1965,2001", idset("pat-mueller", "pat-garcia")},
	})
}

// Instants with offsets compare in UTC; Periods are ranges, open ends
// unbounded.
func TestSearchDateTimesAndPeriods(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/Observation?date=2020-01-01T08:00:00Z", idset("obs-mg-540")},
		{"/Observation?date=2020-01-01T10:00:00%2B02:00", idset("obs-mg-540")},
		// An unescaped + arrives as a space; the offset must still be read.
		{"/Observation?date=2020-01-01T10:00:00+02:00", idset("obs-mg-540")},
		{"/Observation?date=2020-01-01T03:00:00-05:00", idset("obs-mg-540")},
		{"/Observation?date=2020-01-01T10:00:00Z", nil},
		{"/Observation?date=2021-01-01T12:00:00Z", idset("obs-bp")},
		{"/Observation?date=2020-01", idset("obs-mg-540", "obs-mg-535")},
		{"/Observation?date=2020", glucose},
		// The Period 2020-02-01..10 lies within February but not within one day of it.
		{"/Observation?date=2020-02", idset("obs-mg-546")},
		{"/Observation?date=2020-02-05", nil},
		{"/Observation?date=ne2020", idset("obs-open", "obs-openstart", "obs-bp", "obs-logical", "obs-abs")},
		{"/Observation?date=gt2022-01-01", idset("obs-open", "obs-logical", "obs-abs")},
		{"/Observation?date=ge2021-06-01", idset("obs-open", "obs-logical", "obs-abs")},
		{"/Observation?date=lt2019-12-31", idset("obs-openstart")},
		{"/Observation?date=le2019-03-01", idset("obs-openstart")},
		{"/Observation?date=sa2021-05-31", idset("obs-open", "obs-logical", "obs-abs")},
		{"/Observation?date=eb2020-01-01", idset("obs-openstart")},
		// Open ends reach forever.
		{"/Observation?date=gt2030-01-01", idset("obs-open")},
		{"/Observation?date=lt1900-01-01", idset("obs-openstart")},
		{"/Encounter?date=2020-01-01", idset("enc-1")},
		{"/Encounter?date=2020-01-01T10:00:00Z", nil}, // two hours are not within one second
		{"/Encounter?date=ap2020-01-01T10:00:00Z", idset("enc-1")},
		{"/Encounter?date=ne2020-01-01", idset("enc-2")},
		{"/Encounter?date=gt2030-01-01", idset("enc-2")},
		{"/Encounter?date=sa2020-01-01", idset("enc-2")},
		{"/Encounter?date=eb2021-01-01", idset("enc-1")},
		// _lastUpdated is a date parameter too (vs-456 was written in March).
		{"/ValueSet?_lastUpdated=2024-01-10", idset("vs-123", "vs-other")},
		{"/ValueSet?_lastUpdated=lt2024-02", idset("vs-123", "vs-other")},
		{"/ValueSet?_lastUpdated=ge2024-03-10", idset("vs-456")},
		{"/ValueSet?_lastUpdated=2024-03-10T01:00:00%2B01:00", idset("vs-456")},
	})
}

// A backslash escapes a comma inside a value (R4 search, escaping).
func TestSearchEscapedComma(t *testing.T) {
	h := newHarness(t)
	for _, o := range [][2]string{{"org-sj", "Smith, Jones & Co"}, {"org-j", "Jones Ltd"}} {
		id, name := o[0], o[1]
		body := `{"resourceType":"Organization","id":"` + id + `","name":"` + name + `"}`
		if r := h.with(t).do("PUT", "/Organization/"+id, []byte(body)); r.status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", id, r.status, r.body)
		}
	}
	runSearchCases(t, h, []searchCase{
		{"/Organization?name:exact=Smith%5C,%20Jones%20%26%20Co", idset("org-sj")},
		{"/Organization?name=smith%5C,%20jones", idset("org-sj")},
		{"/Organization?name:exact=Smith,Jones%20Ltd", idset("org-j")},
		{"/Organization?name=jones", idset("org-j")},
		{"/Organization?name=jones,smith", idset("org-j", "org-sj")},
	})
}

// An offset can move an instant to another UTC day.
func TestSearchDateOffsetsAcrossMidnight(t *testing.T) {
	h := newHarness(t)
	for _, o := range [][2]string{{"late", "2020-01-01T23:30:00-05:00"}, {"early", "2020-01-02T01:00:00+03:00"}} {
		id, when := o[0], o[1]
		body := `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"x"},"effectiveDateTime":"` + when + `"}`
		if r := h.with(t).do("PUT", "/Observation/"+id, []byte(body)); r.status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", id, r.status, r.body)
		}
	}
	// late is 2020-01-02T04:30:00Z; early is 2020-01-01T22:00:00Z.
	runSearchCases(t, h, []searchCase{
		{"/Observation?date=2020-01-02T04:30:00Z", idset("late")},
		{"/Observation?date=2020-01-01T22:00:00Z", idset("early")},
		{"/Observation?date=2020-01-01T23:30:00-05:00", idset("late")},
		{"/Observation?date=lt2020-01-02T00:00:00Z", idset("early")},
		{"/Observation?date=ge2020-01-02T00:00:00Z", idset("late")},
		{"/Observation?date=sa2020-01-01T23:59:59%2B01:00", idset("late")},
		{"/Observation?date=eb2020-01-01T23:00:00Z", idset("early")},
	})
	if got := h.search(t, "/Observation?_sort=date").matches; !slices.Equal(got, idset("early", "late")) {
		t.Errorf("_sort=date: %v, want [early late]", got)
	}
}

// Numbers carry their implicit precision for eq, ne and ap (5.4 is
// [5.35, 5.45)); the other prefixes use the exact value. Quantities
// compare across UCUM units.
func TestSearchQuantities(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/Observation?value-quantity=5.4", idset("obs-mg-540", "obs-mg-535")},
		{"/Observation?value-quantity=eq5.4", idset("obs-mg-540", "obs-mg-535")},
		{"/Observation?value-quantity=5.40", idset("obs-mg-540")},
		{"/Observation?value-quantity=ne5.4&value-quantity:missing=false", idset("obs-mg-546", "obs-g", "obs-open", "obs-logical", "obs-abs")},
		{"/Observation?value-quantity=gt5.4", idset("obs-mg-546", "obs-open", "obs-logical", "obs-abs")},
		{"/Observation?value-quantity=lt5.4", idset("obs-mg-535", "obs-g")},
		{"/Observation?value-quantity=ge5.4", idset("obs-mg-540", "obs-mg-546", "obs-open", "obs-logical", "obs-abs")},
		{"/Observation?value-quantity=le5.35", idset("obs-mg-535", "obs-g")},
		{"/Observation?value-quantity=sa5.4", idset("obs-mg-546", "obs-open", "obs-logical", "obs-abs")},
		{"/Observation?value-quantity=eb5.4", idset("obs-mg-535", "obs-g")},
		{"/Observation?value-quantity=ap5.4", idset("obs-mg-540", "obs-mg-535", "obs-mg-546")},
		{"/Observation?value-quantity=5.4|http://unitsofmeasure.org|mg", idset("obs-mg-540", "obs-mg-535")},
		{"/Observation?value-quantity=5.4||mg", idset("obs-mg-540", "obs-mg-535")},
		{"/Observation?value-quantity=5.4|http://unitsofmeasure.org|g", nil},
		// UCUM: 0.00540 g is 5.40 mg; 12 mg is 0.012 g.
		{"/Observation?value-quantity=0.00540|http://unitsofmeasure.org|g", idset("obs-mg-540")},
		{"/Observation?value-quantity=12|http://unitsofmeasure.org|mg", idset("obs-g")},
		{"/Observation?value-quantity=gt0.005|http://unitsofmeasure.org|g", glucose},
		{"/Observation?value-quantity=lt10|http://unitsofmeasure.org|mg", idset("obs-mg-540", "obs-mg-535", "obs-mg-546")},
		{"/Observation?value-quantity=72||/min", idset("obs-open")},
		// Without a system the code may match Quantity.unit too.
		{"/Observation?value-quantity=72||beats/minute", idset("obs-open")},
		// The specification's own example: 1e2 is [95, 105); so 6e1 is [55, 65).
		{"/Observation?value-quantity=6e1", idset("obs-logical")},
		{"/Observation?value-quantity=lt70|http://unitsofmeasure.org|/min", idset("obs-logical", "obs-abs")},
		{"/Observation?value-quantity:missing=true", idset("obs-openstart", "obs-bp")},
		// Components are searched by their own parameters, not value-quantity.
		{"/Observation?value-quantity=120", nil},
		{"/Observation?component-value-quantity=gt100", idset("obs-bp")},
		{"/Observation?component-value-quantity=80", idset("obs-bp")},
		{"/Observation?component-value-quantity=lt50", nil},
		{"/Observation?component-code=http://loinc.org|8462-4", idset("obs-bp")},
		{"/Observation?component-code-value-quantity=http://loinc.org|8480-6$gt110", idset("obs-bp")},
		{"/Observation?component-code-value-quantity=http://loinc.org|8462-4$gt110", nil},
		{"/Observation?component-code-value-quantity=http%3A%2F%2Floinc.org%7C8480-6%24gt110", idset("obs-bp")},
		{"/Observation?code-value-quantity=http://loinc.org|2345-7$gt5.4", idset("obs-mg-546")},
		// Each value pairs a code with a value: (2345-7 and 72) or (8867-4
		// and < 10) matches neither the glucose results (< 10, but 2345-7)
		// nor the heart rate (8867-4, but 72).
		{"/Observation?code-value-quantity=http://loinc.org|2345-7$gt5.4,http://loinc.org|8867-4$72", idset("obs-mg-546", "obs-open")},
		{"/Observation?code-value-quantity=http://loinc.org|2345-7$72,http://loinc.org|8867-4$lt10", nil},
		{"/Observation?code-value-quantity=8867-4$72||/min", idset("obs-open")},
		{"/Observation?code-value-quantity:missing=true", idset("obs-openstart", "obs-bp")},
		{"/Observation?code-value-quantity:missing=true,false", idset("obs-mg-540", "obs-mg-535", "obs-mg-546", "obs-g", "obs-open", "obs-openstart", "obs-bp", "obs-logical", "obs-abs")},
		// combo-* search the Observation's own value and its components'.
		{"/Observation?combo-code=http://loinc.org|8462-4", idset("obs-bp")},
		{"/Observation?combo-code=http://loinc.org|85354-9", idset("obs-bp")},
		{"/Observation?combo-code=http://loinc.org|2345-7", glucose},
		{"/Observation?combo-code:not=http://loinc.org|8462-4", idset("obs-mg-540", "obs-mg-535", "obs-mg-546", "obs-g", "obs-open", "obs-openstart", "obs-logical", "obs-abs")},
		{"/Observation?combo-code:missing=true", nil},
		{"/Observation?combo-value-quantity=gt100", idset("obs-bp")},
		{"/Observation?combo-value-quantity=5.4||mg", idset("obs-mg-540", "obs-mg-535")},
		{"/Observation?combo-value-quantity:missing=true", idset("obs-openstart")},
		{"/Observation?combo-code-value-quantity=http://loinc.org|8480-6$gt110", idset("obs-bp")},
		{"/Observation?combo-code-value-quantity=http://loinc.org|2345-7$gt5.4", idset("obs-mg-546")},
	})
}

// Strings match case- and accent-insensitively from the start; :exact
// compares the whole string as written, :contains anywhere.
func TestSearchStrings(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/Patient?family=muller", idset("pat-muller", "pat-muller2")},
		{"/Patient?family=MULLER", idset("pat-muller", "pat-muller2")},
		{"/Patient?family=m%C3%BCller", idset("pat-muller", "pat-muller2")},
		{"/Patient?family=M%C3%9CLLER", idset("pat-muller", "pat-muller2")},
		{"/Patient?family=mul", idset("pat-muller", "pat-muller2")},
		{"/Patient?family=mue", idset("pat-mueller")},
		{"/Patient?family=ller", nil},
		{"/Patient?family=smith", idset("pat-smith", "pat-smithson")},
		{"/Patient?family=garcia", idset("pat-garcia")},
		{"/Patient?name=jose", idset("pat-garcia")},
		{"/Patient?name=hans", idset("pat-muller")},
		{"/Patient?given=ANNA", idset("pat-muller2")},
		{"/Patient?family:exact=M%C3%BCller", idset("pat-muller")},
		{"/Patient?family:exact=Muller", idset("pat-muller2")},
		{"/Patient?family:exact=muller", nil},
		{"/Patient?family:exact=Smith", idset("pat-smith")},
		{"/Patient?name:exact=Hans", idset("pat-muller")},
		{"/Patient?given:exact=hans", nil},
		{"/Patient?family:missing=true", nil},
		{"/Patient?family:contains=ulle", idset("pat-muller", "pat-muller2")},
		{"/Patient?family:contains=eller", idset("pat-mueller")},
		{"/Patient?family:contains=%C3%BCll", idset("pat-muller", "pat-muller2")},
		{"/Patient?family:exact=Garcia", nil},
		{"/Patient?given:exact=Jos%C3%A9", idset("pat-garcia")},
		{"/Patient?family:contains=ith", idset("pat-smith", "pat-smithson")},
		{"/Patient?family=smith,garcia", idset("pat-smith", "pat-smithson", "pat-garcia")},
		{"/Patient?family=smith&given=john", idset("pat-smith")},
		{"/Patient?given=hans&given=anna", nil},
		{"/Patient?family=mul&gender=female", idset("pat-muller2")},
		{"/Organization?name=acme", idset("org-acme")},
		{"/Organization?name=health", nil},
		{"/Organization?name:contains=health", idset("org-acme")},
	})
}

func TestSearchTokens(t *testing.T) {
	h, _ := newSearchHarness(t)
	const mr, dl = "http://terminology.hl7.org/CodeSystem/v2-0203|MR", "http://terminology.hl7.org/CodeSystem/v2-0203|DL"
	const clinical = "http://terminology.hl7.org/CodeSystem/condition-clinical"
	const confidentiality = "http://terminology.hl7.org/ValueSet/v3-ConfidentialityClassification"
	runSearchCases(t, h, []searchCase{
		{"/Patient?gender=male", idset("pat-muller", "pat-mueller", "pat-smith")},
		{"/Patient?gender=http://hl7.org/fhir/administrative-gender|female", idset("pat-muller2", "pat-garcia")},
		// administrative-gender is case-sensitive.
		{"/Patient?gender=MALE", nil},
		{"/Patient?gender=male,female", idset("pat-muller", "pat-muller2", "pat-mueller", "pat-smith", "pat-garcia")},
		// :not includes the resources without any value.
		{"/Patient?gender:not=male", idset("pat-muller2", "pat-garcia", "pat-smithson")},
		{"/Patient?gender:missing=true", idset("pat-smithson")},
		{"/Patient?birthdate:missing=true", idset("pat-smithson")},
		{"/Patient?birthdate:missing=false", idset("pat-muller", "pat-muller2", "pat-mueller", "pat-smith", "pat-garcia")},
		{"/Patient?organization:missing=true", idset("pat-mueller", "pat-smithson", "pat-garcia")},
		{"/Patient?active=true", idset("pat-muller", "pat-smith")},
		{"/Patient?active=false", nil},
		{"/Patient?active:missing=true", idset("pat-muller2", "pat-mueller", "pat-smithson", "pat-garcia")},
		// Clients may percent-encode everything.
		{"/Observation?code=http%3A%2F%2Floinc.org%7C2345-7", glucose},
		{"/Patient?identifier=MRN-1001", idset("pat-muller", "pat-muller2")},
		{"/Patient?identifier=urn:oid:1.2.36.146.595.217.0.1|MRN-1001", idset("pat-muller")},
		{"/Patient?identifier=urn:oid:1.2.36.146.595.217.0.1|", idset("pat-muller", "pat-muller2")},
		{"/Patient?identifier=MRN-100", nil},
		{"/Patient?identifier:of-type=" + mr + "|MRN-1001", idset("pat-muller")},
		{"/Patient?identifier:of-type=" + dl + "|MRN-1001", idset("pat-muller2")},
		{"/Patient?identifier:of-type=" + mr + "|MRN-2002", idset("pat-muller2")},
		{"/Observation?code=http://loinc.org|2345-7", glucose},
		{"/Observation?code=2345-7", glucose},
		{"/Observation?code=|2345-7", nil},
		{"/Observation?code:text=glucose", glucose},
		{"/Observation?code:text=blood", idset("obs-bp")},
		{"/Observation?code:not=http://loinc.org|2345-7", idset("obs-open", "obs-openstart", "obs-bp", "obs-logical", "obs-abs")},
		// system| is any code of the system; under :not every value must fail.
		{"/Observation?code=http://loinc.org|", idset("obs-mg-540", "obs-mg-535", "obs-mg-546", "obs-g", "obs-open", "obs-openstart", "obs-bp", "obs-logical", "obs-abs")},
		{"/Observation?code=http://snomed.info/sct|", nil},
		{"/Observation?code:not=http://loinc.org|", nil},
		{"/Observation?code:not=http://snomed.info/sct|,http://loinc.org|2345-7", idset("obs-open", "obs-openstart", "obs-bp", "obs-logical", "obs-abs")},
		{"/Observation?subject:identifier=urn:oid:1.2.36.146.595.217.0.1|", idset("obs-logical")},
		{"/Observation?status=final,amended", idset("obs-mg-540", "obs-mg-535", "obs-g", "obs-open", "obs-logical", "obs-abs")},
		{"/Observation?status:not=final", idset("obs-mg-535", "obs-mg-546", "obs-openstart", "obs-bp")},
		// detectedissue-status holds preliminary, final and entered-in-error.
		{"/Observation?status:in=http://hl7.org/fhir/ValueSet/detectedissue-status", idset("obs-mg-540", "obs-mg-546", "obs-g", "obs-open", "obs-logical", "obs-abs")},
		{"/Observation?status:not-in=http://hl7.org/fhir/ValueSet/detectedissue-status", idset("obs-mg-535", "obs-openstart", "obs-bp")},
		// In observation-status, corrected is below amended.
		{"/Observation?status:below=http://hl7.org/fhir/observation-status|amended", idset("obs-mg-535", "obs-bp")},
		{"/Patient?gender:in=http://hl7.org/fhir/ValueSet/administrative-gender", idset("pat-muller", "pat-muller2", "pat-mueller", "pat-smith", "pat-garcia")},
		{"/Patient?gender:not-in=http://hl7.org/fhir/ValueSet/administrative-gender&gender:missing=false", nil},
		// condition-clinical: active > {recurrence, relapse}; inactive > {remission, resolved}.
		{"/Condition?clinical-status=" + clinical + "|active", idset("cond-active")},
		{"/Condition?clinical-status:below=" + clinical + "|active", idset("cond-active", "cond-relapse")},
		{"/Condition?clinical-status:below=" + clinical + "|inactive", idset("cond-resolved")},
		{"/Condition?clinical-status:above=" + clinical + "|relapse", idset("cond-active", "cond-relapse")},
		{"/Condition?clinical-status:above=" + clinical + "|active", idset("cond-active")},
		// v3-Confidentiality: R and N are below _Confidentiality.
		{"/Patient?_security:below=http://terminology.hl7.org/CodeSystem/v3-Confidentiality|_Confidentiality", idset("pat-muller", "pat-smith")},
		{"/Patient?_security:in=" + confidentiality, idset("pat-muller", "pat-smith")},
		{"/Patient?_security:not-in=" + confidentiality + "&_security:missing=false", idset("pat-muller2")},
	})
}

func TestSearchURIsAndMeta(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/ValueSet?url=http://acme.org/fhir/ValueSet/123", idset("vs-123")},
		{"/ValueSet?url=http://acme.org/fhir", nil},
		{"/ValueSet?url:below=http://acme.org/fhir/", idset("vs-123", "vs-456")},
		{"/ValueSet?url:below=http://acme.org/fhir/ValueSet", idset("vs-123", "vs-456")},
		// :below follows path segments, not characters.
		{"/ValueSet?url:below=http://acme.org/fhir/Value", nil},
		{"/ValueSet?url:below=http://acme.org/fhir/ValueSet/12", nil},
		{"/ValueSet?url:below=http://acme.org/fhir/ValueSet/123", idset("vs-123")},
		{"/ValueSet?url:above=http://acme.org/fhir/ValueSet/123/_history/5", idset("vs-123")},
		{"/ValueSet?url:missing=false", idset("vs-123", "vs-456", "vs-other")},
		{"/Patient?_id=pat-muller,pat-smith", idset("pat-muller", "pat-smith")},
		{"/Patient?_id=obs-bp", nil},
		{"/Patient?_tag=http://example.org/tags|vip", idset("pat-muller")},
		{"/Patient?_tag=vip", idset("pat-muller")},
		{"/Patient?_tag:not=http://example.org/tags|vip", idset("pat-muller2", "pat-mueller", "pat-smith", "pat-smithson", "pat-garcia")},
		{"/Patient?_profile=http://example.org/fhir/StructureDefinition/kiln-patient", idset("pat-muller")},
		{"/Patient?_security=http://terminology.hl7.org/CodeSystem/v3-Confidentiality|R", idset("pat-muller")},
		{"/Patient?_source=http://example.org/source/lab", idset("pat-smith")},
		{"/Patient?_source=http://example.org/source", nil},
	})
}

func TestSearchReferences(t *testing.T) {
	h, _ := newSearchHarness(t)
	runSearchCases(t, h, []searchCase{
		{"/Observation?subject=Patient/pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?patient=pat-muller", idset("obs-mg-540", "obs-g")}, // patient targets Patient only
		{"/Observation?subject={{BASE}}/Patient/pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?subject:Patient=pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?subject:Group=grp-1", idset("obs-open")},
		{"/Observation?subject=Group/grp-1", idset("obs-open")},
		{"/Observation?subject:Patient=grp-1", nil},
		// A bare id on a parameter with several target types finds any of them.
		{"/Observation?subject=pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?subject=grp-1", idset("obs-open")},
		{"/Observation?subject=pat-garcia", idset("obs-abs")},
		{"/Observation?subject=pat-muller,grp-1", idset("obs-mg-540", "obs-g", "obs-open")},
		{"/Observation?subject=Patient/pat-muller,Patient/pat-smith", idset("obs-mg-540", "obs-g", "obs-mg-546", "obs-bp")},
		// obs-abs refers to pat-garcia by this server's absolute URL.
		{"/Observation?subject=Patient/pat-garcia", idset("obs-abs")},
		{"/Observation?patient=pat-garcia", idset("obs-abs")},
		{"/Observation?subject:identifier=urn:oid:1.2.36.146.595.217.0.1|MRN-1001", idset("obs-logical")},
		{"/Observation?encounter=Encounter/enc-1", idset("obs-mg-540")},
		{"/Observation?encounter:missing=false", idset("obs-mg-540")},
		{"/Patient?organization=Organization/org-acme", idset("pat-muller2")},
		{"/Organization?partof=org-acme", idset("org-clinic")},
		// Chains.
		{"/Observation?subject:Patient.organization.name=acme", idset("obs-mg-535")},
		{"/Observation?subject:Patient.organization.partof.name=acme", idset("obs-mg-540", "obs-g")},
		{"/Observation?patient._id=pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?subject:Patient._id=pat-muller2", idset("obs-mg-535")},
		{"/Observation?patient.family=muller", idset("obs-mg-540", "obs-g", "obs-mg-535")},
		{"/Observation?patient.gender:not=male", idset("obs-mg-535", "obs-abs")},
		{"/Observation?patient.identifier=urn:oid:1.2.36.146.595.217.0.1|MRN-2002", idset("obs-mg-535")},
		{"/Observation?encounter.service-provider.name=north", idset("obs-mg-540")},
		{"/Encounter?service-provider:Organization.name=north", idset("enc-1")},
		{"/Patient?organization.partof.name=acme", idset("pat-muller")},
		// Reverse chains.
		{"/Patient?_has:Observation:patient:code=http://loinc.org|85354-9", idset("pat-smith")},
		{"/Patient?_has:Observation:subject:status=amended", idset("pat-muller2")},
		{"/Patient?_has:Observation:patient:code=http://loinc.org|2345-7", idset("pat-muller", "pat-muller2", "pat-smith")},
		{"/Patient?_has:Condition:subject:clinical-status=http://terminology.hl7.org/CodeSystem/condition-clinical|active", idset("pat-muller")},
		{"/Patient?_has:Observation:patient:code=http://loinc.org|2345-7&_has:Condition:subject:clinical-status=http://terminology.hl7.org/CodeSystem/condition-clinical|relapse", idset("pat-smith")},
		{"/Organization?_has:Patient:organization:gender=female", idset("org-acme")},
		{"/Organization?_has:Patient:organization:_has:Observation:patient:code=http://loinc.org|85354-9", idset("org-other")},
		{"/Observation?_has:Provenance:target:agent=Organization/org-clinic", idset("obs-mg-540")},
	})
}

// A bare id names a resource of any of the parameter's target types; when
// resources of two of them have that id, the search cannot tell which is
// meant and is refused, naming both.
func TestSearchAmbiguousBareID(t *testing.T) {
	h, _ := newSearchHarness(t)
	hn := h.with(t)
	grp := `{"resourceType":"Group","id":"pat-muller","type":"person","actual":true}`
	if r := hn.do("PUT", "/Group/pat-muller", []byte(grp)); r.status != http.StatusCreated {
		t.Fatalf("PUT Group/pat-muller: %d %s", r.status, r.body)
	}
	r := hn.do("GET", "/Observation?subject=pat-muller", nil)
	expectOutcome(t, r, http.StatusBadRequest, "subject")
	if !bytes.Contains(r.body, []byte("Patient/pat-muller")) || !bytes.Contains(r.body, []byte("Group/pat-muller")) {
		t.Errorf("the refusal does not name both resources: %s", r.body)
	}
	// The typed forms, and a parameter with one target type, are not ambiguous.
	runSearchCases(t, h, []searchCase{
		{"/Observation?subject=Patient/pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?subject:Patient=pat-muller", idset("obs-mg-540", "obs-g")},
		{"/Observation?patient=pat-muller", idset("obs-mg-540", "obs-g")},
	})
	// So are chains and _has that end in the bare id.
	expectOutcome(t, hn.do("GET", "/DiagnosticReport?result.subject=pat-muller", nil), http.StatusBadRequest, "subject")
	expectOutcome(t, hn.do("GET", "/Patient?_has:Observation:subject:subject=pat-muller", nil), http.StatusBadRequest, "subject")
	// Conditional criteria are refused alike.
	expectOutcome(t, hn.do("DELETE", "/Observation?subject=pat-muller", nil), http.StatusBadRequest, "subject")
	// Once one of the two is deleted, the id is no longer ambiguous.
	if r := hn.do("DELETE", "/Group/pat-muller", nil); r.status >= 300 {
		t.Fatalf("DELETE Group/pat-muller: %d %s", r.status, r.body)
	}
	runSearchCases(t, h, []searchCase{{"/Observation?subject=pat-muller", idset("obs-mg-540", "obs-g")}})
}

// Searches see current versions only.
func TestSearchSeesCurrentVersionsOnly(t *testing.T) {
	h := newHarness(t)
	put := func(path, body string, want int) {
		t.Helper()
		if r := h.with(t).do("PUT", path, []byte(body)); r.status != want {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
	}
	put("/Patient/upd", `{"resourceType":"Patient","id":"upd","name":[{"family":"Before"}],"birthDate":"1970-01-01"}`, http.StatusCreated)
	put("/Observation/upd-obs", `{"resourceType":"Observation","id":"upd-obs","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/upd"}}`, http.StatusCreated)
	expectIDs(t, "before update", h.search(t, "/Patient?family=before").matches, idset("upd"))

	put("/Patient/upd", `{"resourceType":"Patient","id":"upd","name":[{"family":"After"}],"birthDate":"1971-01-01"}`, http.StatusOK)
	for _, tc := range []searchCase{
		{"/Patient?family=before", nil},
		{"/Patient?birthdate=1970", nil},
		{"/Patient?family=after", idset("upd")},
		{"/Patient?birthdate=1971", idset("upd")},
		{"/Observation?patient.family=before", nil},
		{"/Observation?patient.family=after", idset("upd-obs")},
	} {
		expectIDs(t, "after update: "+tc.query, h.search(t, tc.query).matches, tc.want)
	}

	if r := h.with(t).do("DELETE", "/Patient/upd", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, q := range []string{"/Patient?family=after", "/Patient?_id=upd", "/Patient", "/Observation?patient.family=after", "/Patient?_has:Observation:patient:status=final"} {
		expectIDs(t, "after delete: "+q, h.search(t, q).matches, nil)
	}
	inc := h.search(t, "/Observation?_id=upd-obs&_include=Observation:subject")
	expectIDs(t, "_include of a deleted resource", inc.included, nil)
}

// :text is a string search on CodeableConcept.text and on each
// Coding.display, each on its own (R4 search.html, token :text: "either in
// the text, or a display"); a concept with only a text is present for
// :missing.
func TestSearchTokenTextAndDisplay(t *testing.T) {
	h := newHarness(t)
	condition := func(code string) []byte {
		return []byte(`{"resourceType":"Condition","subject":{"reference":"Patient/x"},"code":` + code + `}`)
	}
	textOnly := h.create(t, "Condition", condition(`{"text":"Headache"}`))
	both := h.create(t, "Condition", condition(`{"coding":[{"system":"http://snomed.info/sct","code":"25064002","display":"Headache"}],"text":"Pain in head"}`))
	display := h.create(t, "Condition", condition(`{"coding":[{"system":"http://snomed.info/sct","code":"25064002","display":"Headache"}]}`))
	none := h.create(t, "Condition", []byte(`{"resourceType":"Condition","subject":{"reference":"Patient/x"}}`))
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"code:text=headache", []string{textOnly, both, display}},
		{"code:text=pain", []string{both}},
		{"code:text=head", []string{textOnly, both, display}},
		{"code:text=in%20head", nil},
		{"code:missing=true", []string{none}},
		{"code:missing=false", []string{textOnly, both, display}},
	} {
		expectIDs(t, "Condition?"+tt.query, h.matchIDs(t, "Condition", tt.query), tt.want)
	}
}

// A Quantity's comparator is a range open on one side, and < and > leave
// the value itself out (R4 search.html, prefixes against a target
// range): "<100" is never ge100 and always ends before 100.
func TestSearchQuantityComparators(t *testing.T) {
	h := newHarness(t)
	obs := func(comparator string) string {
		return h.create(t, "Observation", []byte(`{"resourceType":"Observation","status":"final","code":{"text":"dose"},"valueQuantity":{"value":100,"comparator":"`+
			comparator+`","system":"http://unitsofmeasure.org","code":"mg"}}`))
	}
	below, above, atMost, atLeast := obs("<"), obs(">"), obs("<="), obs(">=")
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"ge", []string{above, atMost, atLeast}},
		{"le", []string{below, atMost, atLeast}},
		{"gt", []string{above, atLeast}},
		{"lt", []string{below, atMost}},
		{"sa", []string{above}},
		{"eb", []string{below}},
	} {
		for _, unit := range []string{"|http://unitsofmeasure.org|mg", ""} {
			q := "value-quantity=" + tt.prefix + "100" + url.QueryEscape(unit)
			expectIDs(t, "Observation?"+q+" (<"+below+" >"+above+" <="+atMost+" >="+atLeast+")", h.matchIDs(t, "Observation", q), tt.want)
		}
	}
	// 0.1 g is 100 mg: the canonical UCUM rows keep the open bound too.
	expectIDs(t, "ge0.1 g", h.matchIDs(t, "Observation", "value-quantity=ge0.1"+url.QueryEscape("|http://unitsofmeasure.org|g")), []string{above, atMost, atLeast})
}

// An absolute reference names a resource on the server of its URL: one to
// another server is not this server's resource of the same type and id
// (R4 search.html, reference: relative references resolve against this
// server's base), so it never matches, includes or joins a compartment
// with it; one under this server's base is local.
func TestSearchForeignAbsoluteReferences(t *testing.T) {
	h := newHarness(t)
	if r := h.do("PUT", "/Patient/p3", []byte(`{"resourceType":"Patient","id":"p3","name":[{"family":"Local"}]}`)); r.status != http.StatusCreated {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	const foreign = "http://other.example.org/fhir/Patient/p3"
	obs := func(ref string) string {
		return h.create(t, "Observation", []byte(`{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"`+ref+`"}}`))
	}
	remote, local, relative := obs(foreign), obs(h.base+"/Patient/p3"), obs("Patient/p3")
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"subject=Patient/p3", []string{local, relative}},
		{"subject=" + url.QueryEscape(h.base+"/Patient/p3"), []string{local, relative}},
		{"subject=p3", []string{local, relative}},
		{"subject=" + url.QueryEscape(foreign), []string{remote}},
		{"subject:Patient.family=local", []string{local, relative}},
	} {
		expectIDs(t, "Observation?"+tt.query+" (remote "+remote+")", h.matchIDs(t, "Observation", tt.query), tt.want)
	}
	r := h.do("GET", "/Patient/p3/Observation", nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), remote) || !strings.Contains(string(r.body), local) {
		t.Errorf("compartment of Patient/p3: %d, want %s and %s without %s: %.400s", r.status, local, relative, remote, r.body)
	}
	r = h.do("GET", "/Observation?_id="+remote+"&_include=Observation:subject", nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), `"Patient"`) {
		t.Errorf("_include of a foreign subject included a local Patient: %d %.400s", r.status, r.body)
	}
}

// A reference to a canonical resource may pin a version ("url|version",
// R4 search.html, references to canonical URLs): the url alone finds it
// whatever version it pins, and url|version only the references pinning
// that version.
func TestSearchCanonicalReferenceVersions(t *testing.T) {
	h := newHarness(t)
	const q = "http://example.org/Questionnaire/intake"
	answer := func(canonical string) string {
		return h.create(t, "QuestionnaireResponse", []byte(`{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"`+canonical+`"}`))
	}
	v1, bare, v2 := answer(q+"|1.0"), answer(q), answer(q+"|2.0")
	answer("http://example.org/Questionnaire/other|1.0")
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"questionnaire=" + q, []string{v1, bare, v2}},
		{"questionnaire=" + q + "|1.0", []string{v1}},
		{"questionnaire=" + url.QueryEscape(q+"|2.0"), []string{v2}},
		{"questionnaire=" + q + "|1.0," + q + "|2.0", []string{v1, v2}},
		{"questionnaire=" + q + "|3.0", nil},
	} {
		expectIDs(t, "QuestionnaireResponse?"+tt.query, h.matchIDs(t, "QuestionnaireResponse", tt.query), tt.want)
	}
}
