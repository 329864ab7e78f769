package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var historyTests = []test{
	{"EmptyStoreHasEmptyHistory", testHistoryEmpty},
	{"LevelsNewestFirst", testHistoryLevels},
	{"TiesNewestWriteFirst", testHistoryTies},
	{"PagingVisitsEveryVersionOnce", testHistoryPaging},
	{"PagingStableWhileWriting", testHistoryStable},
	{"MaxBytesEndsPagesEarly", testHistoryMaxBytes},
	{"AtPagingIsASnapshot", testHistoryAtSnapshot},
	{"Since", testHistorySince},
	{"AtExample", testHistoryAtExample},
	{"AtWindows", testHistoryAt},
	{"GarbageCursorIsErrBadCursor", testHistoryBadCursor},
}

// historyData is the fixture of the history tests, in the order it is
// written. Its LastUpdated values are not in write order across resources
// (Observation/c is written after Patient/a with an earlier time) and include
// ties, so that the expected order follows from the contract only.
func historyData() []store.Write {
	ms := time.Millisecond
	pa4 := write("Patient", "a", 4, at(40))
	pa4.Method = store.MethodCreate // re-created after its delete
	return []store.Write{
		write("Patient", "a", 1, at(10)),
		write("Observation", "c", 1, at(5)),
		write("Patient", "b", 1, at(15)),
		write("Patient", "a", 2, at(20)),
		write("Patient", "b", 2, at(20)),     // ties with Patient/a v2
		write("Observation", "a", 1, at(20)), // ties again; same id, other type
		write("Observation", "a", 2, at(25)),
		tombstone("Patient", "a", 3, at(30)),
		write("Encounter", "e", 1, at(30)),
		pa4,
		tombstone("Observation", "c", 2, at(50)),
		write("Patient", "s", 1, at(60)),
		write("Patient", "s", 2, at(60)), // superseded at the instant it was written
		write("Patient", "s", 3, at(60).Add(ms)),
		write("Patient", "s", 4, at(60).Add(2*ms)),
	}
}

// historyQueries are the scopes the history tests query: the system, every
// type of historyData plus one without data, every resource plus one that
// does not exist.
func historyQueries() []store.HistoryQuery {
	return []store.HistoryQuery{
		{},
		{Type: "Patient"},
		{Type: "Observation"},
		{Type: "Encounter"},
		{Type: "Practitioner"},
		{Type: "Patient", ID: "a"},
		{Type: "Patient", ID: "b"},
		{Type: "Patient", ID: "s"},
		{Type: "Observation", ID: "a"},
		{Type: "Observation", ID: "c"},
		{Type: "Encounter", ID: "e"},
		{Type: "Patient", ID: "c"},
	}
}

// expectHistory is the contract's answer to q over data (written in that
// order): the versions in scope that pass the filters, newest LastUpdated
// first and, among equal LastUpdated, the later write first.
func expectHistory(data []store.Write, q store.HistoryQuery) []store.Write {
	type entry struct {
		w     store.Write
		order int
	}
	var out []entry
	for i, w := range data {
		if q.Type != "" && w.Type != q.Type || q.ID != "" && w.ID != q.ID {
			continue
		}
		if !q.Since.IsZero() && w.LastUpdated.Before(q.Since) {
			continue
		}
		if !q.AtHigh.IsZero() && !w.LastUpdated.Before(q.AtHigh) {
			continue // written at or after AtHigh
		}
		if !q.AtLow.IsZero() && slices.ContainsFunc(data, func(n store.Write) bool {
			return n.Type == w.Type && n.ID == w.ID && n.Version == w.Version+1 && !n.LastUpdated.After(q.AtLow)
		}) {
			continue // superseded at or before AtLow
		}
		out = append(out, entry{w, i})
	}
	slices.SortFunc(out, func(a, b entry) int {
		if c := b.w.LastUpdated.Compare(a.w.LastUpdated); c != 0 {
			return c
		}
		return cmp.Compare(b.order, a.order)
	})
	ws := make([]store.Write, len(out))
	for i, e := range out {
		ws[i] = e.w
	}
	return ws
}

// collect pages through q to the end and checks the paging rules on the way:
// no page exceeds Count, only the last page has Next == "", and no page
// before the last is empty (which would let a client loop forever).
func collect(t *testing.T, r store.Reader, q store.HistoryQuery) []*store.Version {
	t.Helper()
	return collectWriting(t, r, q, nil)
}

