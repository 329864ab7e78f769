package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var searchTests = []test{
	{"Keys", testSearchKeys},
	{"Dates", testSearchDates},
	{"Numbers", testSearchNumbers},
	{"TypesAndTypedMatches", testSearchTypes},
	{"MissingChainsAndHas", testSearchReferences},
	{"ReturnsCurrentVersions", testSearchVersions},
	{"TombstonesAndUpdatesReplaceRows", testSearchUpdates},
	{"SortOrders", testSearchSort},
	{"PagingForwardAndBack", testSearchPaging},
	{"PagingStableWhileInserting", testSearchPagingStable},
	{"CountZeroAndTotals", testSearchTotals},
	{"Includes", testSearchIncludes},
	{"InsideTransactSeesOwnWrites", testSearchTransact},
	{"GarbageCursorIsErrBadCursor", testSearchBadCursor},
}

// The key separator of index rows (search.Entry.Keys).
const sep = "\x1f"

func day(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixMicro()
}

func year(y int) int64 { return day(y, 1, 1) }

var (
	minDate = search.MinTime.UnixMicro()
	maxDate = search.MaxTime.UnixMicro()
)

// sortRow is the sort row of a single value.
func sortRow(param string, v any) search.SortRow { return search.SortRow{Param: param, Lo: v, Hi: v} }

// indexed is version 1 of typ/id with rows (keys sorted, as MakeRows does).
func indexed(typ, id string, n int, rows search.Rows) store.Write {
	w := write(typ, id, 1, at(n))
	rows.Keys = slices.Sorted(slices.Values(rows.Keys))
	w.Index = &rows
	return w
}

// searchData is the fixture of the filter tests. Expected results in the
// tests follow from these rows and query.go alone.
func searchData() []store.Write {
	p5 := indexed("Patient", "p5", 5, search.Rows{Keys: []string{"family" + sep + "smith", "gender" + sep + "male"},
		Sorts: []search.SortRow{sortRow("family", "smith")}})
	p5del := tombstone("Patient", "p5", 2, at(50))
	return []store.Write{
		indexed("Patient", "p1", 1, search.Rows{
			Keys: []string{"family" + sep + "smith", "family:exact" + sep + "Smith", "gender" + sep + "male",
				"general-practitioner" + sep + "Practitioner/dr1", "general-practitioner" + sep + "dr1",
				"organization" + sep + "Organization/org1", "link" + sep + "Patient/p3"},
			Dates: []search.DateRow{{Param: "birthdate", Low: day(1980, 1, 1), High: day(1980, 1, 2)}},
			Sorts: []search.SortRow{{Param: "birthdate", Lo: day(1980, 1, 1), Hi: day(1980, 1, 2)}, sortRow("family", "smith")},
		}),
		indexed("Patient", "p2", 2, search.Rows{
			Keys:  []string{"family" + sep + "smithers", "family" + sep + "jones", "gender" + sep + "female", "organization" + sep + "Organization/org2"},
			Dates: []search.DateRow{{Param: "birthdate", Low: day(1990, 5, 1), High: day(1990, 5, 2)}},
			Sorts: []search.SortRow{{Param: "birthdate", Lo: day(1990, 5, 1), Hi: day(1990, 5, 2)}, {Param: "family", Lo: "jones", Hi: "smithers"}},
		}),
		indexed("Patient", "p3", 3, search.Rows{
			Keys:  []string{"family" + sep + "brown", "gender" + sep + "male"},
			Sorts: []search.SortRow{sortRow("family", "brown")},
		}),
		indexed("Patient", "p4", 4, search.Rows{
			Keys:  []string{"family" + sep + "smyth", "gender" + sep + "other"},
			Dates: []search.DateRow{{Param: "birthdate", Low: year(1980), High: year(1981)}},
			Sorts: []search.SortRow{{Param: "birthdate", Lo: year(1980), Hi: year(1981)}, sortRow("family", "smyth")},
		}),
		p5,
		p5del,
		indexed("Patient", "p6", 6, search.Rows{
			Keys:  []string{"family" + sep + "éclair", "gender" + sep + "female"},
			Sorts: []search.SortRow{sortRow("family", "éclair")},
		}),
		indexed("Observation", "o1", 7, obsRows("p1", "1234", []search.NumberRow{{Param: "value-quantity", Low: 5.4, High: 5.4}, {Param: "value-quantity" + sep + "|mg", Low: 5.4, High: 5.4}},
			search.DateRow{Param: "date", Low: time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC).UnixMicro(), High: time.Date(2024, 1, 1, 10, 0, 1, 0, time.UTC).UnixMicro()},
			"performer"+sep+"Practitioner/dr2")),
		indexed("Observation", "o2", 8, obsRows("p1", "5678", []search.NumberRow{{Param: "value-quantity", Low: 10, High: 10}},
			search.DateRow{Param: "date", Low: day(2024, 2, 1), High: maxDate})),
		indexed("Observation", "o3", 9, obsRows("p2", "1234", []search.NumberRow{{Param: "value-quantity", Low: 3, High: 7}},
			search.DateRow{Param: "date", Low: minDate, High: day(2023, 6, 1)})),
		indexed("Observation", "o4", 10, obsRows("p3", "1234", []search.NumberRow{{Param: "value-quantity", Low: search.NumMin, High: 2}})),
		indexed("Observation", "o5", 11, obsRows("p5", "1234", []search.NumberRow{{Param: "value-quantity", Low: 100, High: search.NumMax}})),
		indexed("Encounter", "e1", 12, search.Rows{Keys: []string{"subject" + sep + "Patient/p1", "subject" + sep + "p1"}}),
		indexed("Practitioner", "dr1", 13, search.Rows{Keys: []string{"organization" + sep + "Organization/org1"}}),
		indexed("Practitioner", "dr2", 14, search.Rows{Keys: []string{"name" + sep + "who"}}),
		indexed("Organization", "org1", 15, search.Rows{Keys: []string{"name" + sep + "acme"}, Sorts: []search.SortRow{sortRow("name", "acme")}}),
		indexed("Organization", "org2", 16, search.Rows{Keys: []string{"name" + sep + "globex"}, Sorts: []search.SortRow{sortRow("name", "globex")}}),
	}
}

