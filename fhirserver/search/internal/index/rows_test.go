package index

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"
)

// MakeRows turns entries into the three row shapes: keys sorted and
// without duplicates, a plain value stored as [v, v], open ends as the
// extreme floats, one sort row per parameter holding its least and
// greatest value, and composite ranges under their head keys.
func TestMakeRows(t *testing.T) {
	day := time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)
	code := Entry{Param: "code", Kind: KindToken, System: "http://loinc.org", Code: "8480-6"}
	mg := Entry{Param: "value-quantity", Kind: KindQuantity, System: "http://unitsofmeasure.org", Code: "mg", Unit: "mg",
		Value: rat("5.4"), NumLow: rat("5.35"), NumHigh: rat("5.45"),
		CanonValue: rat("0.0054"), CanonLow: rat("0.00535"), CanonHigh: rat("0.00545"), CanonUnit: "g"}
	entries := []Entry{
		{Param: "family", Kind: KindString, Str: "muller", Exact: "Müller"},
		{Param: "family", Kind: KindString, Str: "abel", Exact: "Abel"},
		code,
		{Param: "date", Kind: KindDate, Low: day, High: day.Add(24 * time.Hour)},
		mg,
		{Param: "range", Kind: KindNumber, NumLow: rat("1"), NumHigh: nil},
		{Param: "code-value-quantity", Kind: KindComposite, Components: []Entry{code, mg}},
	}
	r := MakeRows(entries)

	wantKeys := []string{"code\x1f8480-6", "code\x1fhttp://loinc.org|8480-6",
		"family\x1fabel", "family\x1fmuller", "family:exact\x1fAbel", "family:exact\x1fMüller"}
	if !slices.Equal(r.Keys, wantKeys) {
		t.Errorf("keys\n got %q\nwant %q", r.Keys, wantKeys)
	}
	if want := []DateRow{{"date", day.UnixMicro(), day.Add(24 * time.Hour).UnixMicro()}}; !slices.Equal(r.Dates, want) {
		t.Errorf("dates %v, want %v", r.Dates, want)
	}
	wantNums := []NumberRow{
		{"value-quantity", 5.4, 5.4},
		{"value-quantity\x1f|mg", 5.4, 5.4}, // no "system|code" row: UCUM is compared canonically
		{"value-quantity\x1fucum:g", 0.0054, 0.0054},
		{"range", 1, NumMax},
		// Composite heads name a code; "system|" alone is not stored.
		{"code-value-quantity$8480-6", 5.4, 5.4},
		{"code-value-quantity$8480-6\x1f|mg", 5.4, 5.4},
		{"code-value-quantity$8480-6\x1fucum:g", 0.0054, 0.0054},
		{"code-value-quantity$http://loinc.org|8480-6", 5.4, 5.4},
		{"code-value-quantity$http://loinc.org|8480-6\x1f|mg", 5.4, 5.4},
		{"code-value-quantity$http://loinc.org|8480-6\x1fucum:g", 0.0054, 0.0054},
	}
	if !slices.Equal(r.Numbers, wantNums) {
		t.Errorf("numbers\n got %v\nwant %v", r.Numbers, wantNums)
	}
	wantSorts := []SortRow{
		{"code", "8480-6", "8480-6"},
		{"code-value-quantity", nil, nil},
		{"date", day.UnixMicro(), day.Add(24 * time.Hour).UnixMicro()},
		{"family", "abel", "muller"},
		{"range", 1.0, NumMax},
		{"value-quantity", 5.4, 5.4},
	}
	if !slices.Equal(r.Sorts, wantSorts) {
		t.Errorf("sorts\n got %v\nwant %v", r.Sorts, wantSorts)
	}
}

// TestRowKeysAreEntryKeys: the keys MakeRows builds in its arena are
// those of Entry.Keys, for keys of every shape (modifiers, a value cut at
// MaxKeyBytes, blocks filled and started anew).
func TestRowKeysAreEntryKeys(t *testing.T) {
	long := strings.Repeat("é", MaxKeyBytes)
	var entries []Entry
	for i := range 2000 {
		entries = append(entries,
			Entry{Param: "family", Kind: KindString, Str: fmt.Sprint("fam", i), Exact: fmt.Sprint("Fam", i)},
			Entry{Param: "identifier", Kind: KindToken, System: "urn:s", Code: fmt.Sprint(i), TypeSystem: "urn:t", TypeCode: "MR"},
		)
	}
	entries = append(entries, Entry{Param: "text", Kind: KindString, Str: long, Exact: long})
	var want []string
	for _, e := range entries {
		want = append(want, e.Keys()...)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if got := MakeRows(entries).Keys; !slices.Equal(got, want) {
		t.Errorf("MakeRows gave %d keys, Entry.Keys %d", len(got), len(want))
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("first difference at %d: %q, want %q", i, got[i], want[i])
			}
		}
	}
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}
