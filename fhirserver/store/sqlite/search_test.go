package sqlite

import (
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/compile"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/cursor"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
)

// TestSearchPlans: the query shapes of the issue start from the selective
// index lookup and never scan an index table or the resources.
func TestSearchPlans(t *testing.T) {
	s, run := planStore(t)
	plan := func(q *search.Query) (string, any, string) {
		c := &compile.Compiler{Ctx: t.Context(), Estimate: run.estimate, Tune: compile.DefaultTuning}
		p, err := c.Choose(q, len(q.Sort) > 0)
		if err != nil {
			t.Fatal(err)
		}
		from, where, err := c.FromWhere(q, "a", p)
		if err != nil {
			t.Fatal(err)
		}
		sq := (&compile.SQL{}).Text("SELECT a.rid ").Append(from).Text(" WHERE ").Append(where).Text(" ORDER BY " + compile.RidExpr("a", p) + " LIMIT 21")
		return sq.String(), sq.Args()[0], strings.Join(explain(t, s.reader, sq.String(), sq.Args()...), "\n")
	}
	// Every observation has status final: the least selective key.
	status := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"status\x1ffinal"}}}}
	subject := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"subject\x1fPatient/p7"}}}}
	for _, c := range []struct {
		name  string
		q     *search.Query
		first string // the plan's first line
		avoid []string
	}{
		// status is common, subject selective: whatever the clause order,
		// the subject lookup drives, and the page needs no sort.
		{"status then subject", &search.Query{Types: []string{"Observation"}, Where: []search.Clause{status, subject}},
			"SEARCH search_keys USING PRIMARY KEY (key=? AND type=?", []string{"SCAN", "USE TEMP B-TREE FOR ORDER BY"}},
		{"subject then status", &search.Query{Types: []string{"Observation"}, Where: []search.Clause{subject, status}},
			"SEARCH search_keys USING PRIMARY KEY (key=? AND type=?", []string{"SCAN", "USE TEMP B-TREE FOR ORDER BY"}},
		{"family prefix and birthdate", familyBirthQuery(rand.New(rand.NewPCG(5, 5)), 4),
			"CO-ROUTINE", []string{"SCAN search_keys", "SCAN search_dates", "SCAN a"}},
	} {
		sql, arg, p := plan(c.q)
		if !strings.HasPrefix(p, c.first) {
			t.Errorf("%s: plan starts elsewhere:\n%s\n%s", c.name, sql, p)
		}
		for _, line := range strings.Split(p, "\n") {
			for _, a := range c.avoid {
				if line == a || strings.HasPrefix(line, a+" ") {
					t.Errorf("%s: plan has %q:\n%s\n%s", c.name, a, sql, p)
				}
			}
		}
		if strings.HasPrefix(c.name, "code ") || strings.HasPrefix(c.name, "subject ") {
			if arg != "subject\x1fPatient/p7" {
				t.Errorf("%s: the driver is %q, want the subject key", c.name, arg)
			}
		}
	}
}

