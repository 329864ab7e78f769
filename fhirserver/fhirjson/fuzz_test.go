package fhirjson

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/setmeta/*.input.json")
	files = append(files, "testdata/patient.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"resourceType":"Patient","foo":1}`,
		`{"resourceType":"Patient","gender":"male","gender":"female"}`,
		`{"resourceType":"Patient","name":[{"given":["a",null],"_given":[{"id":"x"},null]}]}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Observation","code":{"text":"x"}}]}`,
		`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Observation","code":{"text":"x"},"valueQuantity":{"value":1e3}}}]}`,
		`{"resourceType":"Patient","extension":[{"url":"http://a","valueDecimal":0.5e50}]}`,
		`{"resourceType":"Patient","name":[{"family":"\ud83d\ude00\u00e9"}]}`,
		`{"resourceType":"Patient","meta":{"versionId":"1","tag":[{"code":"x"}]},"id":"a","_id":{"id":"b"}}`,
		`[]`, `{}`, `"x"`, `{"resourceType":"Patient","a":[[[[[[[[]]]]]]]]}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzCheck: no input may panic or hang, every failure is a well-formed
// 400/413 outcome, and anything accepted is a JSON object SetMeta can edit.
func FuzzCheck(f *testing.F) {
	fuzzSeeds(f)
	v, err := NewValidator(Limits{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		start := time.Now()
		info, err := v.Check(body)
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("Check took %v on %d bytes", d, len(body))
		}
		if err != nil {
			oe, ok := outcome.As(err)
			if !ok {
				t.Fatalf("Check returned %T %v", err, err)
			}
			if oe.Status != http.StatusBadRequest && oe.Status != http.StatusRequestEntityTooLarge || len(oe.Issues) == 0 {
				t.Fatalf("bad outcome %+v", oe)
			}
			if _, err := json.Marshal(oe.Issues); err != nil {
				t.Fatal(err)
			}
			return
		}
		if !json.Valid(body) || info.ResourceType == "" {
			t.Fatalf("accepted %q as %+v", body, info)
		}
		out, err := SetMeta(body, "id-1", "1", time.Unix(0, 0))
		if err != nil {
			t.Fatalf("SetMeta on a checked body: %v", err)
		}
		if _, err := v.Check(out); err != nil {
			t.Fatalf("SetMeta output fails Check: %v\nin:  %s\nout: %s", err, body, out)
		}
	})
}

// FuzzSetMeta: SetMeta never panics, and whatever it returns is valid JSON
// with the same content apart from id and meta.
func FuzzSetMeta(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := SetMeta(body, "id-1", "7", time.Unix(1700000000, 5e6))
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON out: %s", out)
		}
		var in, got map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("accepted invalid input %q: %v", body, err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		meta, _ := got["meta"].(map[string]any)
		if got["id"] != "id-1" || meta["versionId"] != "7" || meta["lastUpdated"] != "2023-11-14T22:13:20.005Z" {
			t.Fatalf("id/meta not set: %s", out)
		}
		inMeta, _ := in["meta"].(map[string]any)
		if inMeta == nil {
			inMeta = map[string]any{}
		}
		delete(inMeta, "_versionId")
		delete(inMeta, "_lastUpdated")
		inMeta["versionId"], inMeta["lastUpdated"] = "7", "2023-11-14T22:13:20.005Z"
		in["meta"], in["id"] = inMeta, "id-1"
		a, _ := json.Marshal(in)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Fatalf("content changed:\n in: %s\nout: %s", a, b)
		}
		// Restamp gives what SetMeta gives for the other time, byte for byte.
		later := time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
		want, err := SetMeta(body, "id-1", "7", later)
		if err != nil {
			t.Fatal(err)
		}
		if re, ok := Restamp(out, later); !ok || string(re) != string(want) {
			t.Fatalf("Restamp: %s %v, SetMeta: %s", re, ok, want)
		}
	})
}
