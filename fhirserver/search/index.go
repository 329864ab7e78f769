package search

import "github.com/kiln-fhir/kiln/fhirserver/search/internal/index"

// The index entries and the rows a store writes are defined in package
// index, beside the key encoding they share with the query parser; the
// names below keep them in this package's API.

// Kind is the typed form of an index entry, one per SearchParameter type
// that is indexed (special parameters have none).
type Kind = index.Kind

// The kinds of index entries.
const (
	KindString    = index.KindString
	KindToken     = index.KindToken
	KindDate      = index.KindDate
	KindNumber    = index.KindNumber
	KindQuantity  = index.KindQuantity
	KindReference = index.KindReference
	KindURI       = index.KindURI
	KindComposite = index.KindComposite
)

// Entry is one typed index entry extracted from a resource for one search
// parameter; Entry.Keys gives its encoded equality keys.
type Entry = index.Entry

// Rows is the backend form of one resource's index entries: keys, date
// and number ranges, and sort rows.
type Rows = index.Rows

// DateRow is one date range of a parameter, in unix microseconds.
type DateRow = index.DateRow

// NumberRow is one number or quantity range of a parameter (with its unit
// discriminator).
type NumberRow = index.NumberRow

// SortRow is the sort value and presence of one parameter.
type SortRow = index.SortRow

// Open bounds: of date ranges (a Period without start or end), and of
// number ranges.
var (
	MinTime = index.MinTime
	MaxTime = index.MaxTime
)

const (
	NumMin = index.NumMin
	NumMax = index.NumMax
)

// MaxKeyBytes caps the length of a key: values past it are indexed and
// searched by their first bytes only.
const MaxKeyBytes = index.MaxKeyBytes

// MakeRows turns the entries of one resource into rows.
func MakeRows(entries []Entry) Rows { return index.MakeRows(entries) }

// QuantityUnitForms lists the unit discriminators a quantity is stored
// under (see index.QuantityUnitForms).
func QuantityUnitForms(system, code, unit string, canonical bool) []string {
	return index.QuantityUnitForms(system, code, unit, canonical)
}