// TestMigrateFromVersion1: a database written by the schema before search
// keeps its versions and pointers, and its resources get rids in write
// order (they have no index rows until they are written again).
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open(driverName, dsn(path, writerRole, defaultSynchronous))
	if err != nil {
		t.Fatal(err)
	}
	stmts := append(slices.Clone(migrations[0]),
		fmt.Sprintf(`PRAGMA application_id = %d`, applicationID), `PRAGMA user_version = 1`,
		`INSERT INTO resource_versions (type, id, version, last_updated, method, deleted, body) VALUES
			('Patient', 'b', 1, 1, 'POST', 0, x'7b7d'), ('Patient', 'a', 1, 2, 'POST', 0, x'7b7d'),
			('Patient', 'b', 2, 3, 'DELETE', 1, NULL)`,
		`INSERT INTO resources (type, id, version, seq, deleted, last_updated) VALUES
			('Patient', 'a', 1, 2, 0, 2), ('Patient', 'b', 2, 3, 1, 3)`)
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	db.Close()

	s := openTemp(t, path)
	defer s.Close()
	checkConsistent(t, s)
	var rids []string
	rows, err := s.reader.Query(`SELECT id || ':' || rid FROM resources ORDER BY rid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		rows.Scan(&r)
		rids = append(rids, r)
	}
	rows.Close()
	if fmt.Sprint(rids) != "[a:1 b:2]" {
		t.Errorf("rids %v, want a before b (pointer seq order)", rids)
	}
	page, err := s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Count: 10})
	if err != nil || len(page.Matches) != 1 || page.Matches[0].ID != "a" {
		t.Fatalf("search after migration: %+v, %v", page, err)
	}
	w := store.Write{Type: "Patient", ID: "a", Version: 2, LastUpdated: ts(5), Method: store.MethodUpdate, Body: []byte(`{}`),
		Index: &search.Rows{Keys: []string{"family\x1fx"}}}
	if err := s.Put(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	page, err = s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Count: 10,
		Where: []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{"family\x1fx"}}}}}})
	if err != nil || len(page.Matches) != 1 || page.Matches[0].Version != 2 {
		t.Fatalf("search after an update: %+v, %v", page, err)
	}
}

// TestMigrateSortValues: the sort rows of a version 5 database become one
// JSON object per resource, every value read back with its type and
// value (reals exactly, the open bounds ±max float included), and the
// old table is gone.
func TestMigrateSortValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open(driverName, dsn(path, writerRole, defaultSynchronous))
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range migrations[:5] {
		stmts = append(stmts, m...)
	}
	stmts = append(stmts, fmt.Sprintf(`PRAGMA application_id = %d`, applicationID), `PRAGMA user_version = 5`,
		`INSERT INTO resource_versions (type, id, version, last_updated, method, deleted, body) VALUES
			('Patient', 'a', 1, 1, 'POST', 0, x'7b7d'), ('Patient', 'b', 1, 2, 'POST', 0, x'7b7d')`,
		`INSERT INTO resources (type, id, version, seq, deleted, last_updated) VALUES
			('Patient', 'a', 1, 1, 0, 1), ('Patient', 'b', 1, 2, 0, 2)`)
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	rows := [][]any{
		{1, "family", "Patient", "Müller \"x\"", "Zed"},
		{1, "birthdate", "Patient", int64(-62135596800000000), int64(253402300800000000)},
		{1, "n", "Patient", 0.1, math.MaxFloat64},
		{1, "m", "Patient", -math.MaxFloat64, 100.0},
		{2, "combo", "Patient", nil, nil},
	}
	// Long text is cut where the parameter's key would be: a key of
	// "cutN" holds 1019 bytes of value, and the cut falls within a 2-,
	// 3- and 4-byte character, or between two ASCII ones.
	for i, long := range []string{
		strings.Repeat("a", 1018) + "é" + "zzz",
		strings.Repeat("a", 1017) + "€zz",
		strings.Repeat("a", 1016) + "😀z",
		strings.Repeat("a", 1019) + "bc",
	} {
		if cut := (search.Entry{Param: "cutN", Kind: search.KindString, Str: long}).Keys()[0]; len(cut) >= len("cutN\x1f")+len(long) {
			t.Fatalf("case %d is not cut", i)
		}
		rows = append(rows, []any{2, "cut" + strconv.Itoa(i), "Patient", long, "x"})
	}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO search_sorts (rid, param, type, lo, hi) VALUES (?, ?, ?, ?, ?)`, r...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := openTemp(t, path)
	defer s.Close()
	for _, r := range rows {
		for i, at := range []string{"[0]", "[1]"} {
			var got any
			err := s.reader.QueryRow(`SELECT json_extract(vals, ?) FROM search_sort_values WHERE rid = ?`, `$."`+r[1].(string)+`"`+at, r[0]).Scan(&got)
			if err != nil {
				t.Fatalf("%v: %v", r, err)
			}
			want := r[3+i]
			if str, ok := want.(string); ok {
				param := r[1].(string)
				want = search.Entry{Param: param, Kind: search.KindString, Str: str}.Keys()[0][len(param)+1:]
			}
			if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want, want) {
				t.Errorf("%s%s of rid %v: %T %v, want %T %v", r[1], at, r[0], got, got, want, want)
			}
		}
	}
	var n int
	if err := s.reader.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name LIKE 'search_sorts%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d old sort tables or indexes left (%v)", n, err)
	}
	page, err := s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Count: 10, Sort: []search.Sort{{Param: "birthdate", Desc: true}}})
	if err != nil || len(page.Matches) != 2 || page.Matches[0].ID != "a" {
		t.Fatalf("sorted search after migration: %+v, %v", page, err)
	}
}

