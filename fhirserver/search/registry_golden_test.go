package search

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/registry.golden")

// TestRegistryGolden pins what the registry derives from every R4 search
// parameter's expression on every resource type: the branches kept, the
// compiled source, the elements a resource must have, the component
// shortcuts, and the parameters linked as parts, conjoined or covered. A change in
// how expressions are read (they used to be split by counting brackets)
// must not change any of it.
func TestRegistryGolden(t *testing.T) {
	r, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	types := profiles.ResourceTypes()
	slices.Sort(types)
	codes := func(ps []*Param) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Code)
		}
		return strings.Join(out, ",")
	}
	for _, typ := range types {
		for _, p := range r.Params(typ) {
			if p.Expr == nil {
				fmt.Fprintf(&b, "%s %s [%s] not indexed\n", typ, p.Code, p.Type)
				continue
			}
			fmt.Fprintf(&b, "%s %s [%s]\n\tsrc: %s\n\tbranches: %q\n\tneed: %q\n", typ, p.Code, p.Type, p.Expr.String(), p.branches, p.x.Need)
			for i, c := range p.Components {
				fmt.Fprintf(&b, "\tcomponent %s %q need %q\n", c.Code, c.Expression, p.x.Components[i].Need)
			}
			if len(p.Parts) > 0 {
				fmt.Fprintf(&b, "\tparts: %s\n", codes(p.Parts))
			}
			if len(p.Conjoined) > 0 {
				fmt.Fprintf(&b, "\tconjoined: %s\n", codes(p.Conjoined))
			}
			if len(p.Covered) > 0 {
				fmt.Fprintf(&b, "\tcovered: %s\n", codes(p.Covered))
			}
		}
	}
	const path = "testdata/registry.golden"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("registry differs from %s at line %d:\n got: %s\nwant: %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("registry differs from %s in length: %d lines, want %d", path, len(gl), len(wl))
	}
}
