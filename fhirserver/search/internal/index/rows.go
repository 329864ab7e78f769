package index

import (
	"cmp"
	"math"
	"math/big"
	"slices"
	"strings"
)

// Rows is the backend form of one resource's index entries: what a store
// writes next to the resource version, in the same transaction, and what
// the Matches of a search.Query are compiled against. Every backend stores
// the same three shapes, whatever the parameter (DESIGN.md: one index per
// shape, not one per parameter).
type Rows struct {
	// Keys are equality strings "param\x1fvalue" (see Entry.Keys), sorted
	// and without duplicates: OpKey looks them up exactly, OpKeyPrefix and
	// OpKeyContains scan a prefix of them.
	Keys []string
	// Dates are date ranges in unix microseconds, [Low, High).
	Dates []DateRow
	// Numbers are number and quantity ranges, [Low, High] inclusive as
	// stated; open ends are ±math.MaxFloat64.
	Numbers []NumberRow
	// Sorts hold one row per parameter that has any entry: the least and
	// greatest sort value (string, int64 or float64; nil for composites).
	// They answer _sort and :missing.
	Sorts []SortRow
}

// DateRow is one date range of a parameter.
type DateRow struct {
	Param     string
	Low, High int64
}

// NumberRow is one numeric range. Param carries the unit discriminator
// for quantities: "p" (any unit), "p\x1fsystem|code", "p\x1f|code" (code
// or unit text, any system), "p\x1fucum:unit" (canonical UCUM, values
// converted); composite ranges prefix it as "p$key$key".
type NumberRow struct {
	Param     string
	Low, High float64
}

// SortRow is the sort value and presence of one parameter.
type SortRow struct {
	Param  string
	Lo, Hi any
}

// Open numeric bounds; SQLite has no portable infinity.
const (
	NumMin = -math.MaxFloat64
	NumMax = math.MaxFloat64
)

// MakeRows turns the entries of one resource into rows.
func MakeRows(entries []Entry) Rows {
	var b RowBuilder
	b.Add(entries)
	return b.Finish()
}

// RowBuilder makes the rows of one resource from its entries, which may
// come in several batches: extraction hands them over as it goes, so a
// resource with 100,000 names never holds all its Entries (hundreds of
// bytes each) at once, only their much smaller rows.
type RowBuilder struct {
	r     Rows
	keys  keyArena
	sorts map[string]*SortRow
	order []string
	// covered are the parameters with Covered entries (see Finish).
	covered []string
}

func (b *RowBuilder) sortRow(param string) *SortRow {
	s, ok := b.sorts[param]
	if !ok {
		if b.sorts == nil {
			b.sorts = map[string]*SortRow{}
		}
		s = &SortRow{Param: param}
		b.sorts[param] = s
		b.order = append(b.order, param)
	}
	return s
}

// Add folds entries into the rows.
func (b *RowBuilder) Add(entries []Entry) {
	r := &b.r
	for i := range entries {
		e := &entries[i]
		s := b.sortRow(e.Param)
		if !e.Covered {
			r.Keys = b.keys.appendKeys(e, r.Keys)
		} else if !slices.Contains(b.covered, e.Param) {
			b.covered = append(b.covered, e.Param)
		}
		switch e.Kind {
		case KindString:
			v := keyValue(e.Param, e.Str)
			widen(s, v, v)
		case KindToken:
			// A text alone (CodeableConcept.text) makes the parameter
			// present but has no code to sort by.
			if e.Code != "" || e.System != "" {
				widen(s, e.Code, e.Code)
			}
		case KindReference:
			v := e.URL
			if e.RefType != "" && e.RefID != "" {
				v = e.RefType + "/" + e.RefID
			}
			widen(s, v, v)
		case KindURI:
			v := keyValue(e.Param, e.URI)
			widen(s, v, v)
		case KindDate:
			d := DateRow{e.Param, e.Low.UnixMicro(), e.High.UnixMicro()}
			r.Dates = append(r.Dates, d)
			widen(s, d.Low, d.High)
		case KindNumber:
			lo, hi := numRange(e.Value, e.NumLow, e.NumHigh, e.Strict)
			r.Numbers = append(r.Numbers, NumberRow{e.Param, lo, hi})
			widen(s, lo, hi)
		case KindQuantity:
			r.Numbers = quantityRows(e.Param, e, r.Numbers)
			lo, hi := numRange(e.Value, e.NumLow, e.NumHigh, e.Strict)
			widen(s, lo, hi)
		case KindComposite:
			r.Dates, r.Numbers = compositeRows(e, r.Dates, r.Numbers)
		}
	}
}

