package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var crudTests = []test{
	{"CompareAndSwapVersions", testCompareAndSwap},
	{"UnknownResourceIsNotFound", testUnknown},
	{"TombstoneAndResurrection", testTombstone},
	{"SameIDUnderTwoTypesIsTwoResources", testTypesSeparate},
	{"IDsAreCaseSensitive", testIDCase},
	{"BodyRoundTripsByteForByte", testBodies},
	{"LastUpdatedRoundTripsInUTC", testLastUpdated},
}

// testCompareAndSwap proves Put applies only Version == current+1: a create
// is Version 1 when the resource is absent, a repeated or skipping version is
// ErrConflict and leaves the stored state alone, and every version stays
// readable.
func testCompareAndSwap(t *testing.T, s *handle) {
	v1 := write("Patient", "p1", 1, at(1))
	mustPut(t, s, v1)
	wantVersion(t, "Read after create", mustRead(t, s, "Patient", "p1"), v1)

	steps := []struct {
		what string
		w    store.Write
	}{
		{"create again (Version 1 while current is 1)", write("Patient", "p1", 1, at(2))},
		{"skip a version (Version 3 while current is 1)", write("Patient", "p1", 3, at(2))},
	}
	for _, st := range steps {
		wantErr(t, st.what, s.Put(ctx(t), st.w), store.ErrConflict)
		wantVersion(t, "Read after rejected "+st.what, mustRead(t, s, "Patient", "p1"), v1)
	}

	v2 := write("Patient", "p1", 2, at(3))
	mustPut(t, s, v2)
	wantVersion(t, "Read after update", mustRead(t, s, "Patient", "p1"), v2)
	wantVersion(t, "VRead 1", mustVRead(t, s, "Patient", "p1", 1), v1)
	wantVersion(t, "VRead 2", mustVRead(t, s, "Patient", "p1", 2), v2)
	_, err := s.VRead(ctx(t), "Patient", "p1", 3)
	wantErr(t, "VRead of a version not written yet", err, store.ErrNotFound)

	// A stale writer that read version 1 must lose.
	wantErr(t, "stale update (Version 2 while current is 2)", s.Put(ctx(t), write("Patient", "p1", 2, at(4))), store.ErrConflict)
	wantVersion(t, "VRead 2 after stale update", mustVRead(t, s, "Patient", "p1", 2), v2)
}

// testUnknown proves reads of resources (and versions) never written are
// ErrNotFound, including for a known type and for version numbers around an
// existing resource.
func testUnknown(t *testing.T, s *handle) {
	mustPut(t, s, write("Patient", "known", 1, at(1)))
	cases := []struct {
		typ, id string
		vread   bool
		version int64
	}{
		{"Patient", "missing", false, 0},
		{"Observation", "known", false, 0},
		{"Patient", "missing", true, 1},
		{"Patient", "known", true, 0},
		{"Patient", "known", true, 2},
	}
	for _, c := range cases {
		var err error
		what := fmt.Sprintf("Read %s/%s", c.typ, c.id)
		if !c.vread {
			_, err = s.Read(ctx(t), c.typ, c.id)
		} else {
			what = fmt.Sprintf("VRead %s/%s/_history/%d", c.typ, c.id, c.version)
			_, err = s.VRead(ctx(t), c.typ, c.id, c.version)
		}
		wantErr(t, what, err, store.ErrNotFound)
	}
}

// testTombstone proves a delete is a version like any other: Read returns it
// with Deleted set and no body, older versions stay readable, and a later Put
// resurrects the resource with the next version number.
func testTombstone(t *testing.T, s *handle) {
	v1 := write("Patient", "p1", 1, at(1))
	v2 := write("Patient", "p1", 2, at(2))
	v3 := tombstone("Patient", "p1", 3, at(3))
	mustPut(t, s, v1, v2, v3)

	got := mustRead(t, s, "Patient", "p1")
	wantVersion(t, "Read of a deleted resource", got, v3)
	if !got.Deleted || len(got.Body) != 0 {
		t.Fatalf("Read of a deleted resource: Deleted=%v, %d body bytes; want a tombstone", got.Deleted, len(got.Body))
	}
	wantVersion(t, "VRead of the tombstone", mustVRead(t, s, "Patient", "p1", 3), v3)
	wantVersion(t, "VRead 1 after delete", mustVRead(t, s, "Patient", "p1", 1), v1)
	wantVersion(t, "VRead 2 after delete", mustVRead(t, s, "Patient", "p1", 2), v2)

	// Resurrection must continue the numbering, not restart it.
	wantErr(t, "create over a tombstone with Version 1", s.Put(ctx(t), write("Patient", "p1", 1, at(4))), store.ErrConflict)
	v4 := write("Patient", "p1", 4, at(4))
	v4.Method = store.MethodCreate // e.g. an update-as-create after the delete
	mustPut(t, s, v4)
	wantVersion(t, "Read after resurrection", mustRead(t, s, "Patient", "p1"), v4)
	wantVersion(t, "VRead of the tombstone after resurrection", mustVRead(t, s, "Patient", "p1", 3), v3)

	// Deleting twice in a row is two tombstones.
	v5 := tombstone("Patient", "p1", 5, at(5))
	v6 := tombstone("Patient", "p1", 6, at(6))
	mustPut(t, s, v5, v6)
	wantVersion(t, "Read after a second delete", mustRead(t, s, "Patient", "p1"), v6)
	wantVersion(t, "VRead of the first of two tombstones", mustVRead(t, s, "Patient", "p1", 5), v5)
}

