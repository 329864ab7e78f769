// Package fold is the string fold of search: the case- and accent-insensitive
// form in which string index keys are stored and string queries are looked up.
package fold

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Version names the definition of Normalize. Stored string index keys
// were built with the fold of the version that wrote them: a store whose
// keys carry an older version must be reindexed before they match queries
// folded with this one. Bump it whenever Normalize's output changes for
// any input.
//
//   - 1: hand-written table of Latin-1 Supplement and Latin Extended-A/-B
//     letters, lower-casing with unicode.ToLower.
//   - 2: NFD (golang.org/x/text), drop nonspacing marks, letter extras,
//     case folding of every script, so precomposed letters of every block
//     fold like their decomposed forms ("Nguyễn" with U+1EC5 is found by
//     nguyen).
const Version = 2

// Normalize folds s for string search: the FHIR specification asks that
// string matching ignore case and accents ("family=muller" finds
// "Müller"). The fold is, in this order:
//
//  1. canonical decomposition (NFD), so that a precomposed letter and its
//     decomposed spelling fold alike, in every script;
//  2. dropping nonspacing marks (general category Mn): the accents;
//  3. the extras: letters that have no decomposition but that a reader
//     of "ignore accents" takes for a base letter or two (ß→ss, æ→ae,
//     œ→oe, þ→th, ø→o, đ→d, ł→l, ı→i …; see foldExtras);
//  4. case folding, rune by rune (caseFold): every case form of a letter
//     to one, which unlike lower-casing also folds Greek final sigma ς
//     to σ, ſ to s and the micro sign to μ;
//  5. NFD and dropping Mn again, in case a folded letter decomposes;
//  6. collapsing runs of white space into one space and trimming the ends.
//
// Turkish: the fold is language-neutral and locale-free. Dotted capital İ
// (U+0130) decomposes to I and a dot, which is dropped, and dotless ı
// folds to i through the extras, so "İstanbul", "Işık" and "ISIK" are all
// found by istanbul and isik: a searcher need not type Turkish letters,
// at the price of Turkish i/ı pairs no longer telling words apart.
//
// Dropping every nonspacing mark is an accent fold for Latin, Greek and
// Cyrillic (й folds to и, ё to е); in scripts whose marks are vowels
// (Hebrew points, Arabic harakat, Indic signs) it makes search match more,
// never less.
//
// Punctuation is kept: it is significant in names such as "O'Brien" and
// in identifiers carried by string parameters. Invalid UTF-8 bytes become
// U+FFFD each, as ranging over the string decodes them.
//
// foldReference is this definition written plainly;
// Normalize computes the same result (the tests compare them over whole
// Unicode blocks and under fuzzing) without x/text for ASCII and for the
// runes of a table built from foldReference.
func Normalize(s string) string {
	// Fast path: ASCII already lower-case with single inner spaces needs
	// no allocation, the common case for codes and normalized queries.
	if isNormalASCII(s) {
		return s
	}
	t := foldTab()
	var b strings.Builder
	b.Grow(len(s))
	space := false // a space is pending (written before the next letter)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == ' ', '\t' <= c && c <= '\r':
				space = b.Len() > 0
				continue
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			}
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteByte(c)
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		var e uint16
		switch {
		case r < foldTableSize:
			e = t.entry[r]
		case isInertIdeograph(r):
			e = foldKeep
		default:
			// Outside the table (and U+FFFD for invalid bytes): rare
			// enough for the full definition.
			return foldReference(s)
		}
		switch e {
		case foldDrop:
			i += n
			continue
		case foldSpace:
			i += n
			space = b.Len() > 0
			continue
		case foldSlow:
			return foldReference(s)
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if e == foldKeep {
			b.WriteString(s[i : i+n])
		} else {
			b.WriteString(t.repl[e-foldRepl])
		}
		i += n
	}
	return b.String()
}

// isNormalASCII reports whether s is ASCII with no upper-case letter, no
// leading, trailing or doubled space and no other white space.
func isNormalASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf, 'A' <= c && c <= 'Z', c == '\t', c == '\n', c == '\v', c == '\f', c == '\r':
			return false
		case c == ' ':
			if i == 0 || i == len(s)-1 || s[i-1] == ' ' {
				return false
			}
		}
	}
	return true
}

// foldReference is the definition of Normalize, written plainly with
// golang.org/x/text/unicode/norm (see Normalize for the steps).
func foldReference(s string) string {
	return strings.Join(strings.Fields(foldRunes(s)), " ")
}

// foldRunes is foldReference without the white-space step.
func foldRunes(s string) string {
	if !utf8.ValidString(s) {
		s = replaceInvalid(s)
	}
	s = dropMarks(norm.NFD.String(s))
	s = strings.Map(caseFold, mapExtras(s))
	return dropMarks(norm.NFD.String(s))
}

// caseFold maps every case form of r to one: the lower case of its upper
// case. It is constant on each orbit of unicode.SimpleFold (the simple
// case folding of Unicode, ſ/s/S, ς/σ/Σ, µ/μ/Μ, K/k/K …) and picks a
// member of it, except for Turkish dotless ı and dotted İ, which it maps
// to i (TestCaseFold checks every rune).
//
// It is not golang.org/x/text/cases.Fold: that one (v0.43.0) folds
// Cherokee capitals to small letters and small letters to capitals, so
// "Ꭰ" and "ꭰ" got different keys; and its full folding (ß→ss) is done
// here by the extras.
func caseFold(r rune) rune {
	return unicode.ToLower(unicode.ToUpper(r))
}

