package search

// This file is the search IR: what the query parser produces and what each
// store backend compiles (to SQL, to a Mongo filter). It holds no HTTP and no
// storage concerns. Values are already encoded in the forms the index rows
// use (see package index), so a backend never interprets FHIR search syntax.

// Query is one search: the conjunction of its clauses over resources of
// Types, in Sort order, one page of Count at a time.
type Query struct {
	// Types are the resource types searched: one for a type-level search,
	// several for a system search with _type, none for every type.
	Types []string
	// Where is the AND of its clauses.
	Where []Clause
	// Sort keys in priority order; the backend breaks ties by its own
	// stable resource order (insertion order in SQLite). Empty: that order.
	Sort []Sort
	// Count is the page size; 0 asks for no resources (only a total).
	Count int
	// Total says whether the backend must count all matches.
	Total TotalMode
	// Include and RevInclude add resources to the page (search.mode include).
	Include, RevInclude []Include
	// Cursor continues a previous page: a value from an earlier Page.Next or
	// Page.Prev of the same Query, handed back unchanged. Empty: first page.
	Cursor string

	// Result shaping done by the FHIR layer after the backend answered; the
	// backends ignore these.
	Summary  Summary
	Elements []string
}

// TotalMode is _total.
type TotalMode uint8

const (
	TotalNone TotalMode = iota
	TotalEstimate
	TotalAccurate
)

// Summary is _summary.
type Summary uint8

const (
	SummaryFalse Summary = iota // the whole resource (the default)
	SummaryTrue
	SummaryText
	SummaryData
	SummaryCount
)

// Clause is one parameter occurrence of the query string: the OR of its
// matches (comma-separated values). Repeating a parameter gives another
// Clause.
type Clause struct {
	// Param is the parameter as written, with its modifier and chain
	// ("subject:Patient.name"), for messages and the self link.
	Param string
	Any   []Match
}

// Op is what one Match tests.
type Op uint8

const (
	// OpKey: the resource has an index key equal to one of Keys.
	OpKey Op = iota + 1
	// OpKeyPrefix: the resource has a key starting with Prefix (string
	// prefix search, uri :below). Prefix includes the parameter part.
	OpKeyPrefix
	// OpKeyContains: the resource has a key starting with Prefix whose
	// remainder contains Contains (string :contains; both normalized).
	OpKeyContains
	// OpDate: a date range row of Param compared with [Low, High) by Cmp.
	OpDate
	// OpNumber: a number range row of Param compared with [NumLow, NumHigh)
	// (or the exact value NumLow when NumLow == NumHigh) by Cmp.
	OpNumber
	// OpMissing: the resource has no entry at all for Param (Missing
	// true) or at least one (Missing false).
	OpMissing
	// OpChain: the resource has a reference key of Param pointing at a
	// resource matching Chain.Query (chained search).
	OpChain
	// OpHas: some resource of Has.Query's type refers to this one through
	// Has.Param and matches Has.Query (_has, reverse chaining).
	OpHas
)

// Cmp is a search prefix. The semantics, for a stored range [lo, hi) and a
// query range [qlo, qhi) (the specification's table):
//
//	eq  lo >= qlo && hi <= qhi          the query range contains the value
//	ne  !eq, for some stored value (a resource without any does not match)
//	gt  hi > qhi                         some of the value lies above the query
//	lt  lo < qlo                         some of the value lies below it
//	ge  gt || eq
//	le  lt || eq
//	sa  lo >= qhi                        the value starts after the query ends
//	eb  hi <= qlo                        the value ends before the query starts
//	ap  lo < qhi+d && hi > qlo-d         overlap, widened by d (see Match.Approx)
//
// For numbers and quantities the stored range of a plain value is that value
// (lo == hi; the comparisons above then use <=/>= at hi as the value is
// inclusive, see the backends), and for gt/lt/ge/le/sa/eb the query value
// is exact (Low == High): the specification ignores its implicit precision.
type Cmp uint8

const (
	CmpEq Cmp = iota
	CmpNe
	CmpGt
	CmpLt
	CmpGe
	CmpLe
	CmpSa
	CmpEb
	CmpAp
)

var cmpNames = [...]string{"eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap"}

func (c Cmp) String() string {
	if int(c) < len(cmpNames) {
		return cmpNames[c]
	}
	return "?"
}

// Match is one value of a clause.
type Match struct {
	Op Op
	// Type, when set, restricts the match to resources of that type (a
	// compartment clause names a different parameter per type).
	Type string
	// Not negates the match: the resource has no entry that satisfies it
	// (token :not, :not-in). A resource without the parameter at all
	// satisfies a negated match.
	Not bool

	// OpKey
	Keys []string
	// BareID is set when Keys are one id without a type, under each type
	// the parameter may refer to ("subject=123"): the server refuses the
	// search when the id names resources of two of them.
	BareID string
	// OpKeyPrefix, OpKeyContains
	Prefix, Contains string

	// OpDate, OpNumber, OpMissing: the row discriminator, e.g. "birthdate",
	// "value-quantity\x1f|mg", "code-value-quantity$http://loinc.org|8480-6".
	Param string
	Cmp   Cmp
	// OpDate: unix microseconds, [Low, High).
	Low, High int64
	// OpNumber: [NumLow, NumHigh) for eq/ne/ap; the exact value in both
	// for the other prefixes.
	NumLow, NumHigh float64
	// Approx is the half-width d added on both sides for ap (dates in
	// microseconds, numbers in the value's unit).
	Approx float64

	// OpMissing
	Missing bool

	// OpChain
	Chain *Chain
	// OpHas
	Has *Has
}

// Chain is the target side of a chained parameter: subject:Patient.name=x
// becomes Chain{RefParam: "subject", Query: Patient?name=x}; the resource
// matches when it has a key RefParam+"\x1f"+Type/id for some Patient the
// sub-query finds.
type Chain struct {
	RefParam string
	Query    *Query // Types has exactly one type; Sort, Count, Include unused
}

// Has is _has:Type:param:…: the resource matches when a resource of
// Query.Types[0] whose reference key Param+"\x1f"+ThisType/thisID exists
// matches Query.
type Has struct {
	Param string
	Query *Query // Types has exactly one type; may itself hold OpHas matches
}

// Sort is one _sort key.
type Sort struct {
	// Param is the parameter code; "_id" and "_lastUpdated" are always
	// available, other codes sort by the index rows' sort values (the
	// least value ascending, the greatest descending, as the spec asks).
	Param string
	Desc  bool
	// Type is the search parameter type every definition of Param for
	// the query's types shares ("" when they differ, and for _id and
	// _lastUpdated, columns of every store). A store may read the sort
	// values of a date from its date rows (the least low, the greatest
	// high), of a string or uri from its plain keys (also in index
	// order), and of a number or quantity from its rows of any unit.
	// It follows from Param and the query's types, so it is left out of
	// JSON (which a store may hash into its cursors).
	Type string `json:"-"`
}

// Include is one _include or _revinclude.
type Include struct {
	// Source is the type of the resources holding the reference (for
	// _include the searched type, for _revinclude the referring type), Param
	// its reference parameter ("*": every reference parameter), Target the
	// referenced type ("": any).
	Source, Param, Target string
	Iterate               bool
}
