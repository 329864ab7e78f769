package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

type sortCase struct {
	name string
	q    search.Query
	want []string // in order
}

func sorted(types []string, keys ...search.Sort) search.Query {
	return search.Query{Types: types, Sort: keys}
}

func asc(p string) search.Sort  { return search.Sort{Param: p} }
func desc(p string) search.Sort { return search.Sort{Param: p, Desc: true} }

// ascDate, descDate, ascString, descString, ascQuantity and descQuantity
// sort by a parameter of that type, whose rows a store may read the sort
// values from (and walk in order).
func ascDate(p string) search.Sort      { return search.Sort{Param: p, Type: "date"} }
func descDate(p string) search.Sort     { return search.Sort{Param: p, Desc: true, Type: "date"} }
func ascString(p string) search.Sort    { return search.Sort{Param: p, Type: "string"} }
func descString(p string) search.Sort   { return search.Sort{Param: p, Desc: true, Type: "string"} }
func ascQuantity(p string) search.Sort  { return search.Sort{Param: p, Type: "quantity"} }
func descQuantity(p string) search.Sort { return search.Sort{Param: p, Desc: true, Type: "quantity"} }

// sortCases: family sorts by its least value ascending and its greatest
// descending (p2 is jones and smithers); missing values come last either
// way; ties fall back on creation order.
func sortCases() []sortCase {
	return []sortCase{
		{"creation order", sorted(patients), pats("p1", "p2", "p3", "p4", "p6")},
		{"string asc", sorted(patients, ascString("family")), pats("p3", "p2", "p1", "p4", "p6")},
		{"string desc", sorted(patients, descString("family")), pats("p6", "p4", "p2", "p1", "p3")},
		{"date asc, missing last, ties by creation", sorted(patients, ascDate("birthdate")), pats("p1", "p4", "p2", "p3", "p6")},
		{"date desc, missing last", sorted(patients, descDate("birthdate")), pats("p2", "p4", "p1", "p3", "p6")},
		{"two keys asc", sorted(patients, ascDate("birthdate"), ascString("family")), pats("p1", "p4", "p2", "p3", "p6")},
		{"two keys desc", sorted(patients, descDate("birthdate"), descString("family")), pats("p2", "p4", "p1", "p6", "p3")},
		{"_id desc", sorted(patients, desc("_id")), pats("p6", "p4", "p3", "p2", "p1")},
		{"_lastUpdated desc", sorted(patients, desc("_lastUpdated")), pats("p6", "p4", "p3", "p2", "p1")},
		{"_lastUpdated asc", sorted(patients, asc("_lastUpdated")), pats("p1", "p2", "p3", "p4", "p6")},
		{"number asc", sorted(obs, ascQuantity("value-quantity")), observations("o4", "o3", "o1", "o2", "o5")},
		{"number desc", sorted(obs, descQuantity("value-quantity")), observations("o5", "o2", "o3", "o1", "o4")},
		{"string then number", sorted(obs, asc("code"), descQuantity("value-quantity")), observations("o5", "o3", "o1", "o4", "o2")},
		{"nobody has it", sorted(obs, desc("status")), observations("o1", "o2", "o3", "o4", "o5")},
		{"filter, creation order", search.Query{Types: patients, Where: []search.Clause{one(search.Match{Op: search.OpKeyPrefix, Prefix: "family" + sep})}}, pats("p1", "p2", "p3", "p4", "p6")},
		{"two filters, creation order", search.Query{Types: patients, Where: []search.Clause{
			one(search.Match{Op: search.OpKeyPrefix, Prefix: "family" + sep}), one(key("gender"+sep+"male"), key("gender"+sep+"female"))}}, pats("p1", "p2", "p3", "p6")},
		{"sort with a filter", search.Query{Types: patients, Where: []search.Clause{one(search.Match{Op: search.OpKeyPrefix, Prefix: "family" + sep + "sm"})}, Sort: []search.Sort{descString("family")}}, pats("p4", "p2", "p1")},
	}
}

func testSearchSort(t *testing.T, s *handle) {
	load(t, s)
	for _, c := range sortCases() {
		if got := found(t, s, c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got  %v\n want %v", c.name, got, c.want)
		}
	}
}

// pageThrough follows Next from the first page and returns every page;
// it checks that no page exceeds Count and only the last has no Next.
func pageThrough(t *testing.T, s store.Searcher, q search.Query) [][]*store.Version {
	t.Helper()
	var pages [][]*store.Version
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatalf("%s: more than 100 pages", describeQ(&q))
		}
		page, err := s.Search(ctx(t), &q)
		if err != nil {
			t.Fatalf("Search %s page %d: %v", describeQ(&q), i, err)
		}
		if len(page.Matches) > q.Count {
			t.Fatalf("%s: page %d has %d matches, Count is %d", describeQ(&q), i, len(page.Matches), q.Count)
		}
		if i == 0 && page.Prev != "" {
			t.Errorf("%s: the first page has a Prev", describeQ(&q))
		}
		pages = append(pages, page.Matches)
		if page.Next == "" {
			return pages
		}
		if len(page.Matches) == 0 {
			t.Fatalf("%s: page %d is empty but has a Next", describeQ(&q), i)
		}
		q.Cursor = page.Next
	}
}

