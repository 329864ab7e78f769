package search

import (
	"strings"

	"github.com/kiln-fhir/kiln/profiles"
)

// This file holds the semantics of the range matches and of reference
// keys, for backends that check rows in Go (a document store checks the
// candidates its filter returned) and for the test store.

// DateMatches reports whether the date row satisfies m (OpDate) by the
// table in Cmp's documentation, on [Low, High) ranges. It does not look
// at the row's parameter.
func DateMatches(d DateRow, m *Match) bool {
	lo, hi, qlo, qhi := d.Low, d.High, m.Low, m.High
	eq := lo >= qlo && hi <= qhi
	switch m.Cmp {
	case CmpEq:
		return eq
	case CmpNe:
		return !eq
	case CmpGt:
		return hi > qhi
	case CmpLt:
		return lo < qlo
	case CmpGe:
		return hi > qhi || eq
	case CmpLe:
		return lo < qlo || eq
	case CmpSa:
		return lo >= qhi
	case CmpEb:
		return hi <= qlo
	case CmpAp:
		d := int64(m.Approx)
		return lo < qhi+d && hi > qlo-d
	}
	return false
}

// NumberMatches reports whether the number row satisfies m (OpNumber): the
// stored range is [Low, High] inclusive; eq, ne and ap compare it with
// [NumLow, NumHigh) (inclusive when NumLow == NumHigh), the other prefixes
// with the exact value NumLow.
func NumberMatches(n NumberRow, m *Match) bool {
	lo, hi, v, qlo, qhi := n.Low, n.High, m.NumLow, m.NumLow, m.NumHigh
	eq := lo >= qlo && (hi < qhi || qlo == qhi && hi <= qhi)
	switch m.Cmp {
	case CmpEq:
		return eq
	case CmpNe:
		return !eq
	case CmpGt:
		return hi > v
	case CmpLt:
		return lo < v
	case CmpGe:
		return hi >= v
	case CmpLe:
		return lo <= v
	case CmpSa:
		return lo > v
	case CmpEb:
		return hi < v
	case CmpAp:
		return lo <= qhi+m.Approx && hi >= qlo-m.Approx
	}
	return false
}

// RefKey parses a reference key "param\x1fType/id" into its parts; ok is
// false for keys that are not literal references to a resource type (a
// string, a token, a versioned or absolute reference, a modifier form).
// _include follows exactly these keys.
func RefKey(key string) (param, typ, id string, ok bool) {
	param, val, found := strings.Cut(key, "\x1f")
	if !found || strings.Contains(param, ":") {
		return "", "", "", false
	}
	typ, id, found = strings.Cut(val, "/")
	if !found || id == "" || strings.Contains(id, "/") || !profiles.IsResourceType(typ) {
		return "", "", "", false
	}
	return param, typ, id, true
}
