package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Normalize folds s for string search: the FHIR specification asks that
// string matching ignore case and accents ("family=muller" finds
// "Müller"). It lower-cases (Unicode simple folding via unicode.ToLower),
// maps precomposed Latin letters (Latin-1 Supplement, Latin Extended-A
// and -B) to their base letters, expands ligatures (ß→ss, æ→ae, œ→oe,
// þ→th), drops combining diacritical marks (so decomposed input folds
// like precomposed input), collapses runs of white space into one space
// and trims the ends. Punctuation is kept: it is significant in names
// such as "O'Brien" and in identifiers carried by string parameters.
//
// golang.org/x/text is not a dependency, so the fold table is written
// here; it covers the Latin scripts, which is what the demographic
// parameters (names, addresses) need. Other scripts are only lower-cased.
func Normalize(s string) string {
	// Fast path: ASCII already lower-case with single inner spaces needs
	// no allocation, the common case for codes and normalized queries.
	if isNormalASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false // a space is pending (written before the next letter)
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if r >= 0x300 && r <= 0x36F { // combining diacritical marks
			continue
		}
		var fold string
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
		} else {
			r = unicode.ToLower(r)
			if r >= latinFoldLo && r < latinFoldHi {
				fold = latinFold[r-latinFoldLo]
			}
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if fold != "" {
			b.WriteString(fold)
		} else {
			b.WriteRune(r)
		}
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

const (
	latinFoldLo = 0xC0
	latinFoldHi = 0x250
)

// latinFold maps a lower-case rune in [latinFoldLo, latinFoldHi) to its
// base letters; "" means the rune is kept as is.
var latinFold = buildLatinFold()

func buildLatinFold() [latinFoldHi - latinFoldLo]string {
	// Lower-case forms only: Normalize lower-cases before the lookup.
	groups := map[string]string{
		"a":  "àáâãäåāăąǎǟǡǻȁȃȧ",
		"b":  "ƀƃ",
		"c":  "çćĉċčƈ",
		"d":  "ďđðƌ",
		"e":  "èéêëēĕėęěȅȇȩǝ",
		"f":  "ƒ",
		"g":  "ĝğġģǧǵǥ",
		"h":  "ĥħȟ",
		"i":  "ìíîïĩīĭįıǐȉȋ",
		"j":  "ĵǰ",
		"k":  "ķĸǩƙ",
		"l":  "ĺļľŀłƚ",
		"n":  "ñńņňŉǹŋƞ",
		"o":  "òóôõöøōŏőơǒǫǭǿȍȏȫȭȯȱ",
		"r":  "ŕŗřȑȓ",
		"s":  "śŝşšșſ",
		"t":  "ţťŧțƫƭ",
		"u":  "ùúûüũūŭůűųưǔǖǘǚǜȕȗ",
		"w":  "ŵ",
		"y":  "ýÿŷȳƴ",
		"z":  "źżžƶȥ",
		"ss": "ß",
		"ae": "æǽǣ",
		"oe": "œ",
		"ij": "ĳ",
		"th": "þ",
		"dz": "ǆǳ",
		"lj": "ǉ",
		"nj": "ǌ",
		"hv": "ƕ",
		"oi": "ƣ",
	}
	var t [latinFoldHi - latinFoldLo]string
	for base, letters := range groups {
		for _, r := range letters {
			if r < latinFoldLo || r >= latinFoldHi {
				panic("search: fold table rune out of range")
			}
			t[r-latinFoldLo] = base
		}
	}
	return t
}
