package sqlite

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// coveredPatients are Patients whose names and addresses have parts that
// only name (address) indexes (text, prefix, suffix; lines, text) and
// parts that family and given (address-city, …) index too.
var coveredPatients = map[string]string{
	"p1": `{"resourceType":"Patient","name":[{"family":"Müller","given":["Anna"]}]}`,
	"p2": `{"resourceType":"Patient","name":[{"text":"Xavier Zed","prefix":["Dr"],"suffix":["PhD"]}]}`,
	"p3": `{"resourceType":"Patient","name":[{"family":"Baker","given":["Zoe","Carl"]}],"address":[{"city":"Paris","country":"FR","line":["1 Rue"]}]}`,
	"p4": `{"resourceType":"Patient","gender":"other","address":[{"postalCode":"75001","text":"Somewhere"}]}`,
	"p5": `{"resourceType":"Patient","name":[{"given":["Émile"]}]}`,
}

// coveredBy maps the parameters whose values name and address also
// indexed before they were linked as covered (see search.Param.Covered).
var coveredBy = map[string]string{
	"family": "name", "given": "name",
	"address-city": "address", "address-state": "address", "address-postalcode": "address", "address-country": "address",
}

// oldRows adds the keys a covering parameter had before: each key of a
// covered parameter, under the covering one's code too.
func oldRows(r search.Rows) search.Rows {
	keys := slices.Clone(r.Keys)
	for _, k := range r.Keys {
		param, rest, _ := strings.Cut(k, "\x1f")
		code, mod, _ := strings.Cut(param, ":")
		if to, ok := coveredBy[code]; ok {
			if mod != "" {
				to += ":" + mod
			}
			keys = append(keys, to+"\x1f"+rest)
		}
	}
	slices.Sort(keys)
	r.Keys = slices.Compact(keys)
	return r
}

// TestCoveredParamSearch: name and address keep keys only for the parts
// no other parameter indexes, and every kind of search on them (prefix,
// :exact, :contains, :missing, the phonetic alias, _sort both ways, with
// and without a driving clause) finds what it found when they kept every
// key, on rows written now and on rows written the old way.
func TestCoveredParamSearch(t *testing.T) {
	reg, err := search.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range coveredPatients {
			if !yield(id) {
				return
			}
		}
	})
	newRows := map[string]search.Rows{}
	for _, id := range ids {
		var res map[string]any
		d := json.NewDecoder(strings.NewReader(coveredPatients[id]))
		d.UseNumber()
		if err := d.Decode(&res); err != nil {
			t.Fatal(err)
		}
		rows, err := reg.ExtractRows(t.Context(), "Patient", res)
		if err != nil {
			t.Fatal(err)
		}
		newRows[id] = rows
	}
	// What is no longer stored: a given that is neither the least nor the
	// greatest value of the names, and every :exact key of family and given.
	for _, k := range []string{"name\x1fcarl", "name:exact\x1fCarl", "name:exact\x1fBaker", "address\x1ffr", "address:exact\x1fParis"} {
		if slices.Contains(newRows["p3"].Keys, k) {
			t.Errorf("p3 keys hold %q, which a covered parameter holds", k)
		}
	}
	if !slices.Contains(newRows["p3"].Keys, "address\x1f1 rue") {
		t.Errorf("p3 keys lack the address line: %q", newRows["p3"].Keys)
	}

	tests := []struct {
		query string
		want  string // ids in order for a _sort, else sorted
	}{
		{"name=mul", "p1"},
		{"name=anna", "p1"},
		{"name=xav", "p2"},
		{"name=dr", "p2"},
		{"name=phd", "p2"},
		{"name=zoe", "p3"},
		{"name=carl", "p3"},
		{"name=emile", "p5"},
		{"name=mul,zoe", "p1 p3"},
		{"name=nobody", ""},
		{"name:exact=Müller", "p1"},
		{"name:exact=muller", ""},
		{"name:exact=Zoe", "p3"},
		{"name:exact=Dr", "p2"},
		{"name:exact=Xavier Zed", "p2"},
		{"name:contains=ll", "p1"},
		{"name:contains=ar", "p3"},
		{"name:contains=mil", "p5"},
		{"name:missing=true", "p4"},
		{"name:missing=false", "p1 p2 p3 p5"},
		{"phonetic=zo", "p3"},
		{"phonetic:exact=Anna", "p1"},
		{"family=mul", "p1"},
		{"given=zoe", "p3"},
		{"address=paris", "p3"},
		{"address=fr", "p3"},
		{"address=1 rue", "p3"},
		{"address=75001", "p4"},
		{"address=some", "p4"},
		{"address:exact=Paris", "p3"},
		{"address:contains=500", "p4"},
		{"address:missing=true", "p1 p2 p5"},
		{"address-city=paris", "p3"},
		// Ascending by each one's least value: anna, baker, dr, emile,
		// then the one without a name; descending by the greatest: zoe,
		// xavier zed, muller, emile.
		{"_sort=name", "p1 p3 p2 p5 p4"},
		{"_sort=-name", "p3 p2 p1 p5 p4"},
		{"_sort=phonetic", "p1 p3 p2 p5 p4"},
		{"name:missing=false&_sort=name", "p1 p3 p2 p5"},
		{"name=a,z,e,d&_sort=-name", "p3 p2 p1 p5"},
		{"_sort=address", "p3 p4 p1 p2 p5"},
	}
	for _, way := range []string{"new", "old"} {
		s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
		for i, id := range ids {
			rows := newRows[id]
			if way == "old" {
				rows = oldRows(rows)
			}
			w := store.Write{Type: "Patient", ID: id, Version: 1, LastUpdated: ts(i), Method: store.MethodCreate,
				Body: []byte(coveredPatients[id]), Index: &rows}
			if err := s.Put(t.Context(), w); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range tests {
			vals, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			p, err := reg.Parse([]string{"Patient"}, vals, search.ParseOptions{Strict: true, DefaultCount: 100, Now: time.Now()})
			if err != nil {
				t.Fatalf("%s: %v", tt.query, err)
			}
			page, err := s.Search(t.Context(), p.Query)
			if err != nil {
				t.Fatalf("%s rows, %s: %v", way, tt.query, err)
			}
			var got []string
			for _, m := range page.Matches {
				got = append(got, m.ID)
			}
			if len(p.Query.Sort) == 0 {
				slices.Sort(got)
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("%s rows, %s: %q, want %q", way, tt.query, g, tt.want)
			}
		}
		s.Close()
	}
}
