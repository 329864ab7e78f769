package fhirserver_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
)

// Paging of searches is keyset paging behind sealed cursors: the next and
// previous links visit every match once, stay stable while others write,
// and a cursor is good only for the search that issued it.

// putPager writes a Patient of the paging set: family Pager, the given
// name and birth year as told.
func (h *harness) putPager(t *testing.T, id, given string, year int) {
	t.Helper()
	body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"name":[{"family":"Pager","given":[%q]}],"birthDate":"%d-01-01"}`, id, given, year)
	r := h.with(t).do("PUT", "/Patient/"+id, []byte(body))
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		t.Fatalf("PUT %s: %d %s", id, r.status, r.body)
	}
}

// newPagingHarness holds n Patients pg-00, pg-01, … with given names g00,
// g01, … born in 1950, 1951, ….
func newPagingHarness(t *testing.T, n int, mutate ...func(*fhirserver.Config)) *harness {
	t.Helper()
	h := newHarness(t, mutate...)
	for i := range n {
		h.putPager(t, fmt.Sprintf("pg-%02d", i), fmt.Sprintf("g%02d", i), 1950+i)
	}
	return h
}

func pagerIDs(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("pg-%02d", i))
	}
	return out
}

// pageMatches lists the ids of the match entries of one page, in order.
func pageMatches(page map[string]any) []string {
	var out []string
	for _, e := range pageEntries(page) {
		if e["search"].(map[string]any)["mode"] == "match" {
			out = append(out, e["resource"].(map[string]any)["id"].(string))
		}
	}
	return out
}

func (h *harness) getPage(t *testing.T, path string) map[string]any {
	t.Helper()
	r := h.with(t).do("GET", path, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	return r.json(t)
}

func TestPagingDefaultCount(t *testing.T) {
	h := newPagingHarness(t, 25)
	first := h.getPage(t, "/Patient?family=pager")
	if n := len(pageMatches(first)); n != 20 {
		t.Errorf("first page without _count: %d matches, want the default 20", n)
	}
	got := h.search(t, "/Patient?family=pager")
	expectIDs(t, "all pages", got.matches, pagerIDs(0, 25))
	if len(got.pages) != 2 {
		t.Errorf("%d pages, want 2", len(got.pages))
	}
}

func TestPagingForwardAndBack(t *testing.T) {
	h := newPagingHarness(t, 25)
	fwd := h.search(t, "/Patient?family=pager&_count=7")
	expectIDs(t, "forward", fwd.matches, pagerIDs(0, 25))
	var pages [][]string
	for _, p := range fwd.pages {
		pages = append(pages, pageMatches(p))
	}
	if sizes := fmt.Sprint(lens(pages)); sizes != "[7 7 7 4]" {
		t.Fatalf("page sizes %s, want [7 7 7 4]", sizes)
	}
	// The self link of a page fetches that page again.
	if again := pageMatches(h.getPage(t, bundleLink(fwd.pages[1], "self"))); !slices.Equal(again, pages[1]) {
		t.Errorf("self link of page 2: %v, want %v", again, pages[1])
	}
	// Back from the last page to the first.
	prev := bundleLink(fwd.pages[3], "previous")
	if prev == "" {
		t.Fatal("the last page has no previous link")
	}
	var back [][]string
	var firstAgain map[string]any
	for prev != "" && len(back) < 10 {
		p := h.getPage(t, prev)
		m := pageMatches(p)
		if len(m) == 0 {
			break
		}
		back = append(back, m)
		firstAgain = p
		prev = bundleLink(p, "previous")
	}
	want := [][]string{pages[2], pages[1], pages[0]}
	if fmt.Sprint(back) != fmt.Sprint(want) {
		t.Errorf("walking back: %v, want %v", back, want)
	}
	// And forward again from the first page reached backwards.
	if firstAgain != nil {
		next := bundleLink(firstAgain, "next")
		if next == "" {
			t.Fatal("the first page, reached backwards, has no next link")
		}
		if got := pageMatches(h.getPage(t, next)); !slices.Equal(got, pages[1]) {
			t.Errorf("next after walking back: %v, want %v", got, pages[1])
		}
	}
}

func lens(pages [][]string) []int {
	var out []int
	for _, p := range pages {
		out = append(out, len(p))
	}
	return out
}

func TestPagingCountClamp(t *testing.T) {
	h := newPagingHarness(t, 25, func(c *fhirserver.Config) { c.DefaultCount, c.MaxCount = 5, 10 })
	if n := len(pageMatches(h.getPage(t, "/Patient?family=pager"))); n != 5 {
		t.Errorf("DefaultCount 5: first page %d", n)
	}
	if n := len(pageMatches(h.getPage(t, "/Patient?family=pager&_count=3"))); n != 3 {
		t.Errorf("_count=3: first page %d", n)
	}
	clamped := h.getPage(t, "/Patient?family=pager&_count=50")
	if n := len(pageMatches(clamped)); n != 10 {
		t.Errorf("_count=50 with MaxCount 10: first page %d", n)
	}
	if u, err := url.Parse(bundleLink(clamped, "self")); err != nil || u.Query().Get("_count") != "10" {
		t.Errorf("self link %q: want the _count used, 10", bundleLink(clamped, "self"))
	}
	all := h.search(t, "/Patient?family=pager&_count=50")
	expectIDs(t, "clamped pages", all.matches, pagerIDs(0, 25))
	if len(all.pages) != 3 {
		t.Errorf("%d pages of 10 for 25 matches", len(all.pages))
	}

	// MaxCount alone, below the default page size, still bounds every page.
	h = newPagingHarness(t, 25, func(c *fhirserver.Config) { c.MaxCount = 10 })
	for _, q := range []string{"/Patient?family=pager", "/Patient?family=pager&_count=50"} {
		if n := len(pageMatches(h.getPage(t, q))); n > 10 {
			t.Errorf("MaxCount 10: %s served %d matches on a page", q, n)
		}
	}
}

func TestPagingTotalOnEveryPage(t *testing.T) {
	h := newPagingHarness(t, 25)
	got := h.search(t, "/Patient?family=pager&_count=7&_total=accurate")
	for i, p := range got.pages {
		if p["total"] != float64(25) {
			t.Errorf("page %d: total %v, want 25", i+1, p["total"])
		}
	}
}

func TestPagingCountZero(t *testing.T) {
	h := newPagingHarness(t, 25)
	if m := pageMatches(h.getPage(t, "/Patient?family=pager&_count=0")); len(m) != 0 {
		t.Errorf("_count=0 served %v", m)
	}
	if tot := h.getPage(t, "/Patient?family=pager&_count=0&_total=accurate")["total"]; tot != float64(25) {
		t.Errorf("_count=0&_total=accurate: total %v, want 25", tot)
	}
}

func TestPagingSortedAcrossPages(t *testing.T) {
	h := newPagingHarness(t, 25)
	desc := pagerIDs(0, 25)
	slices.Reverse(desc)
	tests := []struct {
		query string
		want  []string
	}{
		{"/Patient?family=pager&_sort=-birthdate&_count=4", desc},
		{"/Patient?family=pager&_sort=given&_count=6", pagerIDs(0, 25)},
		{"/Patient?family=pager&_sort=-given&_count=25", desc},
		{"/Patient?family=pager&birthdate=ge1960&_sort=birthdate&_count=4", pagerIDs(10, 25)},
		{"/Patient?family=pager&birthdate=lt1960&_sort=-_id&_count=3", []string{"pg-09", "pg-08", "pg-07", "pg-06", "pg-05", "pg-04", "pg-03", "pg-02", "pg-01", "pg-00"}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			if got := h.search(t, tc.query).matches; !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

// Others write between the page fetches of a client: it sees no match
// twice and misses none of those that existed when it started (and still
// exist): inserts of new matches, updates that keep the sort values, and
// deletes.
func TestPagingStableUnderWrites(t *testing.T) {
	for _, sort := range []string{"", "&_sort=given", "&_sort=-birthdate", "&_sort=family,-given", "&_sort=_lastUpdated"} {
		for _, mode := range []string{"inserts", "updates", "deletes"} {
			if mode == "updates" && sort == "&_sort=_lastUpdated" {
				continue // an update changes the sort value itself
			}
			t.Run(mode+sort, func(t *testing.T) {
				h := newPagingHarness(t, 25)
				seen := map[string]int{}
				deleted := map[string]bool{}
				var order []string
				link := "/Patient?family=pager&_count=5" + sort
				written := 0
				for pages := 0; link != "" && pages < 50; pages++ {
					p := h.getPage(t, link)
					for _, id := range pageMatches(p) {
						seen[id]++
						order = append(order, id)
						if deleted[id] {
							t.Errorf("%s served after its deletion", id)
						}
					}
					link = bundleLink(p, "next")
					if link == "" {
						break
					}
					switch mode {
					case "inserts":
						// New matches sorting first, in the middle and last.
						for _, w := range []struct {
							given string
							year  int
						}{{"a", 2099}, {"g12x", 1962}, {"z", 1900}} {
							written++
							h.putPager(t, fmt.Sprintf("new-%02d", written), fmt.Sprintf("%s%02d", w.given, written), w.year)
						}
					case "updates":
						// Rewrite one match already served and one not yet
						// served, keeping their sort values.
						for _, id := range []string{order[len(order)-1], unseen(seen, deleted)} {
							if id == "" {
								continue
							}
							var i int
							fmt.Sscanf(id, "pg-%d", &i)
							body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"gender":"other","name":[{"family":"Pager","given":["g%02d"]}],"birthDate":"%d-01-01"}`, id, i, 1950+i)
							if r := h.with(t).do("PUT", "/Patient/"+id, []byte(body)); r.status != http.StatusOK {
								t.Fatalf("update %s: %d %s", id, r.status, r.body)
							}
						}
					case "deletes":
						// Delete one match already served and one not yet served.
						for _, id := range []string{order[len(order)-1], unseen(seen, deleted)} {
							if id == "" {
								continue
							}
							if r := h.with(t).do("DELETE", "/Patient/"+id, nil); r.status != http.StatusNoContent {
								t.Fatalf("delete %s: %d %s", id, r.status, r.body)
							}
							if seen[id] == 0 {
								deleted[id] = true
							}
						}
					}
				}
				for _, id := range pagerIDs(0, 25) {
					if want := 1; seen[id] != want && !deleted[id] {
						t.Errorf("%s served %d times", id, seen[id])
					}
				}
				for id, n := range seen {
					if n > 1 {
						t.Errorf("%s served %d times", id, n)
					}
				}
			})
		}
	}
}

