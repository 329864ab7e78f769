package syntax

import (
	"errors"
	"testing"
)

// TestTree: precedence, associativity, postfix chains and type names as
// the syntax tree records them.
func TestTree(t *testing.T) {
	n, err := Parse("Patient.name[0].given.where($this = 'a') | -1 'mg' as FHIR.Quantity implies x", Tree{})
	if err != nil {
		t.Fatal(err)
	}
	// implies binds loosest, then '|', then as.
	if n.Kind != Binary || n.Name != "implies" || n.Right.Kind != Member {
		t.Fatalf("root %+v", n)
	}
	u := n.Left
	if u.Kind != Binary || u.Name != "|" || u.Right.Kind != TypeOp || u.Right.Type != "Quantity" || u.Right.TypeNS != "FHIR" {
		t.Fatalf("union %+v / %+v", u, u.Right)
	}
	if neg := u.Right.Left; neg.Kind != Negate || neg.Left.Kind != Literal {
		t.Fatalf("negated quantity %+v", neg)
	}
	where := u.Left
	if where.Kind != Chain || where.Right.Kind != Call || where.Right.Name != "where" || len(where.Right.Args) != 1 {
		t.Fatalf("where call %+v", where)
	}
	if c, _ := Parse("x.ofType(FHIR.Patient)", Tree{}); c.Right.TypeNS != "FHIR" || c.Right.Type != "Patient" {
		t.Fatalf("ofType type name %+v", c.Right)
	}
}

func TestTopLevel(t *testing.T) {
	_, tops, err := TopLevel("a | (b | c).d | e.where(x = 'a|b')", Tree{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a ", " (b | c).d ", " e.where(x = 'a|b')"}
	if len(tops) != len(want) {
		t.Fatalf("%d branches, want %d", len(tops), len(want))
	}
	for i, b := range tops {
		if b.Source != want[i] {
			t.Errorf("branch %d = %q, want %q", i, b.Source, want[i])
		}
	}
	for _, src := range []string{"(a | b)", "a = b | c", "a"} {
		if _, tops, err := TopLevel(src, Tree{}); err != nil || tops != nil {
			t.Errorf("%s: %v %v", src, tops, err)
		}
	}
}

// TestErrors: every syntax error carries the offset where it was found.
func TestErrors(t *testing.T) {
	for src, pos := range map[string]int{
		"1 +": 3, "(1": 2, "'abc": 0, "a.": 2, "1 is": 4, "f(": 2, "$foo": 0, "{1}": 1,
		"$index": 0, "where($total)": 6, "a ^ b": 2, "/* x": 0,
	} {
		_, err := Parse(src, Tree{})
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %v has no position", src, err)
			continue
		}
		if pe.Pos != pos {
			t.Errorf("%q: error at %d (%v), want %d", src, pe.Pos, err, pos)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"Patient.name.family", "1 + 2 * 3 div 4 mod 5", "@2015-02-04T14:34:28.123+09:00 + 1 month",
		"4 'mg' = 4000 'ug'", "(1|2|3).aggregate($this + $total, 0)", "%`ext-foo`.length()",
		"a | (b | c) | d[0] as FHIR.string", "-x.y is T implies {} xor true",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n, tops, err := TopLevel(src, Tree{})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(src) {
				t.Fatalf("%q: error %v without a position inside the source", src, err)
			}
			return
		}
		if n == nil {
			t.Fatal("no tree without an error")
		}
		for _, b := range tops {
			if b.Node == nil {
				t.Fatal("a branch without a tree")
			}
		}
	})
}