// TestSortValuesJSON: the sort values a write stores read back in SQLite
// with the type and value they were written with.
func TestSortValuesJSON(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	sorts := []search.SortRow{
		{Param: "b", Lo: int64(-1), Hi: int64(1 << 60)},
		{Param: "c", Lo: nil, Hi: nil},
		{Param: "n", Lo: 100.0, Hi: 1e300},
		{Param: "s", Lo: "a\"b\\c\x00\u2028é<", Hi: ""},
		{Param: "x", Lo: -math.MaxFloat64, Hi: math.SmallestNonzeroFloat64},
	}
	vals, err := sortValues(sorts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sorts {
		for i, at := range []string{"[0]", "[1]"} {
			var got any
			if err := s.reader.QueryRow(`SELECT json_extract(?, ?)`, vals, `$."`+r.Param+`"`+at).Scan(&got); err != nil {
				t.Fatal(err)
			}
			want := []any{r.Lo, r.Hi}[i]
			if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want, want) {
				t.Errorf("%s%s: %T %v, want %T %v (%s)", r.Param, at, got, got, want, want, vals)
			}
		}
	}
	if _, err := sortValues([]search.SortRow{{Param: "n", Lo: math.Inf(1)}}); err == nil {
		t.Error("an infinite sort value was accepted")
	}
}

// TestFetchPlans: the statements that read a page's versions and follow
// its includes look rows up by key, never scan.
func TestFetchPlans(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for _, c := range []struct {
		sql  string
		args []any
		want []string
	}{
		{fetchSQL, []any{"[1,2]"}, []string{"SEARCH v USING INTEGER PRIMARY KEY (rowid=?)"}},
		{fetchRidsSQL, []any{"[1,2]"}, []string{"SEARCH r USING INTEGER PRIMARY KEY (rowid=?)", "SEARCH v USING INTEGER PRIMARY KEY (rowid=?)"}},
		{includeKeysSQL + " AND key >= ? AND key < ?", []any{"[1]", "subject\x1f", "subject\x20"}, []string{"USING COVERING INDEX search_keys_by_rid (rid=?"}},
		{resolveSQL, []any{`[["Patient","a"]]`}, []string{"SEARCH r USING INDEX sqlite_autoindex_resources_1 (type=? AND id=?)"}},
		{revIncludeSQL, []any{`["subject\u001fPatient/a"]`, "Observation"}, []string{"USING PRIMARY KEY (key=? AND type=?)", "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)"}},
	} {
		lines := explain(t, s.reader, c.sql, c.args...)
		p := strings.Join(lines, "\n")
		for _, w := range c.want {
			if !strings.Contains(p, w) {
				t.Errorf("%s\nplan:\n%s\nwant %q", c.sql, p, w)
			}
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "SCAN search") || l == "SCAN r" || l == "SCAN v" {
				t.Errorf("%s\nplan scans:\n%s", c.sql, p)
			}
		}
	}
}