// collectWriting is collect with between(page) called after each page that
// has a successor, so tests can write while a client pages.
func collectWriting(t *testing.T, r store.Reader, q store.HistoryQuery, between func(page int)) []*store.Version {
	t.Helper()
	var all []*store.Version
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("History %s: more than 10000 pages", describe(q))
		}
		page, err := r.History(ctx(t), q)
		if err != nil {
			t.Fatalf("History %s: %v", describe(q), err)
		}
		if len(page.Versions) > q.Count {
			t.Fatalf("History %s: %d versions on a page of %d", describe(q), len(page.Versions), q.Count)
		}
		all = append(all, page.Versions...)
		if page.Next == "" {
			return all
		}
		if len(page.Versions) == 0 {
			t.Fatalf("History %s: an empty page with a Next cursor", describe(q))
		}
		if between != nil {
			between(pages)
		}
		q.Cursor = page.Next
	}
}

// wantHistory compares got with the expected writes, version by version.
func wantHistory(t *testing.T, q store.HistoryQuery, got []*store.Version, want []store.Write) {
	t.Helper()
	if len(got) == len(want) {
		ok := true
		for i := range got {
			if d := sameVersion(got[i], want[i]); d != "" {
				t.Errorf("History %s: entry %d: %s", describe(q), i, d)
				ok = false
			}
		}
		if ok {
			return
		}
	}
	t.Fatalf("History %s:\n got %s\nwant %s", describe(q), listVersions(got), listWrites(want))
}

func describe(q store.HistoryQuery) string {
	var b strings.Builder
	switch {
	case q.ID != "":
		fmt.Fprintf(&b, "%s/%s", q.Type, q.ID)
	case q.Type != "":
		b.WriteString(q.Type)
	default:
		b.WriteString("(system)")
	}
	fmt.Fprintf(&b, " count=%d", q.Count)
	if q.MaxBytes != 0 {
		fmt.Fprintf(&b, " max_bytes=%d", q.MaxBytes)
	}
	if !q.Since.IsZero() {
		fmt.Fprintf(&b, " since=%s", offset(q.Since))
	}
	if !q.AtLow.IsZero() || !q.AtHigh.IsZero() {
		fmt.Fprintf(&b, " at=[%s,%s)", offset(q.AtLow), offset(q.AtHigh))
	}
	return b.String()
}

// offset shows an instant relative to base, which is how the tests place them.
func offset(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "base" + fmt.Sprintf("%+v", t.Sub(base))
}

func listVersions(vs []*store.Version) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%s@%s", ref(v), offset(v.LastUpdated))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func listWrites(ws []store.Write) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = fmt.Sprintf("%s/%s/_history/%d@%s", w.Type, w.ID, w.Version, offset(w.LastUpdated))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// testHistoryEmpty proves an empty store answers history with an empty last
// page rather than an error.
func testHistoryEmpty(t *testing.T, s *handle) {
	for _, q := range []store.HistoryQuery{{Count: 10}, {Type: "Patient", Count: 1}} {
		page, err := s.History(ctx(t), q)
		if err != nil {
			t.Fatalf("History %s: %v", describe(q), err)
		}
		if len(page.Versions) != 0 || page.Next != "" {
			t.Fatalf("History %s of an empty store: %d versions, Next %q", describe(q), len(page.Versions), page.Next)
		}
	}
}

// testHistoryLevels proves system, type and instance history each return
// exactly the versions in their scope (tombstones included), newest first.
func testHistoryLevels(t *testing.T, s *handle) {
	data := historyData()
	mustPut(t, s, data...)
	for _, q := range historyQueries() {
		q.Count = 1000
		wantHistory(t, q, collect(t, s, q), expectHistory(data, q))
	}
}

// testHistoryTies proves that versions with the same LastUpdated come newest
// write first, and that a page boundary inside a run of ties neither repeats
// nor drops any of them.
func testHistoryTies(t *testing.T, s *handle) {
	var data []store.Write
	for i := range 7 {
		data = append(data, write("Patient", fmt.Sprintf("t%d", i), 1, at(1)))
	}
	data = append(data, write("Patient", "t3", 2, at(1)), write("Observation", "o", 1, at(1)))
	mustPut(t, s, data...)
	for _, count := range []int{1, 2, 3, 100} {
		for _, q := range []store.HistoryQuery{{Count: count}, {Type: "Patient", Count: count}, {Type: "Patient", ID: "t3", Count: count}} {
			wantHistory(t, q, collect(t, s, q), expectHistory(data, q))
		}
	}
}