// Finish returns the rows: keys sorted and without duplicates, one sort
// row per parameter in code order.
func (b *RowBuilder) Finish() Rows {
	r := b.r
	// A parameter that stores only some of its values as keys keeps the
	// plain keys of its least and greatest values: those are what a
	// store reads a string's sort value from (see search.Sort.Type), and any
	// true value of the parameter is a right key to find it by.
	for _, p := range b.covered {
		s := b.sorts[p]
		for _, v := range [...]any{s.Lo, s.Hi} {
			if v, ok := v.(string); ok {
				r.Keys = append(r.Keys, p+KeySep+v)
			}
		}
	}
	slices.Sort(r.Keys)
	r.Keys = slices.Compact(r.Keys)
	for _, p := range b.order {
		r.Sorts = append(r.Sorts, *b.sorts[p])
	}
	slices.SortFunc(r.Sorts, func(a, b SortRow) int { return strings.Compare(a.Param, b.Param) })
	return r
}

// keyValue is val as the plain key of param holds it (cut to
// MaxKeyBytes): the sort value of a string or uri, so that a store may
// read sort values from those keys (see search.Sort.Type).
func keyValue(param, val string) string {
	k := Key(param, val)
	if n := len(param) + len(KeySep); n < len(k) {
		return k[n:]
	}
	return ""
}

// widen folds one value into a sort row: Lo is the least, Hi the greatest.
func widen[T cmp.Ordered](s *SortRow, lo, hi T) {
	if cur, ok := s.Lo.(T); !ok || lo < cur {
		s.Lo = lo
	}
	if cur, ok := s.Hi.(T); !ok || hi > cur {
		s.Hi = hi
	}
}

// numRange is the stored range of a number or quantity: its stated value
// when bounded on both sides (the query's precision decides eq), or the
// open range of a comparator or Range. Rows are inclusive, so the bound
// a strict comparator leaves is the float next to the value, inside.
func numRange(value, low, high *big.Rat, strict bool) (float64, float64) {
	lo, hi := NumMin, NumMax
	if low != nil {
		lo = ratFloat(low)
		if value != nil {
			lo = ratFloat(value)
		}
	}
	if high != nil {
		hi = ratFloat(high)
		if value != nil {
			hi = ratFloat(value)
		}
	}
	switch {
	case strict && low == nil:
		hi = math.Nextafter(hi, math.Inf(-1))
	case strict && high == nil:
		lo = math.Nextafter(lo, math.Inf(1))
	}
	return lo, hi
}

func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// quantityRows appends the unit forms of a quantity under param.
func quantityRows(param string, e *Entry, out []NumberRow) []NumberRow {
	lo, hi := numRange(e.Value, e.NumLow, e.NumHigh, e.Strict)
	out = append(out, NumberRow{param, lo, hi})
	for _, u := range QuantityUnitForms(e.System, e.Code, e.Unit, e.CanonUnit != "") {
		out = append(out, NumberRow{param + KeySep + u, lo, hi})
	}
	if e.CanonUnit != "" {
		clo, chi := numRange(e.CanonValue, e.CanonLow, e.CanonHigh, e.Strict)
		out = append(out, NumberRow{param + KeySep + "ucum:" + e.CanonUnit, clo, chi})
	}
	return out
}

// QuantityUnitForms lists the unit discriminators a quantity is stored
// under: "system|code" and "|code" for its code, "|unit" for a differing
// unit text. The parser looks up "system|code" for a query with a system
// and "|code" for one without. A quantity in a convertible UCUM unit
// (canonical) has no "system|code" row: a query in UCUM is always compared
// in canonical units, so that row would never be read.
func QuantityUnitForms(system, code, unit string, canonical bool) []string {
	var out []string
	if code != "" {
		if !canonical {
			out = append(out, system+"|"+code)
		}
		out = append(out, "|"+code)
	}
	if unit != "" && unit != code {
		out = append(out, "|"+unit)
	}
	return out
}

// compositeRows stores a composite whose last component is a range (a
// date or a quantity, e.g. code-value-quantity): the range rows of that
// component, under the composite's code joined by "$" with the plain keys
// of the other components, one row set per combination of key forms.
func compositeRows(e *Entry, dates []DateRow, nums []NumberRow) ([]DateRow, []NumberRow) {
	n := len(e.Components)
	if n < 2 {
		return dates, nums
	}
	last := e.Components[n-1]
	if last.Kind != KindDate && last.Kind != KindNumber && last.Kind != KindQuantity {
		return dates, nums
	}
	heads := rangeHeads(e.Components[:n-1])
	for _, h := range heads {
		param := e.Param + "$" + h
		switch last.Kind {
		case KindDate:
			dates = append(dates, DateRow{param, last.Low.UnixMicro(), last.High.UnixMicro()})
		case KindNumber:
			lo, hi := numRange(last.Value, last.NumLow, last.NumHigh, last.Strict)
			nums = append(nums, NumberRow{param, lo, hi})
		case KindQuantity:
			nums = quantityRows(param, &last, nums)
		}
	}
	return dates, nums
}

// rangeHeads forms the "$"-joined product of the components' forms that
// name a value exactly: a token's "code" and "system|code" ("|code" when
// it has no system), but not "system|", which names no value and would
// multiply the rows of every composite range by half again. Nil if a
// component has no form.
func rangeHeads(comps []Entry) []string {
	return keyProduct(comps, func(c *Entry, val string) bool {
		return !(c.Kind == KindToken && val == c.System+"|")
	})
}
