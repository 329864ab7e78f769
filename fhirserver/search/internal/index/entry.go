// Package index holds the stored form of search: the typed index entries
// extracted from a resource (Entry), the encoded equality keys they give,
// and the rows a store writes for a resource (keys, date and number
// ranges, sort values). Keys are built in one place, here, for the index
// rows and for the queries that look them up, so that the two agree byte
// for byte.
package index

import (
	"math/big"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/fold"
)

// Kind is the typed form of an index entry, one per SearchParameter type
// that is indexed (special parameters have none).
type Kind uint8

// The kinds of index entries; DESIGN.md "The store" keeps one index
// shape per kind, not one per parameter.
const (
	KindString Kind = iota + 1
	KindToken
	KindDate
	KindNumber
	KindQuantity
	KindReference
	KindURI
	KindComposite
)

var kindNames = [...]string{"", "string", "token", "date", "number", "quantity", "reference", "uri", "composite"}

// String returns the SearchParameter type name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// KindOf maps a SearchParameter type to its entry kind; 0 for special
// and unknown types.
func KindOf(typ string) Kind {
	for k, n := range kindNames {
		if n == typ && k > 0 {
			return Kind(k)
		}
	}
	return 0
}

// Sentinel bounds for open date ranges (a Period without start or end):
// backends compare instants, so an open end is stored as the extreme
// instant instead of a null that every query would have to special-case.
var (
	MinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// Entry is one typed index entry extracted from a resource for one
// search parameter. Only the fields of its Kind are set.
type Entry struct {
	Param string // the parameter code, e.g. "family"
	Kind  Kind
	// Covered: another parameter indexes this value (Patient name's
	// family is family's value; see search.Param.Covered), so it has no keys of
	// its own, only its part in the sort row.
	Covered bool

	// String: Str is fold.Normalize(Exact); Exact is the original text, for
	// :exact. Str is also the key of prefix (range) and :contains scans.
	Str, Exact string

	// Token: System and Code; Text is the display or text for :text
	// (Coding.display, CodeableConcept.text, Identifier.type.text).
	// Identifier tokens also carry their type for :of-type.
	// Quantity: System and Code are the unit's system and code.
	System, Code, Text   string
	TypeSystem, TypeCode string

	// Date: the half-open range [Low, High) of instants in UTC the value
	// denotes, honouring its precision and time zone. Open ends are
	// MinTime / MaxTime.
	Low, High time.Time

	// Number and Quantity: the stated value and the range it denotes by its
	// implicit precision (5.4 means [5.35, 5.45)); for integers and exact
	// values NumLow == NumHigh == Value. A nil bound is open (a Range
	// without low or high).
	Value, NumLow, NumHigh *big.Rat
	// Strict: a Quantity's comparator is < or >, so the bound it leaves
	// (NumHigh of "<", NumLow of ">") excludes Value itself.
	Strict bool
	// Quantity: Unit is the human unit text; the Canon fields are the value
	// and range in canonical UCUM base units when the unit is UCUM and
	// convertible (5 mg and 0.005 g have equal CanonValue and CanonUnit).
	Unit                            string
	CanonValue, CanonLow, CanonHigh *big.Rat
	CanonUnit                       string

	// Reference: type, id and version of a literal reference (relative or
	// absolute), URL for absolute references, canonicals and urn:uuid,
	// and the logical identifier ("system|value") for :identifier.
	RefType, RefID, RefVersion, URL string
	IdentSystem, IdentValue         string

	// URI: the value, compared exactly (and by prefix for :above/:below).
	URI string

	// Composite: one entry per component, in component order.
	Components []Entry
}

// KeySep separates the parameter code from the value in keys: a control
// character cannot occur in a parameter code, so keys of different
// parameters never collide in the single shared index.
const KeySep = "\x1f"

// Keys returns the encoded equality strings of the entry, each prefixed
// by its parameter code and KeySep, so that one multikey index serves
// every parameter and every equality query is one exact lookup:
//
//   - string: "p\x1f"+Str (normalized) and "p:exact\x1f"+Exact;
//   - token: "p\x1fcode", "p\x1fsystem|code", "p\x1f|code" when there is
//     no system, "p\x1fsystem|" when there is one; Identifier tokens also
//     "p:of-type\x1ftypeSystem|typeCode|value"; the normalized display or
//     text as "p:text\x1ftext" (prefix-scanned by :text);
//   - reference: "p\x1fType/id", "p\x1fid" (bare id; the search layer
//     uses it only when the parameter's target is unambiguous),
//     "p\x1fType/id/_history/v" when versioned, "p\x1fURL" for absolute
//     URLs, and the token forms of the identifier under "p:identifier";
//   - uri: "p\x1furi";
//   - composite: the "$"-joined product of its components' value keys,
//     only when every component has equality keys (ranges are matched on
//     Components);
//   - date, number, quantity: none (ranges are compared on bounds).
//
// The order is deterministic and there are no duplicates.
func (e Entry) Keys() []string {
	vals := e.valueKeys()
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		out = append(out, v.prefix(e.Param))
	}
	return dedupe(out)
}