// testHistoryPaging proves Count-sized pages chained by Next visit every
// version exactly once, in order, for every page size and scope.
func testHistoryPaging(t *testing.T, s *handle) {
	data := historyData()
	mustPut(t, s, data...)
	for _, q := range historyQueries() {
		n := len(expectHistory(data, q))
		for _, count := range []int{1, 2, 3, 4, max(n-1, 1), max(n, 1), n + 1} {
			q.Count = count
			wantHistory(t, q, collect(t, s, q), expectHistory(data, q))
		}
	}
}

// testHistoryStable proves paging is stable while other clients write: the
// pages of a query started before the writes return exactly the versions
// that existed then, each once; new versions never shift later pages. It
// also covers new versions whose LastUpdated lies inside pages not yet read
// (e.g. imported data): the original versions must still each come exactly
// once, and anything extra must be one of the new versions.
func testHistoryStable(t *testing.T, s *handle) {
	written := historyData()
	mustPut(t, s, written...)
	version := map[string]int64{}
	for _, w := range written {
		version[w.Type+"/"+w.ID] = w.Version
	}
	put := func(typ, id string, lu time.Time) store.Write {
		k := typ + "/" + id
		version[k]++
		w := write(typ, id, version[k], lu)
		mustPut(t, s, w)
		written = append(written, w)
		return w
	}

	clock := 100
	for _, q := range []store.HistoryQuery{{Count: 3}, {Type: "Patient", Count: 2}, {Type: "Patient", ID: "s", Count: 1}} {
		want := expectHistory(written, q)
		got := collectWriting(t, s, q, func(int) {
			// Newer versions of resources on this page and later pages,
			// plus a new resource, all stamped after everything else.
			clock++
			put("Patient", "s", at(clock))
			put("Patient", "a", at(clock))
			put("Patient", fmt.Sprintf("new%d", clock), at(clock))
		})
		wantHistory(t, q, got, want)
	}

	// Now new versions stamped in the past, between pages.
	q := store.HistoryQuery{Type: "Observation", Count: 1}
	before := expectHistory(written, q)
	var added []store.Write
	got := collectWriting(t, s, q, func(page int) {
		// Bounded, so a backend that shows such writes on later pages
		// (allowed) still reaches the end.
		if page < 3*len(before) {
			added = append(added, put("Observation", fmt.Sprintf("old%d", page), at(-page)))
		}
	})
	key := func(w store.Write) string { return fmt.Sprintf("%s/%s/_history/%d", w.Type, w.ID, w.Version) }
	seen := map[string]int{}
	for i, v := range got {
		seen[ref(v)]++
		if i > 0 && v.LastUpdated.After(got[i-1].LastUpdated) {
			t.Fatalf("History %s: out of order: %s", describe(q), listVersions(got))
		}
	}
	for _, w := range before {
		if n := seen[key(w)]; n != 1 {
			t.Fatalf("History %s: %s returned %d times, want once: %s", describe(q), key(w), n, listVersions(got))
		}
	}
	for k, n := range seen {
		known := slices.ContainsFunc(before, func(w store.Write) bool { return key(w) == k }) ||
			slices.ContainsFunc(added, func(w store.Write) bool { return key(w) == k })
		if n != 1 || !known {
			t.Fatalf("History %s: unexpected %s (%d times): %s", describe(q), k, n, listVersions(got))
		}
	}
}

// instants are the interesting points of historyData's timeline: each
// LastUpdated, a millisecond either side, and points before and after all.
func instants(data []store.Write) []time.Time {
	pts := []time.Time{at(-100), at(1000)}
	for _, w := range data {
		pts = append(pts, w.LastUpdated, w.LastUpdated.Add(-time.Millisecond), w.LastUpdated.Add(time.Millisecond))
	}
	slices.SortFunc(pts, time.Time.Compare)
	return slices.CompactFunc(pts, time.Time.Equal)
}

// testHistorySince proves Since keeps exactly the versions with LastUpdated
// at or after it (the bound is inclusive), at every level, with paging.
func testHistorySince(t *testing.T, s *handle) {
	data := historyData()
	mustPut(t, s, data...)
	for _, since := range instants(data) {
		for _, q := range historyQueries() {
			q.Since, q.Count = since, 2
			wantHistory(t, q, collect(t, s, q), expectHistory(data, q))
		}
	}
}

