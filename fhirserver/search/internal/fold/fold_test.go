package fold

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

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
		{"ŉ", "n"}, // every letter of the former table keeps its fold
		{"ǽ", "ae"},
		{"ƕ", "hv"},
		{"  Jo \t  van  der\nBerg ", "jo van der berg"},
		{"Jo\u00a0van\u2003der Berg", "jo van der berg"}, // no-break and em space
		{"O'Brien-Smith", "o'brien-smith"},               // punctuation kept
		{"O’Brien", "o’brien"},
		{"Dr.", "dr."},
		{"", ""},
		{"   ", ""},
		{" \u0301a", "a"}, // a lone mark after a leading space
		{"a\xffb", "a\ufffdb"},

		// Vietnamese: precomposed (the usual spelling, U+1EC5 ễ is in
		// Latin Extended Additional) and decomposed alike.
		{"Nguyễn", "nguyen"},
		{"Nguye\u0302\u0303n", "nguyen"},
		{"NGUYỄN", "nguyen"},
		{"Trần", "tran"},
		{"Tra\u0302\u0300n", "tran"},
		{"Đặng", "dang"},
		{"Đa\u0323\u0306ng", "dang"},
		{"Phạm Thị Hương", "pham thi huong"},

		// German and Spanish.
		{"Straße", "strasse"},
		{"Peña", "pena"},
		{"Pen\u0303a", "pena"},
		{"José", "jose"},
		{"JOSÉ", "jose"},

		// Turkish, folded without a locale: İ (U+0130) and ı both to i.
		{"İstanbul", "istanbul"},
		{"ISTANBUL", "istanbul"},
		{"Işık", "isik"},
		{"IŞIK", "isik"},
		{"ı", "i"},

		// Greek: accents dropped, final sigma folded to σ.
		{"Σωκράτης", "σωκρατησ"},
		{"ΣΩΚΡΑΤΗΣ", "σωκρατησ"},
		{"σωκρατης", "σωκρατησ"},
		{"ά", "α"},
		{"Ελένη", "ελενη"},
		{"ΐ", "ι"},

		// Cyrillic: case folded, breve and diaeresis dropped.
		{"Ёлкин", "елкин"},
		{"Йовчев", "иовчев"},

		// CJK ideographs are kept as they are.
		{"王小明", "王小明"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestNormalizeFamilyQuery: a query value folds like the stored strings,
// so family=muller finds every spelling of Müller and family=nguyen every
// spelling of Nguyễn; the query may itself carry the accents.
func TestNormalizeFamilyQuery(t *testing.T) {
	for query, stored := range map[string][]string{
		"muller":   {"Müller", "MÜLLER", "Muller", "müller", "Mu\u0308ller"},
		"nguyen":   {"Nguyễn", "Nguye\u0302\u0303n", "NGUYỄN", "Nguyen"},
		"Nguyễn":   {"Nguyễn", "Nguye\u0302\u0303n", "nguyen"},
		"isik":     {"Işık", "IŞIK", "ışık"},
		"Σωκράτης": {"ΣΩΚΡΆΤΗΣ", "σωκρατης"},
	} {
		q := Normalize(query)
		for _, s := range stored {
			if Normalize(s) != q {
				t.Errorf("%q (%q) does not match %q (%q)", query, q, s, Normalize(s))
			}
		}
	}
}

func TestNormalizeIdempotent(t *testing.T) {
	for _, s := range []string{"Müller", "  A  b ", "ǅ", "İstanbul", "Σίσυφος", "ẛ", "ᾼ"} {
		n := Normalize(s)
		if Normalize(n) != n {
			t.Errorf("Normalize not idempotent on %q: %q then %q", s, n, Normalize(n))
		}
	}
}

// foldBlocks are the Unicode ranges whose every rune
// TestNormalizeMatchesReference folds: all of the table (Latin, IPA,
// combining marks, Greek, Cyrillic … Latin Extended Additional, Greek
// Extended, General Punctuation) and the Latin, Greek and Cyrillic blocks
// past it, which take foldReference's path.
var foldBlocks = [][2]rune{
	{0, foldTableSize},
	{0x2C60, 0x2C80},   // Latin Extended-C
	{0x2DE0, 0x2E00},   // Cyrillic Extended-A
	{0xA640, 0xA6A0},   // Cyrillic Extended-B
	{0xA720, 0xA800},   // Latin Extended-D
	{0xAB30, 0xAB70},   // Latin Extended-E
	{0xFB00, 0xFB07},   // Latin ligatures
	{0xFF21, 0xFF5B},   // fullwidth Latin letters
	{0x1D400, 0x1D420}, // mathematical letters
}

// TestNormalizeMatchesReference proves the table-driven Normalize equals
// the x/text definition over every rune of foldBlocks: alone, between
// letters, doubled, before a combining mark and between spaces.
func TestNormalizeMatchesReference(t *testing.T) {
	bad := 0
	for _, blk := range foldBlocks {
		for r := blk[0]; r < blk[1]; r++ {
			if !utf8.ValidRune(r) {
				continue
			}
			c := string(r)
			for _, s := range []string{c, "A" + c + "b", c + c, c + "\u0301", "x " + c + " Y", c + "\u0345" + c} {
				if got, want := Normalize(s), foldReference(s); got != want {
					if bad++; bad <= 20 {
						t.Errorf("%U: Normalize(%q) = %q, foldReference = %q", r, s, got, want)
					}
				}
			}
			if n := Normalize(c); Normalize(n) != n {
				if bad++; bad <= 20 {
					t.Errorf("%U: not idempotent: %q then %q", r, n, Normalize(n))
				}
			}
		}
	}
}

// TestNormalizeInertIdeographs checks what the fast path assumes of the
// CJK ideographs: each folds to itself.
func TestNormalizeInertIdeographs(t *testing.T) {
	for r := rune(0x3000); r < 0xA100; r++ {
		if !isInertIdeograph(r) {
			continue
		}
		if s := string(r); foldReference(s) != s || foldReference("a"+s+"\u0301") != "a"+s {
			t.Fatalf("%U does not fold to itself", r)
		}
	}
}

// FuzzNormalize: Normalize equals its definition, is idempotent and
// returns valid UTF-8, on any input.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"Nguyễn", "Nguye\u0302\u0303n", "İstanbul Işık", "ΣΩΚΡΆΤΗΣ", "Straße  Peña\t",
		"王小明", "a\xffb", " \u0301", "ǅẛᾼ", "\u1b44\u0301", "O’Brien\u2003x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Normalize(s)
		if want := foldReference(s); got != want {
			t.Fatalf("Normalize(%q) = %q, foldReference = %q", s, got, want)
		}
		if again := Normalize(got); again != got {
			t.Fatalf("not idempotent on %q: %q then %q", s, got, again)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Normalize(%q) = %q is not UTF-8", s, got)
		}
	})
}