// keyArena builds keys into shared blocks of bytes: a resource with
// 100,000 names has 800,000 keys, and one allocation each cost a fifth
// of their size in rounding and (for keys with a modifier) an
// intermediate "param:mod" string each. The blocks are only appended
// to, so the strings over them never change.
type keyArena struct {
	buf     []byte
	scratch []valueKey
}

// keyArenaBlock is the largest arena block: large enough that blocks are
// few, small enough that the unused end of the last one does not matter.
const keyArenaBlock = 16 << 10

// appendKeys appends the keys of e to dst, with duplicates: a caller
// that sorts and compacts all keys at once (RowBuilder) needs no
// per-entry dedupe. The keys are those of Entry.Keys.
func (a *keyArena) appendKeys(e *Entry, dst []string) []string {
	a.scratch = e.appendValueKeys(a.scratch[:0])
	for _, v := range a.scratch {
		n := len(e.Param) + len(KeySep) + len(v.val)
		if v.mod != "" {
			n += 1 + len(v.mod)
		}
		if n > MaxKeyBytes {
			dst = append(dst, v.prefix(e.Param)) // cut by key
			continue
		}
		if cap(a.buf)-len(a.buf) < n {
			// Blocks double from 256 bytes: a small resource (a Bundle
			// holds the rows of all its entries) wastes little.
			a.buf = make([]byte, 0, max(n, min(2*cap(a.buf), keyArenaBlock), 256))
		}
		start := len(a.buf)
		a.buf = append(a.buf, e.Param...)
		if v.mod != "" {
			a.buf = append(a.buf, ':')
			a.buf = append(a.buf, v.mod...)
		}
		a.buf = append(a.buf, KeySep...)
		a.buf = append(a.buf, v.val...)
		dst = append(dst, unsafe.String(&a.buf[start], n))
	}
	clear(a.scratch[:cap(a.scratch)]) // keeps no values of the resource past the rows
	return dst
}

// valueKey is a key without its parameter prefix; mod is a modifier
// namespace such as "exact" ("" for the plain one).
type valueKey struct{ mod, val string }

func (k valueKey) prefix(param string) string {
	if k.mod == "" {
		return Key(param, k.val)
	}
	return Key(param+":"+k.mod, k.val)
}

// MaxKeyBytes caps the length of a key. Values past it (a long narrative
// string, a data: URI) are indexed and searched by their first bytes only:
// index entries stay small in every backend (PostgreSQL-backed MongoDB
// stand-ins refuse index entries over 2.7 kB), at the price that :exact and
// :contains do not see past the cap. HAPI FHIR caps string index values
// the same way (at 200 characters).
const MaxKeyBytes = 1024

// Key is the key of a value of param, cut to MaxKeyBytes at a character
// boundary; index rows and queries both build keys here, so they agree.
func Key(param, val string) string {
	k := param + KeySep + val
	if len(k) <= MaxKeyBytes {
		return k
	}
	n := MaxKeyBytes
	for n > 0 && !utf8.RuneStart(k[n]) {
		n--
	}
	return k[:n]
}

// tokenForms are the keys of a token: "code", and "system|code" or
// "|code" (no system). A search for "system|" (any code of the system)
// scans the keys starting with it (see the parser's tokenMatches), so it has a key of
// its own only when there is no code: one key fewer per coding.
func tokenForms(mod, system, code string, out []valueKey) []valueKey {
	switch {
	case code == "" && system != "":
		out = append(out, valueKey{mod, system + "|"})
	case code == "":
	case system == "":
		out = append(out, valueKey{mod, code}, valueKey{mod, "|" + code})
	default:
		out = append(out, valueKey{mod, code}, valueKey{mod, system + "|" + code})
	}
	return out
}

func (e *Entry) valueKeys() []valueKey { return e.appendValueKeys(nil) }