// testHistoryAtExample pins _at with one hand-worked window, as a check on
// the reference filter that testHistoryAt relies on: at [20s, 20s+1ms), the
// versions current at some moment are the three written at 20s (later write
// first) and Observation/c v1, written at 5s and replaced only at 50s.
// Patient/a v1 and Patient/b v1 were replaced at exactly 20s, so never
// current in the window.
func testHistoryAtExample(t *testing.T, s *handle) {
	data := historyData()
	mustPut(t, s, data...)
	q := store.HistoryQuery{AtLow: at(20), AtHigh: at(20).Add(time.Millisecond), Count: 10}
	want := []store.Write{data[5], data[4], data[3], data[1]}
	wantHistory(t, q, collect(t, s, q), want)
}

// testHistoryAt proves AtLow/AtHigh keep the versions current at some moment
// in [AtLow, AtHigh): written before AtHigh and not superseded by the next
// version at or before AtLow; alone, combined with Since, and with only one
// bound set.
func testHistoryAt(t *testing.T, s *handle) {
	data := historyData()
	mustPut(t, s, data...)
	pts := instants(data)
	spans := []time.Duration{time.Millisecond, time.Second, 15 * time.Second}
	for _, low := range pts {
		for i, span := range spans {
			for _, q := range historyQueries() {
				// Paging is covered elsewhere; page small only sometimes.
				q.AtLow, q.AtHigh, q.Count = low, low.Add(span), []int{2, 100, 100}[i]
				wantHistory(t, q, collect(t, s, q), expectHistory(data, q))
			}
		}
	}
	for _, p := range pts {
		for _, q := range []store.HistoryQuery{
			{AtLow: p, Count: 4},
			{AtHigh: p, Count: 4},
			{Type: "Patient", AtLow: p, AtHigh: p.Add(time.Second), Since: at(20), Count: 2},
			{AtLow: at(20), AtHigh: at(40), Since: p, Count: 5},
		} {
			wantHistory(t, q, collect(t, s, q), expectHistory(data, q))
		}
	}
}

// testHistoryBadCursor proves a cursor the store never issued is rejected
// with ErrBadCursor, not treated as the first page or a server error.
func testHistoryBadCursor(t *testing.T, s *handle) {
	mustPut(t, s, historyData()...)
	for _, c := range []string{"garbage", "not-a-cursor", "!!!", "%", "{}", "\x00\xff", strings.Repeat("z", 300)} {
		for _, q := range []store.HistoryQuery{{Count: 2}, {Type: "Patient", Count: 2}, {Type: "Patient", ID: "a", Count: 2}} {
			q.Cursor = c
			page, err := s.History(ctx(t), q)
			if !errors.Is(err, store.ErrBadCursor) {
				t.Fatalf("History %s with cursor %q: got %+v, %v; want ErrBadCursor", describe(q), c, page, err)
			}
		}
	}
}

// sized is version `version` of typ/id at lu whose body is exactly n bytes
// (n >= 64): the JSON of write padded with a text field.
func sized(typ, id string, version int64, lu time.Time, n int) store.Write {
	w := write(typ, id, version, lu)
	pad := n - len(w.Body) - len(`,"text":""`)
	if pad < 0 {
		panic(fmt.Sprintf("storetest: a body of %d bytes is too small", n))
	}
	w.Body = fmt.Appendf(w.Body[:len(w.Body)-1], `,"text":%q}`, strings.Repeat("x", pad))
	return w
}

// expectPages splits the versions of a whole history (newest first) into the
// pages the contract prescribes for count and maxBytes: a page takes
// versions until it holds count of them or, with maxBytes > 0, until their
// bodies add up to at least maxBytes (the version that reaches the bound is
// on the page, so a page always holds at least one version).
func expectPages(all []store.Write, count, maxBytes int) [][]store.Write {
	var pages [][]store.Write
	for len(all) > 0 {
		n, size := 0, 0
		for n < len(all) && n < count && (maxBytes == 0 || size < maxBytes) {
			size += len(all[n].Body)
			n++
		}
		pages = append(pages, all[:n])
		all = all[n:]
	}
	return pages
}

// collectPages pages through q to the end, like collect, keeping the pages
// apart.
func collectPages(t *testing.T, r store.Reader, q store.HistoryQuery) [][]*store.Version {
	t.Helper()
	var pages [][]*store.Version
	for {
		if len(pages) > 10000 {
			t.Fatalf("History %s: more than 10000 pages", describe(q))
		}
		page, err := r.History(ctx(t), q)
		if err != nil {
			t.Fatalf("History %s: %v", describe(q), err)
		}
		pages = append(pages, page.Versions)
		if page.Next == "" {
			return pages
		}
		q.Cursor = page.Next
	}
}