// replaceInvalid replaces each invalid byte of s by U+FFFD, as ranging
// over s decodes it (strings.ToValidUTF8 would merge runs of them).
func replaceInvalid(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

func dropMarks(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}

// mapExtras replaces each letter of foldExtras in s by its base letters.
func mapExtras(s string) string {
	m := foldExtras()
	var b strings.Builder
	for _, r := range s {
		if base, ok := m[r]; ok {
			b.WriteString(base)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// foldExtrasGroups are the letters with no canonical decomposition that
// fold to base letters anyway, as "ignore accents" is read: the stroke,
// hook and ligature letters of the Latin alphabets and ı. They are the
// lower-case forms; every case form of each is mapped (by simple case
// folding). Letters with a decomposition (ǿ, ǽ …) are kept from the
// former table, though NFD reaches their base first. The ligatures of
// Alphabetic Presentation Forms expand as Unicode's full case folding
// expands them.
var foldExtrasGroups = map[string]string{
	"a":   "àáâãäåāăąǎǟǡǻȁȃȧ",
	"b":   "ƀƃ",
	"c":   "çćĉċčƈ",
	"d":   "ďđðƌ",
	"e":   "èéêëēĕėęěȅȇȩǝ",
	"f":   "ƒ",
	"g":   "ĝğġģǧǵǥ",
	"h":   "ĥħȟ",
	"i":   "ìíîïĩīĭįıǐȉȋ",
	"j":   "ĵǰ",
	"k":   "ķĸǩƙ",
	"l":   "ĺļľŀłƚ",
	"n":   "ñńņňŉǹŋƞ",
	"o":   "òóôõöøōŏőơǒǫǭǿȍȏȫȭȯȱ",
	"r":   "ŕŗřȑȓ",
	"s":   "śŝşšșſ",
	"t":   "ţťŧțƫƭ",
	"u":   "ùúûüũūŭůűųưǔǖǘǚǜȕȗ",
	"w":   "ŵ",
	"y":   "ýÿŷȳƴ",
	"z":   "źżžƶȥ",
	"ss":  "ß",
	"ae":  "æǽǣ",
	"oe":  "œ",
	"ij":  "ĳ",
	"th":  "þ",
	"dz":  "ǆǳ",
	"lj":  "ǉ",
	"nj":  "ǌ",
	"hv":  "ƕ",
	"oi":  "ƣ",
	"ff":  "ﬀ",
	"fi":  "ﬁ",
	"fl":  "ﬂ",
	"ffi": "ﬃ",
	"ffl": "ﬄ",
	"st":  "ﬅﬆ",
}

// foldExtras is foldExtrasGroups by letter, with every case form.
var foldExtras = sync.OnceValue(func() map[rune]string {
	m := make(map[rune]string)
	for base, letters := range foldExtrasGroups {
		for _, r := range letters {
			for f := r; ; {
				m[f] = base
				if f = unicode.SimpleFold(f); f == r {
					break
				}
			}
		}
	}
	return m
})

const (
	// foldTableSize bounds the runes Normalize folds by table: Latin,
	// IPA, combining marks, Greek, Cyrillic and the other alphabets up to
	// Latin Extended Additional, Greek Extended and General Punctuation
	// (’ and the typographic spaces).
	foldTableSize = 0x2100

	foldKeep  = 0 // the rune folds to itself
	foldDrop  = 1 // to nothing (a mark)
	foldSpace = 2 // to white space
	foldSlow  = 3 // only foldReference folds a string holding it
	foldRepl  = 4 // entries from here are foldRepl + an index in repl
)

type foldTable struct {
	entry [foldTableSize]uint16
	repl  []string
}

// foldTab is built on first use from foldReference, so the
// table cannot disagree with the definition.
var foldTab = sync.OnceValue(func() *foldTable {
	t := &foldTable{}
	index := make(map[string]uint16)
	for r := rune(utf8.RuneSelf); r < foldTableSize; r++ {
		t.entry[r] = foldEntry(t, index, r)
	}
	return t
})

func foldEntry(t *foldTable, index map[string]uint16, r rune) uint16 {
	if !utf8.ValidRune(r) {
		return foldSlow
	}
	in := string(r)
	// Per-rune folding equals folding the whole string as long as the
	// canonical reordering of NFD moves only marks that are dropped
	// anyway: a rune that decomposes to a non-starter that stays is
	// left to foldReference.
	if !onlyDroppedNonStarters(norm.NFD.String(in)) {
		return foldSlow
	}
	out := foldRunes(in)
	if !onlyDroppedNonStarters(out) {
		return foldSlow
	}
	switch {
	case out == "":
		return foldDrop
	case strings.TrimFunc(out, unicode.IsSpace) == "":
		return foldSpace
	case out == in:
		return foldKeep
	case strings.IndexFunc(out, unicode.IsSpace) >= 0:
		return foldSlow
	}
	i, ok := index[out]
	if !ok {
		i = uint16(foldRepl + len(t.repl))
		t.repl = append(t.repl, out)
		index[out] = i
	}
	return i
}

// onlyDroppedNonStarters reports whether every rune of s with a non-zero
// canonical combining class is a nonspacing mark.
func onlyDroppedNonStarters(s string) bool {
	for _, r := range s {
		if norm.NFD.PropertiesString(string(r)).CCC() != 0 && !unicode.Is(unicode.Mn, r) {
			return false
		}
	}
	return true
}

// isInertIdeograph reports whether r is a CJK unified ideograph (base
// block and extension A): they neither decompose nor case-fold, so they
// fold to themselves (TestNormalizeInertIdeographs checks every one).
func isInertIdeograph(r rune) bool {
	return 0x3400 <= r && r < 0x4DC0 || 0x4E00 <= r && r < 0xA000
}
