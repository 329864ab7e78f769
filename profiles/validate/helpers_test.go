package validate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

// testDefs are the core definitions plus the hand-written profiles and
// terminology of testdata/.
type testDefs struct {
	CoreDefinitions
	sds map[string]*profiles.StructureDefinition
	vss map[string]*profiles.ValueSet
	css map[string]*profiles.CodeSystem
}

func (d *testDefs) StructureDefinition(url string) (*profiles.StructureDefinition, bool) {
	if i := strings.IndexByte(url, '|'); i >= 0 {
		url = url[:i]
	}
	if sd, ok := d.sds[url]; ok {
		return sd, true
	}
	return d.CoreDefinitions.StructureDefinition(url)
}

func (d *testDefs) ValueSet(url string) (*profiles.ValueSet, bool) {
	if vs, ok := d.vss[url]; ok {
		return vs, true
	}
	return d.CoreDefinitions.ValueSet(url)
}

func (d *testDefs) CodeSystem(url string) (*profiles.CodeSystem, bool) {
	if cs, ok := d.css[url]; ok {
		return cs, true
	}
	return d.CoreDefinitions.CodeSystem(url)
}

var loadTestDefs = sync.OnceValues(func() (*testDefs, error) {
	d := &testDefs{sds: map[string]*profiles.StructureDefinition{}, vss: map[string]*profiles.ValueSet{}, css: map[string]*profiles.CodeSystem{}}
	files, err := filepath.Glob("testdata/StructureDefinition-*.json")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sd := new(profiles.StructureDefinition)
		if err := json.Unmarshal(b, sd); err != nil {
			return nil, err
		}
		d.sds[sd.URL] = sd
	}
	b, err := os.ReadFile("testdata/terminology.json")
	if err != nil {
		return nil, err
	}
	var term struct {
		CodeSystems []*profiles.CodeSystem `json:"codeSystems"`
		ValueSets   []*profiles.ValueSet   `json:"valueSets"`
	}
	if err := json.Unmarshal(b, &term); err != nil {
		return nil, err
	}
	for _, cs := range term.CodeSystems {
		d.css[cs.URL] = cs
	}
	for _, vs := range term.ValueSets {
		d.vss[vs.URL] = vs
	}
	return d, nil
})

func testValidator(t testing.TB, opts Options) *Validator {
	t.Helper()
	d, err := loadTestDefs()
	if err != nil {
		t.Fatal(err)
	}
	return New(d, opts)
}

func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("bad test JSON: %v\n%s", err, s)
	}
	return m
}

// edit returns a deep copy of base changed by f.
func edit(t testing.TB, base string, f func(m map[string]any)) string {
	t.Helper()
	m := decode(t, base)
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func validate(t testing.TB, v *Validator, body string, profileURLs ...string) Result {
	t.Helper()
	res, err := v.ValidateJSON(context.Background(), []byte(body), profileURLs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func errorsAndWarnings(r Result) []Issue {
	var out []Issue
	for _, is := range r.Issues {
		if is.Severity != "information" {
			out = append(out, is)
		}
	}
	return out
}

func dump(issues []Issue) string {
	var b strings.Builder
	for _, is := range issues {
		b.WriteString("\n  " + is.Severity + " " + is.Code + " [" + is.Rule + "] @ " + is.Expression + ": " + is.Message + " (" + is.Profile + ")")
	}
	return b.String()
}

// want is an expected issue: the rule, severity and expression.
type want struct {
	rule, severity, expr string
}

func (w want) matches(is Issue) bool {
	return is.Rule == w.rule && is.Severity == w.severity && is.Expression == w.expr
}

func checkWant(t *testing.T, r Result, w *want) {
	t.Helper()
	if w == nil {
		if bad := errorsAndWarnings(r); len(bad) > 0 {
			t.Fatalf("expected no errors or warnings, got:%s", dump(bad))
		}
		return
	}
	for _, is := range r.Issues {
		if w.matches(is) {
			return
		}
	}
	t.Fatalf("expected %s %s at %s, got:%s", w.severity, w.rule, w.expr, dump(r.Issues))
}