// testHistoryMaxBytes proves MaxBytes ends a page once the bodies on it add
// up to at least MaxBytes, the version that reaches the bound included: a
// version larger than MaxBytes forms a page alone, tombstones count zero
// bytes, pages never exceed Count, MaxBytes 0 is no bound, and the pages
// chained by Next still visit every version once, in order.
func testHistoryMaxBytes(t *testing.T, s *handle) {
	var data []store.Write
	sizes := []int{100, 300, 1000, 80, 2000, 0, 120, 700, 5000, 100, 0, 0, 250, 90, 3000}
	version := map[string]int64{}
	for i, n := range sizes {
		typ, id := "Patient", fmt.Sprintf("p%d", i%4)
		if i%5 == 2 {
			typ, id = "Observation", "o"
		}
		version[typ+"/"+id]++
		v := version[typ+"/"+id]
		if n == 0 {
			data = append(data, tombstone(typ, id, v, at(i)))
		} else {
			data = append(data, sized(typ, id, v, at(i), n))
		}
	}
	// Ties on LastUpdated, so that a page can end between them.
	data = append(data, sized("Patient", "t1", 1, at(7), 900), sized("Patient", "t2", 1, at(7), 90))
	mustPut(t, s, data...)

	queries := []store.HistoryQuery{
		{},
		{Type: "Patient"},
		{Type: "Patient", ID: "p0"},
		{Type: "Observation", ID: "o"},
		{Since: at(5)},
		{AtLow: at(8), AtHigh: at(12)},
	}
	for _, q := range queries {
		want := expectHistory(data, q)
		for _, count := range []int{1, 2, 3, 5, 100} {
			for _, maxBytes := range []int{0, 1, 90, 100, 101, 399, 400, 1000, 1500, 3000, 6000, 1 << 30} {
				q.Count, q.MaxBytes = count, maxBytes
				got := collectPages(t, s, q)
				wantPages := expectPages(want, count, maxBytes)
				var flat []*store.Version
				for _, p := range got {
					flat = append(flat, p...)
				}
				// Every version once, in order, whatever the pages.
				wantHistory(t, q, flat, want)
				ok := len(got) == max(len(wantPages), 1)
				for i := 0; ok && i < len(wantPages); i++ {
					ok = len(got[i]) == len(wantPages[i])
				}
				if !ok {
					gotSizes := make([]int, len(got))
					for i, p := range got {
						gotSizes[i] = len(p)
					}
					wantSizes := make([]int, len(wantPages))
					for i, p := range wantPages {
						wantSizes[i] = len(p)
					}
					t.Fatalf("History %s: pages of %v versions, want %v", describe(q), gotSizes, wantSizes)
				}
			}
		}
	}
}

// testHistoryAtSnapshot proves the pages of an _at query keep answering for
// the moment the first page was read: a version that was current in the
// window then stays on its later page even after a new version, written
// between two page fetches with a LastUpdated at or before AtLow, has
// superseded it. (The window lies in the future of the data, as when a
// client asks what is current "now" while others write.)
func testHistoryAtSnapshot(t *testing.T, s *handle) {
	written := []store.Write{
		write("Patient", "a", 1, at(10)),
		write("Patient", "b", 1, at(20)),
		write("Observation", "o", 1, at(25)),
		write("Patient", "c", 1, at(30)),
		write("Patient", "b", 2, at(35)),
		write("Patient", "d", 1, at(40)),
		write("Observation", "p", 1, at(45)),
	}
	mustPut(t, s, written...)
	version := map[string]int64{}
	for _, w := range written {
		version[w.Type+"/"+w.ID] = w.Version
	}
	high := at(3600)
	clock := 100
	for _, q := range []store.HistoryQuery{
		{Count: 2},
		{Count: 1},
		{Type: "Patient", Count: 2},
		{Type: "Patient", Count: 1},
		{Type: "Patient", ID: "b", Count: 1},
		{Count: 2, MaxBytes: 1},
	} {
		q.AtLow, q.AtHigh = high.Add(-time.Millisecond), high
		want := expectHistory(written, q)
		got := collectWriting(t, s, q, func(int) {
			// A new version of every resource, later than all of the data
			// (so it sorts before the cursor) but at or before AtLow.
			clock++
			for _, k := range slices.Sorted(maps.Keys(version)) {
				typ, id, _ := strings.Cut(k, "/")
				version[k]++
				w := write(typ, id, version[k], at(clock))
				mustPut(t, s, w)
				written = append(written, w)
			}
		})
		wantHistory(t, q, got, want)
	}
}