// TestReindex: rows are replaced for the version they were extracted
// from, and an update for a superseded or deleted version is skipped.
func TestReindex(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	put(t, s, "Patient", "a", 1, ts(1))
	put(t, s, "Patient", "b", 1, ts(2))
	put(t, s, "Patient", "b", 2, ts(3))
	if err := s.Put(t.Context(), store.Write{Type: "Patient", ID: "c", Version: 1, LastUpdated: ts(4), Method: store.MethodCreate, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), store.Write{Type: "Patient", ID: "c", Version: 2, LastUpdated: ts(5), Method: store.MethodDelete, Deleted: true}); err != nil {
		t.Fatal(err)
	}
	rows := &search.Rows{Keys: []string{"family\x1fx"}}
	n, err := s.Reindex(t.Context(), []store.IndexUpdate{
		{Type: "Patient", ID: "a", Version: 1, Rows: rows},
		{Type: "Patient", ID: "b", Version: 1, Rows: rows},  // superseded
		{Type: "Patient", ID: "c", Version: 2, Rows: rows},  // deleted
		{Type: "Patient", ID: "zz", Version: 1, Rows: rows}, // unknown
	})
	if err != nil || n != 1 {
		t.Fatalf("Reindex: %d, %v; want 1 applied", n, err)
	}
	page, err := s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Count: 10,
		Where: []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{"family\x1fx"}}}}}})
	if err != nil || len(page.Matches) != 1 || page.Matches[0].ID != "a" {
		t.Fatalf("search after reindex: %+v, %v", page, err)
	}
}

