package index

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
		want []string
	}{
		// DESIGN: tokens in four forms; "system|" is a prefix of
		// "system|code" and has a key only without a code.
		{"token with system", Entry{Param: "code", Kind: KindToken, System: "http://loinc.org", Code: "1-8"},
			[]string{"code\x1f1-8", "code\x1fhttp://loinc.org|1-8"}},
		{"token without system", Entry{Param: "gender", Kind: KindToken, Code: "male"},
			[]string{"gender\x1fmale", "gender\x1f|male"}},
		{"token system only", Entry{Param: "identifier", Kind: KindToken, System: "http://mrn"},
			[]string{"identifier\x1fhttp://mrn|"}},
		{"token text only", Entry{Param: "code", Kind: KindToken, Text: "Headache"}, []string{"code:text\x1fheadache"}},
		{"identifier of-type", Entry{Param: "identifier", Kind: KindToken, System: "http://mrn", Code: "1", TypeSystem: "http://v2", TypeCode: "MR"},
			[]string{"identifier\x1f1", "identifier\x1fhttp://mrn|1", "identifier:of-type\x1fhttp://v2|MR|1"}},
		{"string", Entry{Param: "family", Kind: KindString, Str: "muller", Exact: "Müller"},
			[]string{"family\x1fmuller", "family:exact\x1fMüller"}},
		{"string already normal", Entry{Param: "family", Kind: KindString, Str: "smith", Exact: "smith"},
			[]string{"family\x1fsmith", "family:exact\x1fsmith"}},
		{"reference", Entry{Param: "subject", Kind: KindReference, RefType: "Patient", RefID: "1"},
			[]string{"subject\x1fPatient/1"}},
		{"reference versioned absolute", Entry{Param: "subject", Kind: KindReference, RefType: "Patient", RefID: "1", RefVersion: "2", URL: "http://x/fhir/Patient/1"},
			[]string{"subject\x1fPatient/1", "subject\x1fPatient/1/_history/2", "subject\x1fhttp://x/fhir/Patient/1"}},
		{"canonical pinning a version", Entry{Param: "questionnaire", Kind: KindReference, RefVersion: "2.0", URL: "http://x/Questionnaire/q"},
			[]string{"questionnaire\x1fhttp://x/Questionnaire/q", "questionnaire\x1fhttp://x/Questionnaire/q|2.0"}},
		{"reference identifier", Entry{Param: "subject", Kind: KindReference, IdentSystem: "http://mrn", IdentValue: "42"},
			[]string{"subject:identifier\x1f42", "subject:identifier\x1fhttp://mrn|42"}},
		{"uri", Entry{Param: "url", Kind: KindURI, URI: "http://x/vs"}, []string{"url\x1fhttp://x/vs"}},
		{"date has none", Entry{Param: "birthdate", Kind: KindDate, Low: MinTime, High: MaxTime}, []string{}},
		{"composite", Entry{Param: "cv", Kind: KindComposite, Components: []Entry{
			{Param: "code", Kind: KindToken, Code: "a"},
			{Param: "value", Kind: KindToken, System: "s", Code: "b"}}},
			[]string{"cv\x1fa$b", "cv\x1fa$s|b", "cv\x1fa$s|", "cv\x1f|a$b", "cv\x1f|a$s|b", "cv\x1f|a$s|"}},
		// Inside a composite, a reference's bare id is a key of its own.
		{"composite with reference", Entry{Param: "rel", Kind: KindComposite, Components: []Entry{
			{Param: "target", Kind: KindReference, RefType: "DocumentReference", RefID: "d0"},
			{Param: "code", Kind: KindToken, Code: "replaces"}}},
			[]string{"rel\x1fDocumentReference/d0$replaces", "rel\x1fDocumentReference/d0$|replaces", "rel\x1fd0$replaces", "rel\x1fd0$|replaces"}},
		{"composite with range", Entry{Param: "cv", Kind: KindComposite, Components: []Entry{
			{Param: "code", Kind: KindToken, Code: "a"}, {Param: "value", Kind: KindQuantity}}}, []string{}},
	}
	for _, tt := range tests {
		got := tt.e.Keys()
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Keys() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestKindString(t *testing.T) {
	for k := KindString; k <= KindComposite; k++ {
		if KindOf(k.String()) != k {
			t.Errorf("kind %d round trip", k)
		}
	}
	if KindOf("special") != 0 || Kind(99).String() != "unknown" {
		t.Error("special or unknown kinds")
	}
}

// TestLongKeysAreCapped proves a value past MaxKeyBytes is indexed by its
// first bytes, cut at a character boundary, and that a query for the same
// long value builds the same key (so it still matches).
func TestLongKeysAreCapped(t *testing.T) {
	long := strings.Repeat("é", MaxKeyBytes) // 2 bytes a character
	keys := Entry{Param: "description", Kind: KindString, Str: long, Exact: long}.Keys()
	for _, k := range keys {
		if len(k) > MaxKeyBytes || !utf8.ValidString(k) {
			t.Errorf("key of %d bytes (valid UTF-8: %v)", len(k), utf8.ValidString(k))
		}
	}
	if q := Key("description:exact", long); !slices.Contains(keys, q) {
		t.Errorf("the query key of the same value is not among the row keys")
	}
}