func flatten(pages [][]*store.Version) []string {
	var out []string
	for _, p := range pages {
		out = append(out, refs(p)...)
	}
	return out
}

// testSearchPaging pages every sort case forwards with several page sizes,
// then back from the last page to the first through Prev, and forwards
// again from there.
func testSearchPaging(t *testing.T, s *handle) {
	load(t, s)
	for _, c := range sortCases() {
		for _, count := range []int{1, 2, 3, 5, 10} {
			q := c.q
			q.Count = count
			name := fmt.Sprintf("%s, count %d", c.name, count)
			if got := flatten(pageThrough(t, s, q)); !slices.Equal(got, c.want) {
				t.Errorf("%s forwards:\n got  %v\n want %v", name, got, c.want)
				continue
			}
			// Back from the last page.
			var last *store.SearchPage
			for q.Cursor = ""; ; {
				p, err := s.Search(ctx(t), &q)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				last = p
				if p.Next == "" {
					break
				}
				q.Cursor = p.Next
			}
			var back []string
			first := last
			for p := last; p.Prev != ""; {
				q.Cursor = p.Prev
				var err error
				if p, err = s.Search(ctx(t), &q); err != nil {
					t.Fatalf("%s: Prev: %v", name, err)
				}
				if len(p.Matches) == 0 || len(p.Matches) > count {
					t.Fatalf("%s: a Prev page has %d matches", name, len(p.Matches))
				}
				back = append(refs(p.Matches), back...)
				first = p
			}
			if want := c.want[:len(c.want)-len(last.Matches)]; !slices.Equal(back, want) {
				t.Errorf("%s backwards:\n got  %v\n want %v", name, back, want)
				continue
			}
			// The first page reached backwards has a Next that continues.
			if first != last && first.Next != "" {
				q.Cursor = first.Next
				p, err := s.Search(ctx(t), &q)
				if err != nil {
					t.Fatalf("%s: Next after Prev: %v", name, err)
				}
				n := len(first.Matches)
				if want := c.want[n:min(n+count, len(c.want))]; !slices.Equal(refs(p.Matches), want) {
					t.Errorf("%s: Next after Prev: got %v, want %v", name, refs(p.Matches), want)
				}
			}
		}
	}
}

// testSearchPagingStable pages while another client creates resources
// before and after the cursor: no resource appears twice and none that
// existed at the first page is skipped.
func testSearchPagingStable(t *testing.T, s *handle) {
	const n = 30
	var orig []string
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		mustPut(t, s, indexed("Patient", id, i, search.Rows{Keys: []string{"tag" + sep + "x"},
			Sorts: []search.SortRow{sortRow("n", int64(i*10))}}))
		orig = append(orig, "Patient/"+id)
	}
	extra := 0
	for _, q := range []search.Query{
		{Types: patients, Count: 4},
		{Types: patients, Count: 4, Sort: []search.Sort{asc("n")}},
		{Types: patients, Count: 4, Sort: []search.Sort{desc("n")}},
		{Types: patients, Count: 3, Where: []search.Clause{one(key("tag" + sep + "x"))}, Sort: []search.Sort{asc("n")}},
	} {
		seen := map[string]bool{}
		for page := 0; ; page++ {
			p, err := s.Search(ctx(t), &q)
			if err != nil {
				t.Fatalf("%s: %v", describeQ(&q), err)
			}
			for _, r := range refs(p.Matches) {
				if seen[r] {
					t.Fatalf("%s: %s returned twice", describeQ(&q), r)
				}
				seen[r] = true
			}
			// Writes between pages: values all over the order, and one
			// without the sort parameter.
			for j := range 3 {
				extra++
				id := fmt.Sprintf("new%d", extra)
				rows := search.Rows{Keys: []string{"tag" + sep + "x"}}
				if j < 2 {
					rows.Sorts = []search.SortRow{sortRow("n", int64((page*37+j*101)%(n*10)+5))}
				}
				mustPut(t, s, indexed("Patient", id, 100+extra, rows))
			}
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
		}
		for _, r := range orig {
			if !seen[r] {
				t.Errorf("%s: %s skipped", describeQ(&q), r)
			}
		}
	}
}