// obsRows is an Observation's rows: subject, code, values, a date.
func obsRows(patient, code string, nums []search.NumberRow, date ...any) search.Rows {
	r := search.Rows{
		Keys: []string{"subject" + sep + "Patient/" + patient, "subject" + sep + patient,
			"code" + sep + "http://loinc.org|" + code, "code" + sep + code, "code" + sep + "http://loinc.org|"},
		Numbers: nums,
		Sorts:   []search.SortRow{sortRow("code", code)},
	}
	lo, hi := nums[0].Low, nums[0].High
	r.Sorts = append(r.Sorts, search.SortRow{Param: "value-quantity", Lo: lo, Hi: hi})
	for _, d := range date {
		switch d := d.(type) {
		case search.DateRow:
			r.Dates = append(r.Dates, d)
		case string:
			r.Keys = append(r.Keys, d)
		}
	}
	return r
}

// load writes searchData.
func load(t *testing.T, s store.Writer) {
	t.Helper()
	mustPut(t, s, searchData()...)
}

// found runs q (one page of 100) and returns "Type/id" of the matches in
// page order.
func found(t *testing.T, s store.Searcher, q search.Query) []string {
	t.Helper()
	if q.Count == 0 {
		q.Count = 100
	}
	page, err := s.Search(ctx(t), &q)
	if err != nil {
		t.Fatalf("Search %s: %v", describeQ(&q), err)
	}
	return refs(page.Matches)
}

func refs(vs []*store.Version) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Type+"/"+v.ID)
	}
	return out
}

// describe renders a query for failure messages.
func describeQ(q *search.Query) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v", q.Types)
	for _, cl := range q.Where {
		b.WriteString(" &")
		for _, m := range cl.Any {
			fmt.Fprintf(&b, " {op%d %q %v %q %q %s %d..%d %g..%g ±%g not=%v missing=%v}", m.Op, m.Type, m.Keys, m.Prefix, m.Contains, m.Param+"/"+m.Cmp.String(), m.Low, m.High, m.NumLow, m.NumHigh, m.Approx, m.Not, m.Missing)
			if m.Chain != nil {
				fmt.Fprintf(&b, " chain %s→(%s)", m.Chain.RefParam, describeQ(m.Chain.Query))
			}
			if m.Has != nil {
				fmt.Fprintf(&b, " has %s←(%s)", m.Has.Param, describeQ(m.Has.Query))
			}
		}
	}
	if len(q.Sort) > 0 {
		fmt.Fprintf(&b, " sort %v", q.Sort)
	}
	return b.String()
}