// TestCaseFold checks caseFold over every rune: it folds all the case
// forms of a letter (an orbit of unicode.SimpleFold) to one of them, and
// is idempotent. The Turkish i letters are the exceptions by design.
func TestCaseFold(t *testing.T) {
	turkish := map[rune]bool{'İ': true, 'ı': true}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		f := caseFold(r)
		if g := caseFold(unicode.SimpleFold(r)); g != f {
			t.Errorf("%U folds to %U, its case form %U to %U", r, f, unicode.SimpleFold(r), g)
		}
		if caseFold(f) != f {
			t.Errorf("%U folds to %U, which folds to %U", r, f, caseFold(f))
		}
		in := false
		for o := r; ; {
			in = in || o == f
			if o = unicode.SimpleFold(o); o == r {
				break
			}
		}
		if !in && !turkish[r] {
			t.Errorf("%U folds to %U, not one of its case forms", r, f)
		}
	}
	for _, c := range []struct{ in, want rune }{{'Ꭰ', 'ꭰ'}, {'ꭰ', 'ꭰ'}, {'ς', 'σ'}, {'ſ', 's'}, {'µ', 'μ'}, {'K', 'k'}, {'İ', 'i'}, {'ı', 'i'}} {
		if got := caseFold(c.in); got != c.want {
			t.Errorf("caseFold(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