func testSearchTotals(t *testing.T, s *handle) {
	load(t, s)
	prefix := search.Clause{Any: []search.Match{{Op: search.OpKeyPrefix, Prefix: "family" + sep + "sm"}}}
	cases := []struct {
		name    string
		q       search.Query
		matches int
		totals  []int64 // acceptable totals
	}{
		{"count 0 with an accurate total", search.Query{Types: patients, Total: search.TotalAccurate}, 0, []int64{5}},
		{"count 0 without a total", search.Query{Types: patients}, 0, []int64{-1}},
		{"count 0, estimate", search.Query{Types: patients, Total: search.TotalEstimate}, 0, []int64{-1, 5}},
		{"a page and the total", search.Query{Types: patients, Total: search.TotalAccurate, Count: 2}, 2, []int64{5}},
		{"total of a filter", search.Query{Types: patients, Where: []search.Clause{prefix}, Total: search.TotalAccurate, Count: 1}, 1, []int64{3}},
		{"estimate of a filter", search.Query{Types: patients, Where: []search.Clause{prefix}, Total: search.TotalEstimate, Count: 10}, 3, []int64{-1, 3}},
		{"no total asked", search.Query{Types: patients, Count: 10}, 5, []int64{-1}},
		{"total of nothing", search.Query{Types: []string{"Medication"}, Total: search.TotalAccurate, Count: 10}, 0, []int64{0}},
	}
	for _, c := range cases {
		page, err := s.Search(ctx(t), &c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(page.Matches) != c.matches || !slices.Contains(c.totals, page.Total) {
			t.Errorf("%s: %d matches, total %d; want %d matches, total in %v", c.name, len(page.Matches), page.Total, c.matches, c.totals)
		}
		if c.q.Count == 0 && (page.Next != "" || page.Prev != "" || len(page.Included) != 0) {
			t.Errorf("%s: count 0 returned cursors or includes: %+v", c.name, page)
		}
	}
}

func inc(src, param, target string, iterate bool) search.Include {
	return search.Include{Source: src, Param: param, Target: target, Iterate: iterate}
}

func testSearchIncludes(t *testing.T, s *handle) {
	load(t, s)
	smith := one(key("family" + sep + "smith"))
	male := one(key("gender" + sep + "male"))
	cases := []struct {
		name        string
		q           search.Query
		matches     []string
		included    []string
		includedAny bool // at least these (a backend may bound iteration)
	}{
		{"include", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Patient", "general-practitioner", "", false)}},
			pats("p1"), []string{"Practitioner/dr1"}, false},
		{"include iterate", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Patient", "general-practitioner", "", false), inc("Practitioner", "organization", "", true)}},
			pats("p1"), []string{"Practitioner/dr1", "Organization/org1"}, false},
		{"without iterate no second hop", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Patient", "general-practitioner", "", false), inc("Practitioner", "organization", "", false)}},
			pats("p1"), []string{"Practitioner/dr1"}, false},
		{"include every reference", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Patient", "*", "", false)}},
			pats("p1"), []string{"Practitioner/dr1", "Organization/org1", "Patient/p3"}, false},
		{"include every reference to one type", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Patient", "*", "Organization", false)}},
			pats("p1"), []string{"Organization/org1"}, false},
		{"include target type filter", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Patient", "general-practitioner", "Organization", false)}},
			pats("p1"), []string{}, false},
		{"include of another source type", search.Query{Types: patients, Where: []search.Clause{smith}, Include: []search.Include{inc("Observation", "subject", "", false)}},
			pats("p1"), []string{}, false},
		{"revinclude", search.Query{Types: patients, Where: []search.Clause{smith}, RevInclude: []search.Include{inc("Observation", "subject", "", false), inc("Encounter", "subject", "", false)}},
			pats("p1"), []string{"Observation/o1", "Observation/o2", "Encounter/e1"}, false},
		{"revinclude every reference", search.Query{Types: patients, Where: []search.Clause{smith}, RevInclude: []search.Include{inc("Observation", "*", "", false)}},
			pats("p1"), []string{"Observation/o1", "Observation/o2"}, false},
		{"revinclude then include iterate", search.Query{Types: patients, Where: []search.Clause{smith}, RevInclude: []search.Include{inc("Observation", "subject", "", false)}, Include: []search.Include{inc("Observation", "performer", "", true)}},
			pats("p1"), []string{"Observation/o1", "Observation/o2", "Practitioner/dr2"}, false},
		{"revinclude iterate", search.Query{Types: []string{"Organization"}, Where: []search.Clause{one(key("name" + sep + "acme"))}, RevInclude: []search.Include{inc("Patient", "organization", "", false), inc("Observation", "subject", "", true), inc("Practitioner", "organization", "", false)}},
			[]string{"Organization/org1"}, []string{"Patient/p1", "Observation/o1", "Observation/o2", "Practitioner/dr1"}, false},
		{"a match is never included", search.Query{Types: patients, Where: []search.Clause{male}, Include: []search.Include{inc("Patient", "link", "", false)}},
			pats("p1", "p3"), []string{}, false},
		{"each resource once", search.Query{Types: patients, Where: []search.Clause{male}, Include: []search.Include{inc("Patient", "organization", "", false), inc("Patient", "general-practitioner", "", false), inc("Practitioner", "organization", "", true)}},
			pats("p1", "p3"), []string{"Organization/org1", "Practitioner/dr1"}, false},
		{"deleted targets are not included", search.Query{Types: obs, Where: []search.Clause{one(key("subject" + sep + "Patient/p5"))}, Include: []search.Include{inc("Observation", "subject", "", false)}},
			observations("o5"), []string{}, false},
	}
	for _, c := range cases {
		c.q.Count = 10
		page, err := s.Search(ctx(t), &c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sameSet(t, c.name+": matches", refs(page.Matches), c.matches)
		got := refs(page.Included)
		sameSet(t, c.name+": included", got, c.included)
		if len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
			t.Errorf("%s: a resource included twice: %v", c.name, got)
		}
		for _, v := range page.Included {
			if v.Deleted || len(v.Body) == 0 || v.Version < 1 {
				t.Errorf("%s: included %s is not a current version: %+v", c.name, ref(v), v)
			}
		}
	}
	// The page's includes follow the page, not the whole result.
	q := search.Query{Types: patients, Where: []search.Clause{male}, Count: 1, RevInclude: []search.Include{inc("Observation", "subject", "", false)}}
	pages := map[string][]string{}
	for {
		page, err := s.Search(ctx(t), &q)
		if err != nil {
			t.Fatal(err)
		}
		pages[refs(page.Matches)[0]] = refs(page.Included)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	sameSet(t, "page of p1", pages["Patient/p1"], observations("o1", "o2"))
	sameSet(t, "page of p3", pages["Patient/p3"], observations("o4"))
}

// testSearchTransact proves a search through the Tx sees the transaction's
// own writes (new rows, replaced rows), and one outside does not until the
// commit.
func testSearchTransact(t *testing.T, s *handle) {
	load(t, s)
	smith := where(patients, one(key("family"+sep+"smith")))
	ok, err := transact(t, s, func(tx store.Tx) error {
		mustPut(t, tx, indexed("Patient", "pn", 40, search.Rows{Keys: []string{"family" + sep + "smith"}}))
		p3 := write("Patient", "p3", 2, at(41))
		p3.Index = &search.Rows{Keys: []string{"family" + sep + "smith"}}
		mustPut(t, tx, p3)
		sameSet(t, "inside", found(t, tx, smith), pats("p1", "pn", "p3"))
		sameSet(t, "inside, old rows", found(t, tx, where(patients, one(key("family"+sep+"brown")))), pats())
		sameSet(t, "outside, during", found(t, s, smith), pats("p1"))
		return nil
	}, [2]string{"Patient", "pn"})
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	sameSet(t, "after commit", found(t, s, smith), pats("p1", "pn", "p3"))
	// A rolled-back transaction leaves no rows behind.
	boom := errors.New("roll back")
	_, err = transact(t, s, func(tx store.Tx) error {
		mustPut(t, tx, indexed("Patient", "gone", 42, search.Rows{Keys: []string{"family" + sep + "smith"}}))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Transact: %v", err)
	}
	sameSet(t, "after rollback", found(t, s, smith), pats("p1", "pn", "p3"))
}

func testSearchBadCursor(t *testing.T, s *handle) {
	load(t, s)
	q := search.Query{Types: patients, Sort: []search.Sort{ascString("family")}, Count: 2}
	page, err := s.Search(ctx(t), &q)
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	bad := []string{"!!!", "AAAAAAAA", "not a cursor", strings.Repeat("A", 5000), page.Next[:len(page.Next)-1], "%", "\x00"}
	for _, c := range bad {
		q.Cursor = c
		if _, err := s.Search(ctx(t), &q); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %.20q: %v, want ErrBadCursor", c, err)
		}
	}
	// A cursor of a query with another sort.
	other := search.Query{Types: patients, Sort: []search.Sort{ascString("family"), descDate("birthdate")}, Count: 2, Cursor: page.Next}
	if _, err := s.Search(ctx(t), &other); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("cursor of another sort: %v, want ErrBadCursor", err)
	}
	// And the genuine one still works.
	q.Cursor = page.Next
	if p, err := s.Search(ctx(t), &q); err != nil || len(p.Matches) != 2 {
		t.Errorf("the genuine cursor: %v, %v", p, err)
	}
}