// testTypesSeparate proves the resource key is (type, id): the same id under
// two types has independent versions and bodies.
func testTypesSeparate(t *testing.T, s *handle) {
	p1 := write("Patient", "x", 1, at(1))
	p2 := write("Patient", "x", 2, at(2))
	o1 := write("Observation", "x", 1, at(3))
	mustPut(t, s, p1, p2, o1)
	wantVersion(t, "Read Patient/x", mustRead(t, s, "Patient", "x"), p2)
	wantVersion(t, "Read Observation/x", mustRead(t, s, "Observation", "x"), o1)
	_, err := s.VRead(ctx(t), "Observation", "x", 2)
	wantErr(t, "VRead Observation/x/_history/2", err, store.ErrNotFound)
	wantErr(t, "Put Observation/x v3", s.Put(ctx(t), write("Observation", "x", 3, at(4))), store.ErrConflict)
	o2 := tombstone("Observation", "x", 2, at(5))
	mustPut(t, s, o2)
	wantVersion(t, "Read Patient/x after deleting Observation/x", mustRead(t, s, "Patient", "x"), p2)
}

// testIDCase proves ids are compared exactly: FHIR ids are case-sensitive,
// so "abc" and "ABC" are two resources.
func testIDCase(t *testing.T, s *handle) {
	lower := write("Patient", "abc", 1, at(1))
	upper := write("Patient", "ABC", 1, at(2))
	mustPut(t, s, lower, upper)
	wantVersion(t, "Read Patient/abc", mustRead(t, s, "Patient", "abc"), lower)
	wantVersion(t, "Read Patient/ABC", mustRead(t, s, "Patient", "ABC"), upper)
	_, err := s.Read(ctx(t), "patient", "abc")
	wantErr(t, "Read patient/abc (type in lower case)", err, store.ErrNotFound)
}

// testBodies proves bodies come back byte for byte: non-ASCII text,
// insignificant whitespace, escapes, NUL bytes and a large document.
func testBodies(t *testing.T, s *handle) {
	big := `{"resourceType":"Binary","id":"big","data":"` + strings.Repeat("QUJD", 256*1024) + `"}`
	cases := []struct {
		id   string
		body []byte
	}{
		{"unicode", []byte(`{"resourceType":"Patient","id":"unicode","name":[{"text":"Zoë Øster 山田 🙂"}]}`)},
		{"spacing", []byte("{\n  \"resourceType\" : \"Patient\",\t\"id\":\"spacing\"  }\n")},
		{"escapes", []byte(`{"resourceType":"Patient","id":"escapes","text":"\u00e9\"\\\/\n"}`)},
		{"nul", []byte("{\"resourceType\":\"Patient\",\"id\":\"nul\"}\x00\xff")},
		{"big", []byte(big)},
	}
	for _, c := range cases {
		w := write("Patient", c.id, 1, at(1))
		w.Body = bytes.Clone(c.body)
		mustPut(t, s, w)
		// The caller may reuse its buffer after Put returns.
		for i := range w.Body {
			w.Body[i] = 'x'
		}
		w.Body = c.body
		wantVersion(t, "Read "+c.id, mustRead(t, s, "Patient", c.id), w)
		wantVersion(t, "VRead "+c.id, mustVRead(t, s, "Patient", c.id, 1), w)
	}
}

// testLastUpdated proves LastUpdated round-trips at millisecond precision
// (at least) and comes back in UTC, whatever zone it was written in.
func testLastUpdated(t *testing.T, s *handle) {
	zone := time.FixedZone("UTC+05:30", 5*3600+30*60)
	cases := []struct {
		id string
		lu time.Time
	}{
		{"whole-second", time.Date(2023, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"millis", time.Date(2024, 2, 29, 8, 15, 30, 123_000_000, time.UTC)},
		{"zoned", time.Date(2024, 6, 1, 3, 0, 0, 999_000_000, zone)},
		{"old", time.Date(1970, 1, 1, 0, 0, 0, 1_000_000, time.UTC)},
		{"before-epoch", time.Date(1969, 7, 20, 20, 17, 40, 500_000_000, time.UTC)},
		{"far", time.Date(2999, 1, 1, 0, 0, 0, 7_000_000, time.UTC)},
	}
	for _, c := range cases {
		w := write("Patient", c.id, 1, c.lu)
		mustPut(t, s, w)
		for _, got := range []*store.Version{mustRead(t, s, "Patient", c.id), mustVRead(t, s, "Patient", c.id, 1)} {
			if !got.LastUpdated.Equal(c.lu) {
				t.Errorf("%s: LastUpdated %v, want %v", c.id, got.LastUpdated, c.lu)
			}
			if got.LastUpdated.Location() != time.UTC {
				t.Errorf("%s: LastUpdated in %v, want UTC", c.id, got.LastUpdated.Location())
			}
		}
	}
	page, err := s.History(ctx(t), store.HistoryQuery{Type: "Patient", ID: "zoned", Count: 10})
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if len(page.Versions) != 1 || !page.Versions[0].LastUpdated.Equal(cases[2].lu) || page.Versions[0].LastUpdated.Location() != time.UTC {
		t.Fatalf("History of Patient/zoned: %+v, want one version at %v in UTC", page.Versions, cases[2].lu)
	}
}
