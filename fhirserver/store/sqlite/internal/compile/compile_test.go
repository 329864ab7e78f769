package compile

import (
	"fmt"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abd", true},
		{"a\xff", "b", true},
		{"\xff\xff", "", false},
		{"", "", false},
		{"fam\x1fé", "fam\x1f\xc3\xaa", true},
	} {
		got, ok := prefixEnd(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestAnyOfMergesKeyLookups: a clause's plain key lookups of one type are
// one match (one IN list); negated lookups, other operations and lookups
// of another type stay as they are, and the query is not changed.
func TestAnyOfMergesKeyLookups(t *testing.T) {
	key := func(typ string, not bool, keys ...string) search.Match {
		return search.Match{Op: search.OpKey, Type: typ, Not: not, Keys: keys}
	}
	prefix := search.Match{Op: search.OpKeyPrefix, Prefix: "name\x1fa"}
	cl := search.Clause{Any: []search.Match{
		key("", false, "code\x1fa"), prefix, key("", false, "code\x1fb", "code\x1fc"), key("", true, "code\x1fd"),
		key("Group", false, "member\x1fx"), key("", false, "code\x1fe"), key("Group", false, "member\x1fy"),
	}}
	before := fmt.Sprint(cl.Any)
	want := []search.Match{
		key("", false, "code\x1fa", "code\x1fb", "code\x1fc", "code\x1fe"), prefix, key("", true, "code\x1fd"),
		key("Group", false, "member\x1fx", "member\x1fy"),
	}
	if got := anyOf(&cl); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("anyOf:\n got %v\nwant %v", got, want)
	}
	if fmt.Sprint(cl.Any) != before {
		t.Errorf("anyOf changed the clause: %v", cl.Any)
	}
	single := search.Clause{Any: []search.Match{key("", false, "code\x1fa"), prefix}}
	if got := anyOf(&single); &got[0] != &single.Any[0] {
		t.Errorf("a clause with one key lookup is copied")
	}
}