// sameSet fails unless got and want hold the same refs, in any order.
func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Errorf("%s:\n got  %v\n want %v", what, g, w)
	}
}

// filterCase is one query and the refs it must find.
type filterCase struct {
	name string
	q    search.Query
	want []string
}

func runFilterCases(t *testing.T, s store.Searcher, cases []filterCase) {
	t.Helper()
	for _, c := range cases {
		sameSet(t, c.name+": "+describeQ(&c.q), found(t, s, c.q), c.want)
		// The same clauses twice find the same: a backend that evaluates
		// one clause by index lookup and tests the rest per resource gets
		// both paths checked.
		twice := c.q
		twice.Where = append(slices.Clip(c.q.Where), c.q.Where...)
		sameSet(t, c.name+" (clauses twice): "+describeQ(&twice), found(t, s, twice), c.want)
		// Each clause OR a match that never holds (negated, but only for
		// a type that does not exist): same results, and a clause with a
		// negation is one no backend can answer by index lookup alone.
		never := search.Match{Op: search.OpKey, Keys: []string{"none" + sep + "none"}, Not: true, Type: "NoSuchType"}
		probed := c.q
		probed.Where = nil
		for _, cl := range c.q.Where {
			cl.Any = append(slices.Clip(cl.Any), never)
			probed.Where = append(probed.Where, cl)
		}
		sameSet(t, c.name+" (each clause OR never): "+describeQ(&probed), found(t, s, probed), c.want)
		// Paged two at a time, the pages hold the same, each once.
		paged := c.q
		paged.Count = 2
		got := flatten(pageThrough(t, s, paged))
		sameSet(t, c.name+" (pages of 2): "+describeQ(&paged), got, c.want)
		if len(got) != len(c.want) {
			t.Errorf("%s (pages of 2): %d matches, want %d", c.name, len(got), len(c.want))
		}
	}
}

func one(ms ...search.Match) search.Clause { return search.Clause{Any: ms} }

func key(ks ...string) search.Match { return search.Match{Op: search.OpKey, Keys: ks} }

func where(types []string, cls ...search.Clause) search.Query {
	return search.Query{Types: types, Where: cls}
}

var (
	patients = []string{"Patient"}
	obs      = []string{"Observation"}
)

func pats(ids ...string) []string {
	out := []string{}
	for _, id := range ids {
		out = append(out, "Patient/"+id)
	}
	return out
}

func observations(ids ...string) []string {
	out := []string{}
	for _, id := range ids {
		out = append(out, "Observation/"+id)
	}
	return out
}