// unseen returns an id of the paging set neither served nor deleted yet,
// or "".
func unseen(seen map[string]int, deleted map[string]bool) string {
	for _, id := range slices.Backward(pagerIDs(0, 25)) {
		if seen[id] == 0 && !deleted[id] {
			return id
		}
	}
	return ""
}

// cursorOf returns the next link of the first page of path and its
// _cursor value.
func (h *harness) cursorOf(t *testing.T, path string) (*url.URL, string) {
	t.Helper()
	next := bundleLink(h.getPage(t, path), "next")
	u, err := url.Parse(next)
	if err != nil || next == "" {
		t.Fatalf("next link %q of %s: %v", next, path, err)
	}
	c := u.Query().Get("_cursor")
	if c == "" {
		t.Fatalf("next link %q has no _cursor", next)
	}
	return u, c
}

func TestPagingCursorTampering(t *testing.T) {
	h := newPagingHarness(t, 12)
	u, cursor := h.cursorOf(t, "/Patient?family=pager&_count=5")
	if r := h.with(t).do("GET", u.String(), nil); r.status != http.StatusOK {
		t.Fatalf("the untouched next link: %d %s", r.status, r.body)
	}
	for _, pos := range []int{0, len(cursor) / 2, len(cursor) - 1} {
		b := []byte(cursor)
		if b[pos] == 'A' {
			b[pos] = 'B'
		} else {
			b[pos] = 'A'
		}
		q := u.Query()
		q.Set("_cursor", string(b))
		tampered := *u
		tampered.RawQuery = q.Encode()
		t.Run(fmt.Sprintf("character %d", pos), func(t *testing.T) {
			expectOutcome(t, h.with(t).do("GET", tampered.String(), nil), http.StatusBadRequest, "_cursor")
		})
	}
	for i, bad := range []string{"garbage", "x.y", "." + cursor, cursor + "A"} {
		q := u.Query()
		q.Set("_cursor", bad)
		t.Run(fmt.Sprintf("forged %d", i), func(t *testing.T) {
			expectOutcome(t, h.with(t).do("GET", "/Patient?"+q.Encode(), nil), http.StatusBadRequest, "_cursor")
		})
	}
}

