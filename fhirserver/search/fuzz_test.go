package search

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"
)

// FuzzExtract feeds arbitrary JSON shaped like resources to Extract: it
// may return an error naming a parameter, but must not panic, and every
// entry must have a parameter, a kind and well-formed keys.
func FuzzExtract(f *testing.F) {
	for _, name := range []string{"testdata/patient.json", "testdata/observation.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	f.Add([]byte(`{"resourceType":"Observation","valueQuantity":{"value":1e400,"code":"mg","system":"http://unitsofmeasure.org"}}`), "")
	f.Add([]byte(`{"resourceType":"Encounter","period":{"start":"2024-13-01","end":7}}`), "")
	f.Add([]byte(`{"name":[{"family":["x",1,null]}],"birthDate":{"a":1}}`), "Patient")
	f.Add([]byte(`{"subject":{"reference":"Patient/1/_history/2/3"},"component":[{"code":"x","valueQuantity":"y"}]}`), "Observation")
	f.Add([]byte(`{"code":{"coding":[{"system":1,"code":true}]},"valueRange":{"low":{"value":"x"}}}`), "Observation")
	r, err := NewRegistry()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, typ string) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var m map[string]any
		if d.Decode(&m) != nil || m == nil {
			return
		}
		if typ == "" {
			typ, _ = m["resourceType"].(string)
		}
		if _, ok := r.Lookup(typ, "_id"); !ok {
			return
		}
		m["resourceType"] = typ
		// A hang is a bug too: crash with the input after a while so the
		// fuzzer records it.
		timer := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Extract hangs on %s %q", typ, data)) })
		defer timer.Stop()
		es, err := r.Extract(context.Background(), typ, m)
		rows, rerr := r.ExtractRows(context.Background(), typ, m)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Extract: %v, ExtractRows: %v", err, rerr)
		}
		if err != nil {
			return
		}
		if want := MakeRows(es); !reflect.DeepEqual(rows, want) {
			t.Fatalf("ExtractRows %+v, MakeRows of Extract %+v", rows, want)
		}
		for _, e := range es {
			if e.Param == "" || e.Kind == 0 {
				t.Fatalf("bad entry %v", e)
			}
			_ = e.Keys()
			_ = e.String()
		}
	})
}