// appendValueKeys appends the keys of valueKeys to out.
func (e *Entry) appendValueKeys(out []valueKey) []valueKey {
	switch e.Kind {
	case KindString:
		out = append(out, valueKey{"", e.Str}, valueKey{"exact", e.Exact})
	case KindToken:
		out = tokenForms("", e.System, e.Code, out)
		if e.TypeCode != "" && e.Code != "" {
			out = append(out, valueKey{"of-type", e.TypeSystem + "|" + e.TypeCode + "|" + e.Code})
		}
		if e.Text != "" {
			out = append(out, valueKey{"text", fold.Normalize(e.Text)})
		}
	case KindReference:
		if e.RefType != "" && e.RefID != "" {
			out = append(out, valueKey{"", e.RefType + "/" + e.RefID})
			if e.RefVersion != "" {
				out = append(out, valueKey{"", e.RefType + "/" + e.RefID + "/_history/" + e.RefVersion})
			}
		}
		if e.URL != "" {
			out = append(out, valueKey{"", e.URL})
			if e.RefID == "" && e.RefVersion != "" {
				// A canonical that pins a version: "url|version" finds
				// it, as the url alone does.
				out = append(out, valueKey{"", e.URL + "|" + e.RefVersion})
			}
		}
		out = tokenForms("identifier", e.IdentSystem, e.IdentValue, out)
	case KindURI:
		out = append(out, valueKey{"", e.URI})
	case KindComposite:
		out = compositeKeys(e.Components)
	}
	return out
}

// compositeKeys forms the product of the components' plain keys; nil if
// any component has none.
func compositeKeys(comps []Entry) []valueKey {
	vals := keyProduct(comps, func(*Entry, string) bool { return true })
	out := make([]valueKey, len(vals))
	for i, v := range vals {
		out[i] = valueKey{"", v}
	}
	return out
}

// keyProduct is the "$"-joined product of the components' plain key
// values that keep accepts; nil if a component has none.
func keyProduct(comps []Entry, keep func(c *Entry, val string) bool) []string {
	if len(comps) == 0 {
		return nil
	}
	acc := []string{""}
	for i := range comps {
		c := &comps[i]
		var vals []string
		for _, k := range c.valueKeys() {
			if k.mod == "" && keep(c, k.val) {
				vals = append(vals, k.val)
			}
		}
		// Forms the plain keys leave to a prefix scan or to Type/id keys
		// are whole keys inside a composite: a token's "system|" and a
		// reference's bare id.
		if c.Kind == KindToken && c.System != "" && c.Code != "" && keep(c, c.System+"|") {
			vals = append(vals, c.System+"|")
		}
		if c.Kind == KindReference && c.RefID != "" && keep(c, c.RefID) {
			vals = append(vals, c.RefID)
		}
		if len(vals) == 0 {
			return nil
		}
		next := make([]string, 0, len(acc)*len(vals))
		for _, a := range acc {
			for _, v := range vals {
				if i > 0 {
					v = a + "$" + v
				}
				next = append(next, v)
			}
		}
		acc = next
	}
	return acc
}

func dedupe(keys []string) []string {
	if len(keys) < 2 {
		return keys
	}
	out := keys[:0]
	for i, k := range keys {
		dup := false
		for _, p := range keys[:i] {
			if p == k {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, k)
		}
	}
	return out
}

// String renders an entry for debugging and test failure messages.
func (e Entry) String() string {
	var b strings.Builder
	b.WriteString(e.Param)
	b.WriteString(" ")
	b.WriteString(e.Kind.String())
	b.WriteString(" ")
	switch e.Kind {
	case KindString:
		b.WriteString(e.Str)
	case KindToken:
		b.WriteString(e.System + "|" + e.Code)
	case KindDate:
		b.WriteString(e.Low.Format(time.RFC3339Nano) + ".." + e.High.Format(time.RFC3339Nano))
	case KindNumber, KindQuantity:
		b.WriteString(ratString(e.NumLow) + ".." + ratString(e.NumHigh) + " " + e.System + "|" + e.Code)
	case KindReference:
		b.WriteString(e.RefType + "/" + e.RefID + " " + e.URL)
	case KindURI:
		b.WriteString(e.URI)
	case KindComposite:
		for i, c := range e.Components {
			if i > 0 {
				b.WriteString(" $ ")
			}
			b.WriteString(c.String())
		}
	}
	return b.String()
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "*"
	}
	return r.FloatString(6)
}