func testSearchKeys(t *testing.T, s *handle) {
	load(t, s)
	f := "family" + sep
	prefix := func(p string) search.Match { return search.Match{Op: search.OpKeyPrefix, Prefix: p} }
	contains := func(p, c string) search.Match { return search.Match{Op: search.OpKeyContains, Prefix: p, Contains: c} }
	not := func(m search.Match) search.Match { m.Not = true; return m }
	runFilterCases(t, s, []filterCase{
		{"no clause: every live resource of the type", where(patients), pats("p1", "p2", "p3", "p4", "p6")},
		{"one key; the deleted p5 had it too", where(patients, one(key(f+"smith"))), pats("p1")},
		{"key list is an OR", where(patients, one(key(f+"brown", f+"smyth", f+"nobody"))), pats("p3", "p4")},
		{"key of a second value", where(patients, one(key(f+"jones"))), pats("p2")},
		{"unknown key", where(patients, one(key(f+"nobody"))), pats()},
		{"key is exact, not a prefix", where(patients, one(key(f+"smi"))), pats()},
		{"prefix", where(patients, one(prefix(f+"smi"))), pats("p1", "p2")},
		{"shorter prefix", where(patients, one(prefix(f+"sm"))), pats("p1", "p2", "p4")},
		{"prefix of the whole parameter", where(patients, one(prefix(f))), pats("p1", "p2", "p3", "p4", "p6")},
		{"prefix is the whole key", where(patients, one(prefix(f+"smith"))), pats("p1", "p2")},
		{"non-ASCII prefix", where(patients, one(prefix(f+"é"))), pats("p6")},
		{"prefix does not cross into another parameter", where(patients, one(prefix("famil"+sep))), pats()},
		{"contains", where(patients, one(contains(f, "th"))), pats("p1", "p2", "p4")},
		{"contains at the end", where(patients, one(contains(f, "ers"))), pats("p2")},
		{"contains only looks past the prefix", where(patients, one(contains(f, "fam"))), pats()},
		{"contains has no wildcards", where(patients, one(contains(f, "_"))), pats()},
		{"contains %", where(patients, one(contains(f, "%"))), pats()},
		{"contains non-ASCII", where(patients, one(contains(f, "cla"))), pats("p6")},
		{"contains the empty string", where(patients, one(contains(f+"b", ""))), pats("p3")},
		{"OR of values", where(patients, one(key("gender"+sep+"male"), key("gender"+sep+"female"))), pats("p1", "p2", "p3", "p6")},
		{"OR of different ops", where(patients, one(key(f+"brown"), prefix(f+"sm"))), pats("p1", "p2", "p3", "p4")},
		{"AND of clauses", where(patients, one(prefix(f+"sm")), one(key("gender"+sep+"male"))), pats("p1")},
		{"AND with nothing in common", where(patients, one(key(f+"brown")), one(key("gender"+sep+"female"))), pats()},
		{"not: lacking the key counts", where(patients, one(not(key("gender"+sep+"male")))), pats("p2", "p4", "p6")},
		{"not prefix", where(patients, one(not(prefix(f+"smi")))), pats("p3", "p4", "p6")},
		{"not contains", where(patients, one(not(contains(f, "th")))), pats("p3", "p6")},
		{"not of a key nobody has", where(patients, one(not(key(f+"nobody")))), pats("p1", "p2", "p3", "p4", "p6")},
		{"not AND positive", where(patients, one(prefix(f+"sm")), one(not(key("gender"+sep+"male")))), pats("p2", "p4")},
		{"same key in another type is another resource", where(obs, one(key(f+"smith"))), observations()},
	})
}

func dateQ(types []string, param string, c search.Cmp, lo, hi int64) search.Query {
	return where(types, one(search.Match{Op: search.OpDate, Param: param, Cmp: c, Low: lo, High: hi}))
}