// TestConformanceTinyPlanner runs the conformance suite with planner
// thresholds small enough that the fixture's clauses count as large: the
// walks of a whole type and the drivers chosen for sorted queries face the
// suite's expectations too.
//
// The sortwalk variant makes every query sorted by a date that can walk
// its date rows do so (the plan otherwise only chosen when every clause
// is large).
//
// The tuning is read by searches only, so only the groups that search run
// again; TestConformance runs the others.
func TestConformanceTinyPlanner(t *testing.T) {
	opts := suiteOptions
	opts.Groups = []string{"Search", "Purge", "Rewrite", "Lifecycle"}
	for _, tune := range []compile.Tuning{
		{EstimateLimit: 1, SelectiveEnough: 1},
		{EstimateLimit: 3, SelectiveEnough: 2},
		{EstimateLimit: 2000, SelectiveEnough: 64, SortWalk: true},
	} {
		name := fmt.Sprintf("%d-%d", tune.EstimateLimit, tune.SelectiveEnough)
		if tune.SortWalk {
			name = "sortwalk"
		}
		t.Run(name, func(t *testing.T) {
			storetest.RunWith(t, func(t *testing.T) store.Store {
				s, err := open(t.Context(), filepath.Join(t.TempDir(), "kiln.db"), options{synchronous: defaultSynchronous, tune: &tune})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, opts)
		})
	}
}

// TestSortWalkPlan: a sorted query whose clauses are all large walks the
// first sort key's index in order and stops at the page, with or without
// a cursor, in both directions; a selective clause still drives.
func TestSortWalkPlan(t *testing.T) {
	s, run := planStore(t)
	tune := compile.Tuning{EstimateLimit: 50, SelectiveEnough: 5}
	status := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"status\x1ffinal"}}}}
	subject := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"subject\x1fPatient/p7"}}}}
	obs := []string{"Observation"}
	for _, c := range []struct {
		name string
		q    *search.Query
		walk bool
	}{
		{"status, -date", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "date", Desc: true, Type: "date"}}}, true},
		{"status, date", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "date", Type: "date"}}}, true},
		{"no clause, -date, _id", &search.Query{Types: obs, Count: 5, Sort: []search.Sort{{Param: "date", Desc: true, Type: "date"}, {Param: "_id"}}}, true},
		{"status, -date, value-quantity", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "date", Desc: true, Type: "date"}, {Param: "value-quantity"}}}, true},
		{"status and subject, -date", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status, subject}, Sort: []search.Sort{{Param: "date", Desc: true, Type: "date"}}}, false},
		{"status, value-quantity (no type given)", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "value-quantity"}}}, false},
		{"status, value-quantity", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "value-quantity", Type: "quantity"}}}, true},
		{"status, -value-quantity (no index by high)", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "value-quantity", Desc: true, Type: "quantity"}}}, false},
		{"status, _lastUpdated", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}, Sort: []search.Sort{{Param: "_lastUpdated"}}}, false},
		{"status, unsorted", &search.Query{Types: obs, Count: 5, Where: []search.Clause{status}}, false},
		{"family", &search.Query{Types: []string{"Patient"}, Count: 5, Sort: []search.Sort{{Param: "family", Type: "string"}}}, true},
		{"-family, birthdate", &search.Query{Types: []string{"Patient"}, Count: 5, Sort: []search.Sort{{Param: "family", Desc: true, Type: "string"}, {Param: "birthdate", Type: "date"}}}, true},
		{"-name (a token-like type)", &search.Query{Types: []string{"Patient"}, Count: 5, Sort: []search.Sort{{Param: "name", Desc: true, Type: "token"}}}, false},
	} {
		c1 := &compile.Compiler{Ctx: t.Context(), Estimate: run.estimate, Tune: tune}
		p, err := c1.Choose(c.q, len(c.q.Sort) > 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.SortWalk != c.walk {
			t.Errorf("%s: sortWalk %v, want %v", c.name, p.SortWalk, c.walk)
		}
		if !p.SortWalk {
			continue
		}
		from, where, err := c1.FromWhere(c.q, "a", p)
		if err != nil {
			t.Fatal(err)
		}
		index, at := "SEARCH s0 USING COVERING INDEX search_dates_by_low (param=? AND type=?", any(int64(1_500_000_000_000_000))
		switch {
		case c.q.Sort[0].Type == "string":
			index, at = "SEARCH s0 USING PRIMARY KEY (key>? AND key<?)", "smith"
		case c.q.Sort[0].Type == "quantity":
			index, at = "SEARCH s0 USING COVERING INDEX search_numbers_by_low (param=? AND type=?", 60.5
		case c.q.Sort[0].Desc:
			index = "SEARCH s0 USING COVERING INDEX search_dates_by_high (param=? AND type=?"
		}
		for _, cur := range []*cursor.Search{
			nil,
			{MaxRid: 600, Rid: 300, Vals: append([]any{at}, make([]any, len(c.q.Sort)-1)...)},
			{Back: true, MaxRid: 600, Rid: 300, Vals: append([]any{at}, make([]any, len(c.q.Sort)-1)...)},
			{Back: true, MaxRid: 600, Rid: 300, Vals: make([]any, len(c.q.Sort))},
		} {
			sq := compile.SortWalkSQL(c.q, from, where, cur)
			lines := explain(t, s.reader, sq.String(), sq.Args()...)
			pl := strings.Join(lines, "\n")
			if !strings.Contains(pl, index) {
				t.Errorf("%s, cursor %+v: the walk is not %s:\n%s\n%s", c.name, cur, index, sq, pl)
			}
			// The walk sorts at most a run of equal first values ("LAST
			// TERM"). The resources without a first value are walked in rid
			// order when that is the only key, else sorted by the others.
			for _, arm := range strings.Split(pl, "UNION ALL") {
				walk := strings.Contains(arm, "SEARCH s0 ")
				if strings.Contains(arm, "SCAN s0") || (walk || len(c.q.Sort) == 1) && strings.Contains(arm, "USE TEMP B-TREE FOR ORDER BY") {
					t.Errorf("%s, cursor %+v: plan sorts or scans the whole set:\n%s\n%s", c.name, cur, sq, pl)
				}
			}
			if cur == nil && c.name == "code, -date" {
				t.Logf("%s\n%s", sq, pl)
			}
		}
	}
}