// A cursor continues only the search it came from.
func TestPagingCursorBoundToCriteria(t *testing.T) {
	h := newPagingHarness(t, 12)
	u, cursor := h.cursorOf(t, "/Patient?family=pager&_count=5")
	c := url.QueryEscape(cursor)
	want := pageMatches(h.getPage(t, u.String()))
	if len(want) != 5 {
		t.Fatalf("second page %v", want)
	}
	for _, other := range []string{
		"/Patient?family=pag&_count=5&_cursor=" + c,
		"/Patient?family=pager&_count=6&_cursor=" + c,
		"/Patient?family=pager&_count=5&gender=male&_cursor=" + c,
		"/Patient?_count=5&_cursor=" + c,
		"/Practitioner?family=pager&_count=5&_cursor=" + c,
		"?_type=Patient&family=pager&_count=5&_cursor=" + c,
		"/Patient/pg-00/Patient?family=pager&_count=5&_cursor=" + c,
		"/Patient?family=pager&_count=5&_sort=given&_cursor=" + c,
	} {
		t.Run(other, func(t *testing.T) {
			expectOutcome(t, h.with(t).do("GET", other, nil), http.StatusBadRequest, "_cursor")
		})
	}
	// The same criteria in another order, or POSTed, continue the search.
	t.Run("reordered", func(t *testing.T) {
		if got := pageMatches(h.getPage(t, "/Patient?_cursor="+c+"&_count=5&family=pager")); !slices.Equal(got, want) {
			t.Errorf("reordered parameters: %v, want %v", got, want)
		}
	})
	t.Run("POST", func(t *testing.T) {
		got := h.searchPost(t, "/Patient/_search", "family=pager&_count=5&_cursor="+c)
		if len(got.pages) == 0 || !slices.Equal(pageMatches(got.pages[0]), want) {
			t.Errorf("POSTed cursor: %v, want %v", got.matches, want)
		}
	})
}