func testSearchDates(t *testing.T, s *handle) {
	load(t, s)
	d80, d80e := day(1980, 1, 1), day(1980, 1, 2)
	y80, y81 := year(1980), year(1981)
	b := "birthdate"
	ap := dateQ(patients, b, search.CmpAp, day(1980, 1, 5), day(1980, 1, 6))
	ap.Where[0].Any[0].Approx = float64(5 * 24 * time.Hour / time.Microsecond)
	notEq := dateQ(patients, b, search.CmpEq, d80, d80e)
	notEq.Where[0].Any[0].Not = true
	runFilterCases(t, s, []filterCase{
		// p1 is the day 1980-01-01, p4 the year 1980, p2 1990-05-01, p3 and p6 have no birthdate.
		{"eq year contains day and year", dateQ(patients, b, search.CmpEq, y80, y81), pats("p1", "p4")},
		{"eq day, equal bounds", dateQ(patients, b, search.CmpEq, d80, d80e), pats("p1")},
		{"eq other day", dateQ(patients, b, search.CmpEq, day(1980, 1, 2), day(1980, 1, 3)), pats()},
		{"ne is a row that is not eq", dateQ(patients, b, search.CmpNe, d80, d80e), pats("p2", "p4")},
		{"not eq also takes resources without the parameter", notEq, pats("p2", "p3", "p4", "p6")},
		{"gt year", dateQ(patients, b, search.CmpGt, y80, y81), pats("p2")},
		{"gt day: ending at the query's end is not after it", dateQ(patients, b, search.CmpGt, d80, d80e), pats("p2", "p4")},
		{"lt day", dateQ(patients, b, search.CmpLt, day(1990, 5, 1), day(1990, 5, 2)), pats("p1", "p4")},
		{"lt: starting at the query's start is not before it", dateQ(patients, b, search.CmpLt, d80, d80e), pats()},
		{"ge day", dateQ(patients, b, search.CmpGe, d80, d80e), pats("p1", "p2", "p4")},
		{"le day", dateQ(patients, b, search.CmpLe, d80, d80e), pats("p1")},
		{"le 1990 day", dateQ(patients, b, search.CmpLe, day(1990, 5, 1), day(1990, 5, 2)), pats("p1", "p2", "p4")},
		{"sa year", dateQ(patients, b, search.CmpSa, y80, y81), pats("p2")},
		{"sa day: overlapping is not after", dateQ(patients, b, search.CmpSa, d80, d80e), pats("p2")},
		{"eb day", dateQ(patients, b, search.CmpEb, day(1990, 5, 1), day(1990, 5, 2)), pats("p1", "p4")},
		{"eb: ending exactly at the start is before", dateQ(patients, b, search.CmpEb, d80e, day(1980, 1, 3)), pats("p1")},
		{"eb nothing", dateQ(patients, b, search.CmpEb, d80, d80e), pats()},
		{"ap without margin is overlap", dateQ(patients, b, search.CmpAp, day(1980, 6, 1), day(1980, 6, 2)), pats("p4")},
		{"ap with a margin", ap, pats("p1", "p4")},
		{"another param", dateQ(patients, "deathdate", search.CmpGe, minDate, maxDate), pats()},
		// o1 2024-01-01T10:00:00 for 1s, o2 from 2024-02-01 open, o3 open until 2023-06-01, o4/o5 none.
		{"open end is after everything", dateQ(obs, "date", search.CmpGt, day(2030, 1, 1), day(2030, 1, 2)), observations("o2")},
		{"open start is before everything", dateQ(obs, "date", search.CmpLt, day(1900, 1, 1), day(1900, 1, 2)), observations("o3")},
		{"eq year excludes open ranges", dateQ(obs, "date", search.CmpEq, year(2024), year(2025)), observations("o1")},
		{"sa", dateQ(obs, "date", search.CmpSa, day(2023, 12, 31), day(2024, 1, 1)), observations("o1", "o2")},
		{"eb", dateQ(obs, "date", search.CmpEb, day(2024, 1, 1), day(2024, 1, 2)), observations("o3")},
		{"ap year", dateQ(obs, "date", search.CmpAp, year(2023), year(2024)), observations("o3")},
		{"ge the whole range", dateQ(obs, "date", search.CmpGe, minDate, maxDate), observations("o1", "o2", "o3")},
	})
}

func numQ(param string, c search.Cmp, lo, hi, approx float64) search.Query {
	return where(obs, one(search.Match{Op: search.OpNumber, Param: param, Cmp: c, NumLow: lo, NumHigh: hi, Approx: approx}))
}

func testSearchNumbers(t *testing.T, s *handle) {
	load(t, s)
	v := "value-quantity"
	// o1 5.4, o2 10, o3 [3, 7], o4 at most 2 (open low), o5 at least 100 (open high).
	runFilterCases(t, s, []filterCase{
		{"eq by precision", numQ(v, search.CmpEq, 5.35, 5.45, 0), observations("o1")},
		{"eq exact value", numQ(v, search.CmpEq, 10, 10, 0), observations("o2")},
		{"eq range", numQ(v, search.CmpEq, 9.5, 10.5, 0), observations("o2")},
		{"eq: the low bound is inclusive", numQ(v, search.CmpEq, 5.4, 5.5, 0), observations("o1")},
		{"eq: the high bound is exclusive", numQ(v, search.CmpEq, 5.3, 5.4, 0), observations()},
		{"eq contains a range", numQ(v, search.CmpEq, 2.5, 7.5, 0), observations("o1", "o3")},
		{"ne", numQ(v, search.CmpNe, 5.35, 5.45, 0), observations("o2", "o3", "o4", "o5")},
		{"gt: equal is not greater", numQ(v, search.CmpGt, 5.4, 5.4, 0), observations("o2", "o3", "o5")},
		{"ge: equal counts", numQ(v, search.CmpGe, 5.4, 5.4, 0), observations("o1", "o2", "o3", "o5")},
		{"lt: a range starting at the value is not below it", numQ(v, search.CmpLt, 3, 3, 0), observations("o4")},
		{"le", numQ(v, search.CmpLe, 3, 3, 0), observations("o3", "o4")},
		{"sa", numQ(v, search.CmpSa, 5, 5, 0), observations("o1", "o2", "o5")},
		{"sa at a range's start", numQ(v, search.CmpSa, 3, 3, 0), observations("o1", "o2", "o5")},
		{"eb", numQ(v, search.CmpEb, 5, 5, 0), observations("o4")},
		{"eb at a range's end", numQ(v, search.CmpEb, 7, 7, 0), observations("o1", "o4")},
		{"ap widened", numQ(v, search.CmpAp, 9.5, 10.5, 1), observations("o2")},
		{"ap reaching a range's end", numQ(v, search.CmpAp, 7.5, 8.5, 0.5), observations("o3")},
		{"open high is above everything", numQ(v, search.CmpGt, 1e300, 1e300, 0), observations("o5")},
		{"open low is below everything", numQ(v, search.CmpLt, -1e300, -1e300, 0), observations("o4")},
		{"unit discriminator", numQ(v+sep+"|mg", search.CmpGt, 0, 0, 0), observations("o1")},
		{"negative values", numQ(v, search.CmpGe, -5, -5, 0), observations("o1", "o2", "o3", "o4", "o5")},
	})
}

