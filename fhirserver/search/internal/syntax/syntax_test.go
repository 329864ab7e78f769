package syntax

import (
	"reflect"
	"testing"
)

func TestSplitEsc(t *testing.T) {
	for in, want := range map[string][]string{
		`a,b`:     {"a", "b"},
		`a\,b,c`:  {`a\,b`, "c"},
		`a\\,b`:   {`a\\`, "b"},
		`,`:       {"", ""},
		`trail\`:  {`trail\`},
		`x\|y,\$`: {`x\|y`, `\$`},
	} {
		if got := Split(in, ','); !reflect.DeepEqual(got, want) {
			t.Errorf("Split(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{`a\,b`: "a,b", `\$\|\\`: `$|\`, `a\b`: `a\b`, `end\`: `end\`} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
