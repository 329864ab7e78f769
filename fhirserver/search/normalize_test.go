package search

import "testing"

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Müller", "muller"},
		{"MÜLLER", "muller"},
		{"Muller", "muller"},
		{"muller", "muller"},
		{"Mu\u0308ller", "muller"}, // decomposed ü
		{"Núñez", "nunez"},
		{"ÑANDÚ", "nandu"},
		{"Straße", "strasse"},
		{"STRAẞE", "strasse"}, // capital sharp s
		{"Æsir", "aesir"},
		{"Øresund", "oresund"},
		{"Łódź", "lodz"},
		{"Œuvre", "oeuvre"},
		{"Þór", "thor"},
		{"Ĳssel", "ijssel"},
		{"Čapek", "capek"},
		{"Dvořák", "dvorak"},
		{"Ångström", "angstrom"},
		{"Şahin", "sahin"},
		{"Ǆoković", "dzokovic"},
		{"  Jo \t  van  der\nBerg ", "jo van der berg"},
		{"O'Brien-Smith", "o'brien-smith"}, // punctuation kept
		{"Dr.", "dr."},
		{"Ελένη", "ελένη"}, // other scripts: lower-cased only
		{"", ""},
		{"   ", ""},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestNormalizeFamilyQuery is the example: family=muller finds
// every spelling of Müller, because the stored and the query strings are
// normalized alike.
func TestNormalizeFamilyQuery(t *testing.T) {
	q := Normalize("muller")
	for _, stored := range []string{"Müller", "MÜLLER", "Muller", "müller"} {
		if Normalize(stored) != q {
			t.Errorf("family=muller does not match %q (%q)", stored, Normalize(stored))
		}
	}
}

func TestNormalizeIdempotent(t *testing.T) {
	for _, s := range []string{"Müller", "  A  b ", "ǅ", "İstanbul", "Σίσυφος"} {
		n := Normalize(s)
		if Normalize(n) != n {
			t.Errorf("Normalize not idempotent on %q: %q then %q", s, n, Normalize(n))
		}
	}
}