func testSearchTypes(t *testing.T, s *handle) {
	load(t, s)
	male := key("gender" + sep + "male")
	male.Type = "Patient"
	ofP1 := key("subject" + sep + "Patient/p1")
	ofP1.Type = "Observation"
	notMale := male
	notMale.Not = true
	runFilterCases(t, s, []filterCase{
		{"several types, no clause", where([]string{"Practitioner", "Organization"}), []string{"Practitioner/dr1", "Practitioner/dr2", "Organization/org1", "Organization/org2"}},
		{"every type", where(nil, one(key("subject"+sep+"Patient/p1"))), []string{"Observation/o1", "Observation/o2", "Encounter/e1"}},
		{"every type, OR of keys", where(nil, one(key("name"+sep+"acme"), key("name"+sep+"who"))), []string{"Organization/org1", "Practitioner/dr2"}},
		{"a match per type", where([]string{"Patient", "Observation"}, one(male, ofP1)), []string{"Patient/p1", "Patient/p3", "Observation/o1", "Observation/o2"}},
		{"typed match on all types", where(nil, one(male, ofP1)), []string{"Patient/p1", "Patient/p3", "Observation/o1", "Observation/o2"}},
		{"a negated typed match holds only for its type", where([]string{"Patient", "Organization"}, one(notMale)), pats("p2", "p4", "p6")},
		{"type outside Types", where(obs, one(male)), observations()},
	})
}

func chain(ref, typ string, cls ...search.Clause) search.Match {
	return search.Match{Op: search.OpChain, Chain: &search.Chain{RefParam: ref, Query: &search.Query{Types: []string{typ}, Where: cls}}}
}

func has(typ, param string, cls ...search.Clause) search.Match {
	return search.Match{Op: search.OpHas, Has: &search.Has{Param: param, Query: &search.Query{Types: []string{typ}, Where: cls}}}
}

