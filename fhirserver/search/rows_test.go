package search

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/extract"
)

// ExtractRows hands entries over in batches of extract.FlushAt (so a resource with
// 100,000 names never holds all its Entries at once); the rows must be
// those of all the entries made at once, whatever the batch boundaries,
// and extraction must stay linear (the memo's linear scan made a Patient
// with many names quadratic).
func TestExtractRowsInBatchesEqualsMakeRows(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	reg.SetBase("https://kiln.test/fhir")
	for _, n := range []int{0, 1, extract.FlushAt / 3, extract.FlushAt, 5*extract.FlushAt + 7} {
		var b strings.Builder
		b.WriteString(`{"resourceType":"Patient","id":"p","birthDate":"1970-01-02","name":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"family":"Fam%d","given":["Giv%d","Same"]}`, i, i)
		}
		b.WriteString(`],"generalPractitioner":[{"reference":"https://elsewhere.test/fhir/Practitioner/x"},{"reference":"Practitioner/y"}]}`)
		res := decode(t, b.String())
		entries, err := reg.Extract(context.Background(), "Patient", res)
		if err != nil {
			t.Fatal(err)
		}
		got, err := reg.ExtractRows(context.Background(), "Patient", res)
		if err != nil {
			t.Fatal(err)
		}
		if want := MakeRows(entries); !reflect.DeepEqual(got, want) {
			t.Errorf("%d names: batched rows differ: %d keys, want %d", n, len(got.Keys), len(want.Keys))
		}
	}
}