// planStore is a store of 100 patients with 5 observations each, and a
// runner on its readers, for the plan tests.
func planStore(t *testing.T) (*Store, *runner) {
	t.Helper()
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	t.Cleanup(func() { s.Close() })
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 100 {
		if err := s.Put(t.Context(), patientWrite(r, i)); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			if err := s.Put(t.Context(), observationWrite(r, i, i*5+j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s, &runner{db: s.reader, cache: &s.searchStmts}
}

// putStrings writes typ/id with string entries, through MakeRows.
func putStrings(t *testing.T, s *Store, typ, id string, entries ...search.Entry) {
	t.Helper()
	rows := search.MakeRows(entries)
	if err := s.Put(t.Context(), store.Write{Type: typ, ID: id, Version: 1, LastUpdated: ts(1), Method: store.MethodCreate,
		Body: []byte(`{}`), Index: &rows}); err != nil {
		t.Fatal(err)
	}
}

func strEntry(p, v string) search.Entry {
	return search.Entry{Param: p, Kind: search.KindString, Str: v, Exact: v}
}

// TestStringWalkPagesLikeValues: paging one by one through a sort by a
// string gives the same order whether the plan walks the keys, looks
// them up per match or reads the stored values, also for values holding
// a NUL.
func TestStringWalkPagesLikeValues(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for id, v := range map[string]string{"f": "", "g": "a\x00b", "h": "a", "a": "b", "i": "a\x00a"} {
		putStrings(t, s, "Patient", id, strEntry("name", v))
	}
	page := func(typ string, desc, filter bool) (out []string) {
		q := search.Query{Types: []string{"Patient"}, Count: 1, Sort: []search.Sort{{Param: "name", Type: typ, Desc: desc}}}
		if filter { // a selective clause drives: the keys are looked up per match
			q.Where = []search.Clause{{Any: []search.Match{{Op: search.OpKeyPrefix, Prefix: "name\x1f"}}}}
		}
		for {
			p, err := s.Search(t.Context(), &q)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range p.Matches {
				out = append(out, m.ID)
			}
			if p.Next == "" || len(out) > 10 {
				return out
			}
			q.Cursor = p.Next
		}
	}
	for _, desc := range []bool{false, true} {
		walked, keys, plain := page("string", desc, false), page("string", desc, true), page("", desc, false)
		if fmt.Sprint(walked) != fmt.Sprint(plain) || fmt.Sprint(keys) != fmt.Sprint(plain) || len(plain) != 5 {
			t.Errorf("desc %v: walked %v, keys per match %v, values %v", desc, walked, keys, plain)
		}
	}
}

// TestStringWalkOnlyForItsType: a sort by a code many other types share
// (name) does not walk keys that are mostly another type's.
func TestStringWalkOnlyForItsType(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	for i := range 6 {
		putStrings(t, s, "Practitioner", "p"+strconv.Itoa(i), strEntry("name", "n"+strconv.Itoa(i)))
	}
	putStrings(t, s, "Organization", "o1", strEntry("name", "acme"))
	run := &runner{db: s.reader, cache: &s.searchStmts}
	for _, c := range []struct {
		typ  string
		walk bool
	}{{"Organization", false}, {"Practitioner", true}} {
		comp := &compile.Compiler{Ctx: t.Context(), Estimate: run.estimate, Tune: compile.Tuning{EstimateLimit: 3, SelectiveEnough: 2}}
		p, err := comp.Choose(&search.Query{Types: []string{c.typ}, Count: 5, Sort: []search.Sort{{Param: "name", Type: "string"}}}, true)
		if err != nil {
			t.Fatal(err)
		}
		if p.SortWalk != c.walk {
			t.Errorf("%s?_sort=name: sortWalk %v, want %v", c.typ, p.SortWalk, c.walk)
		}
	}
}

// TestPageWithBodiesPlan: an unsorted page streaming from an ordered
// driver reads each passing row's version by rowid, last, with no sort:
// no body is read for a row the page does not keep.
func TestPageWithBodiesPlan(t *testing.T) {
	s, run := planStore(t)
	status := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"status\x1ffinal"}}}}
	subject := search.Clause{Any: []search.Match{{Op: search.OpKey, Keys: []string{"subject\x1fPatient/p7"}}}}
	q := &search.Query{Types: []string{"Observation"}, Count: 20, Where: []search.Clause{status, subject}}
	c := &compile.Compiler{Ctx: t.Context(), Estimate: run.estimate, Tune: compile.DefaultTuning}
	p, err := c.Choose(q, false)
	if err != nil {
		t.Fatal(err)
	}
	from, where, err := c.FromWhere(q, "a", p)
	if err != nil {
		t.Fatal(err)
	}
	sq := compile.PageSQL(q, compile.PageArm{From: from, Where: where, Rid: compile.RidExpr("a", p), Bodies: true})
	lines := explain(t, s.reader, sq.String(), sq.Args()...)
	plan := strings.Join(lines, "\n")
	at := slices.Index(lines, "SEARCH v USING INTEGER PRIMARY KEY (rowid=?)")
	after := false // a join or probe after the version's lookup
	for _, l := range lines[at+1:] {
		after = after || strings.HasPrefix(l, "SEARCH a ") || strings.Contains(l, " EXISTS ")
	}
	if at < 0 || after || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("page with bodies:\n%s\n%s", sq, plan)
	}
	page, err := s.Search(t.Context(), q)
	if err != nil || len(page.Matches) == 0 || page.Matches[0].Body == nil || page.Matches[0].Type != "Observation" {
		t.Fatalf("search: %+v, %v", page, err)
	}
}