func testSearchReferences(t *testing.T, s *handle) {
	load(t, s)
	missing := func(param string, m bool) search.Match {
		return search.Match{Op: search.OpMissing, Param: param, Missing: m}
	}
	notHas := has("Observation", "subject", one(key("code"+sep+"1234")))
	notHas.Not = true
	runFilterCases(t, s, []filterCase{
		{"missing", where(patients, one(missing("birthdate", true))), pats("p3", "p6")},
		{"present", where(patients, one(missing("birthdate", false))), pats("p1", "p2", "p4")},
		{"missing with another clause", where(patients, one(missing("birthdate", true)), one(key("gender"+sep+"male"))), pats("p3")},
		{"chain", where(obs, one(chain("subject", "Patient", one(key("family"+sep+"smith"))))), observations("o1", "o2")},
		{"chain to a deleted resource finds nothing", where(obs, one(chain("subject", "Patient", one(key("gender"+sep+"male"))))), observations("o1", "o2", "o4")},
		{"chain with prefix", where(obs, one(chain("subject", "Patient", one(search.Match{Op: search.OpKeyPrefix, Prefix: "family" + sep + "smi"})))), observations("o1", "o2", "o3")},
		{"two hops", where(obs, one(chain("subject", "Patient", one(chain("organization", "Organization", one(key("name"+sep+"acme"))))))), observations("o1", "o2")},
		{"two hops, other value", where(obs, one(chain("subject", "Patient", one(chain("organization", "Organization", one(key("name"+sep+"globex"))))))), observations("o3")},
		{"chain AND key", where(obs, one(chain("subject", "Patient", one(key("family"+sep+"smith")))), one(key("code"+sep+"1234"))), observations("o1")},
		{"chain through another parameter finds nothing", where(obs, one(chain("performer", "Patient", one(key("family"+sep+"smith"))))), observations()},
		{"has", where(patients, one(has("Observation", "subject", one(key("code"+sep+"1234"))))), pats("p1", "p2", "p3")},
		{"has without clauses", where(patients, one(has("Encounter", "subject"))), pats("p1")},
		{"not has", where(patients, one(notHas)), pats("p4", "p6")},
		{"nested has", where([]string{"Organization"}, one(has("Patient", "organization", one(has("Observation", "subject", one(key("code"+sep+"5678"))))))), []string{"Organization/org1"}},
		{"has through a chain", where([]string{"Practitioner"}, one(has("Observation", "performer", one(chain("subject", "Patient", one(key("family"+sep+"smith"))))))), []string{"Practitioner/dr2"}},
	})
}

// testSearchVersions proves a match is the resource's current version with
// all its fields, body byte for byte.
func testSearchVersions(t *testing.T, s *handle) {
	load(t, s)
	p1v2 := write("Patient", "p1", 2, at(30))
	p1v2.Index = &search.Rows{Keys: []string{"family" + sep + "smith"}}
	mustPut(t, s, p1v2)
	page, err := s.Search(ctx(t), &search.Query{Types: patients, Where: []search.Clause{one(key("family" + sep + "smith"))}, Count: 10})
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if len(page.Matches) != 1 {
		t.Fatalf("matches %v, want Patient/p1", refs(page.Matches))
	}
	wantVersion(t, "the match", page.Matches[0], p1v2)
	if page.Total != -1 || page.Next != "" || page.Prev != "" || len(page.Included) != 0 {
		t.Fatalf("page %+v: want no total, cursors or includes", page)
	}
}

// testSearchUpdates proves a search sees only the rows of the current
// version: an update replaces them, a tombstone or a nil Index drops them.
func testSearchUpdates(t *testing.T, s *handle) {
	load(t, s)
	f := "family" + sep
	p4 := write("Patient", "p4", 2, at(30))
	p4.Index = &search.Rows{Keys: []string{f + "smithy"}, Dates: []search.DateRow{{Param: "birthdate", Low: year(2000), High: year(2001)}}}
	p1 := tombstone("Patient", "p1", 2, at(31))
	p2 := write("Patient", "p2", 2, at(32)) // no Index: no rows
	mustPut(t, s, p4, p1, p2)
	runFilterCases(t, s, []filterCase{
		{"old key gone", where(patients, one(key(f+"smyth"))), pats()},
		{"new key", where(patients, one(key(f+"smithy"))), pats("p4")},
		{"tombstone drops rows", where(patients, one(search.Match{Op: search.OpKeyPrefix, Prefix: f + "smi"})), pats("p4")},
		{"new dates", dateQ(patients, "birthdate", search.CmpEq, year(2000), year(2001)), pats("p4")},
		{"old dates gone", dateQ(patients, "birthdate", search.CmpLt, year(1999), year(2000)), pats()},
		{"old sort rows gone", where(patients, one(search.Match{Op: search.OpMissing, Param: "family", Missing: false})), pats("p3", "p6")},
		{"chain to a deleted target", where(obs, one(chain("subject", "Patient", one(key("gender"+sep+"male"))))), observations("o4")},
	})
	// Resurrected with rows again.
	p1v3 := write("Patient", "p1", 3, at(33))
	p1v3.Index = &search.Rows{Keys: []string{f + "smith"}}
	mustPut(t, s, p1v3)
	sameSet(t, "resurrected", found(t, s, where(patients, one(key(f+"smith")))), pats("p1"))
}
