package fhirjson

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// keepShort keeps the members whose names are at most 4 bytes long: a
// selection that cuts through every fixture.
func keepShort(name string) bool { return len(name) <= 4 }

// checkMembers fails the test unless DecodeMembers gives, for data that
// Decode accepts, Decode's result without the members keep refuses, and
// never panics on anything else.
func checkMembers(t *testing.T, data []byte, keep func(string) bool) {
	t.Helper()
	got, err := DecodeMembers(data, keep)
	full, fullErr := Decode(data)
	if fullErr != nil {
		return // DecodeMembers may accept what it passes over unchecked
	}
	if err != nil {
		t.Fatalf("DecodeMembers(%q): %v; Decode accepts it", data, err)
	}
	for k := range full {
		if !keep(k) {
			delete(full, k)
		}
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("DecodeMembers(%q) = %#v, want %#v", data, got, full)
	}
}

func TestDecodeMembers(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"id":"a","meta":{"x":[1,2,{"y":"}"}]},"text":"t\\"]}"}`,
		`{"code":{"coding":[{"code":"x"}]},"contained":[[[]]],"n":-1.5e3,"status":true,"subject":null,"z":"\u00e9"}`,
		`{"resourceType":"X","valueQuantity":{"value":1},"id":"x" }`,
		` {"a" : [ "b" , { "c" : "d" } ] , "id" : 1 } `,
	} {
		checkMembers(t, []byte(in), keepShort)
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkMembers(t, b, keepShort)
		checkMembers(t, b, func(string) bool { return false })
		checkMembers(t, b, func(n string) bool { return !strings.HasPrefix(n, "n") })
	}
	// What is passed over is not built, but its extent still counts.
	for _, bad := range []string{`{"meta":"unterminated}`, `{"meta":{"a":1}`, `{"meta":[1,2`, `{"meta":`} {
		if _, err := DecodeMembers([]byte(bad), keepShort); err == nil {
			t.Errorf("DecodeMembers(%q) accepted a truncated body", bad)
		}
	}
}

// FuzzDecodeMembers: on whatever Decode accepts, DecodeMembers gives its
// result less the members passed over; on anything else, no panic.
func FuzzDecodeMembers(f *testing.F) {
	fuzzSeeds(f)
	for _, c := range decodeCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkMembers(t, data, keepShort)
	})
}

func BenchmarkDecodeMembers(b *testing.B) {
	body, err := os.ReadFile("testdata/observation.json")
	if err != nil {
		b.Fatal(err)
	}
	keep := func(n string) bool { return n == "id" || n == "status" || n == "code" }
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMembers(body, keep); err != nil {
			b.Fatal(err)
		}
	}
}