// TestLargeQueriesCompile: the parser lets through up to 1000 values per
// parameter and 1000 repeats of one; each shape compiles within SQLite's
// limits (500 SELECTs to a compound, expressions 1000 deep) and finds the
// one resource it should, whether the long clause drives or is probed.
func TestLargeQueriesCompile(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	putStrings(t, s, "Patient", "p1", strEntry("name", "okafor"))
	putStrings(t, s, "Patient", "p2", strEntry("name", "smith"))
	const n = 1000
	anyOf := func(op search.Op, last string) search.Clause {
		var c search.Clause
		for i := range n - 1 {
			c.Any = append(c.Any, search.Match{Op: op, Keys: []string{"name\x1fnobody" + strconv.Itoa(i)}, Prefix: "name\x1fnobody" + strconv.Itoa(i)})
		}
		c.Any = append(c.Any, search.Match{Op: op, Keys: []string{"name\x1f" + last}, Prefix: "name\x1f" + last})
		return c
	}
	repeated := make([]search.Clause, n)
	for i := range repeated {
		repeated[i] = search.Clause{Any: []search.Match{{Op: search.OpKeyPrefix, Prefix: "name\x1foka"}}}
	}
	for _, tc := range []struct {
		name  string
		where []search.Clause
	}{
		{"1000 exact values", []search.Clause{anyOf(search.OpKey, "okafor")}},
		{"1000 prefixes", []search.Clause{anyOf(search.OpKeyPrefix, "oka")}},
		{"1000 prefixes beside a driver", []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{"name\x1fokafor"}}}}, anyOf(search.OpKeyPrefix, "oka")}},
		{"1000 repeats", repeated},
	} {
		p, err := s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Count: 10, Where: tc.where})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(p.Matches) != 1 || p.Matches[0].ID != "p1" {
			t.Errorf("%s: %d matches, want p1", tc.name, len(p.Matches))
		}
	}
}
