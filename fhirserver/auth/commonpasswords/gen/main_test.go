package main

import (
	"strings"
	"testing"
)

// build keeps what the auth package can match: entries of at least the
// minimum length, in NFKC and case-folded form, once each, sorted; the
// header counts the source and the kept entries.
func TestBuild(t *testing.T) {
	got, err := build([]string{"short", "Password1234", "password1234", "ｑｗｅｒｔｙ１２３４５６", "aaaaaaaaaaaaaa"}, "pkg@1.0.0", 12)
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := strings.Cut(string(got), "\n\n")
	if !ok {
		t.Fatalf("no blank line after the header:\n%s", got)
	}
	if want := "aaaaaaaaaaaaaa\npassword1234\nqwerty123456\n"; body != want {
		t.Errorf("entries:\n%s\nwant:\n%s", body, want)
	}
	for _, line := range []string{"# source: npm pkg@1.0.0,", "# source-entries: 5\n", "# min-length: 12\n", "# entries: 3 "} {
		if !strings.Contains(head, line) {
			t.Errorf("the header has no %q:\n%s", line, head)
		}
	}
	if _, err := build([]string{"two\nlines-password"}, "pkg@1.0.0", 12); err == nil {
		t.Error("an entry with a newline was written")
	}
}
