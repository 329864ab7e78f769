package fhirjson

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

var goldenTime = time.Date(2026, 11, 21, 21, 27, 24, 123456789, time.UTC)

// TestSetMetaGolden runs every testdata/setmeta/NAME.input.json through
// SetMeta(id "new-id", version "3", goldenTime) and compares the result with
// the hand-written NAME.golden.json.
func TestSetMetaGolden(t *testing.T) {
	v := newValidator(t)
	inputs, err := filepath.Glob("testdata/setmeta/*.input.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(in, ".input.json") + ".golden.json")
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.TrimSuffix(want, []byte("\n"))
			if _, err := v.Check(body); err != nil {
				t.Fatalf("input does not pass Check: %v", err)
			}
			got, err := SetMeta(body, "new-id", "3", goldenTime)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("SetMeta mismatch\n got: %s\nwant: %s", got, want)
			}
			if info, err := v.Check(got); err != nil || info.ID != "new-id" {
				t.Errorf("output does not pass Check: %+v %v", info, err)
			}
		})
	}
}

func TestSetMetaPatientFixture(t *testing.T) {
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := SetMeta(body, "p-7", "12", goldenTime)
	if err != nil {
		t.Fatal(err)
	}
	// Same content as the input apart from id and meta.
	var in, out map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, got)
	}
	meta := out["meta"].(map[string]any)
	if out["id"] != "p-7" || meta["versionId"] != "12" || meta["lastUpdated"] != "2026-11-21T21:27:24.123Z" {
		t.Errorf("id/meta not set: %v %v", out["id"], meta)
	}
	inMeta := in["meta"].(map[string]any)
	inMeta["versionId"], inMeta["lastUpdated"] = "12", "2026-11-21T21:27:24.123Z"
	in["id"] = "p-7"
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out)
	if !bytes.Equal(a, b) {
		t.Errorf("content changed:\n in: %s\nout: %s", a, b)
	}
	if !bytes.HasPrefix(got, []byte(`{"resourceType":"Patient","id":"p-7","meta":{"versionId":"12","lastUpdated":"2026-11-21T21:27:24.123Z","profile":`)) {
		t.Errorf("member order: %.120s", got)
	}
}

func TestSetMetaTime(t *testing.T) {
	body := []byte(`{"resourceType":"Patient"}`)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05.000Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.UTC), "2026-01-02T03:04:05.999Z"},
		// Other zones are converted to UTC.
		{time.Date(2026, 1, 2, 10, 4, 5, 7_000_000, time.FixedZone("AEST", 10*3600)), "2026-01-02T00:04:05.007Z"},
	} {
		got, err := SetMeta(body, "a", "1", tc.t)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"resourceType":"Patient","id":"a","meta":{"versionId":"1","lastUpdated":"` + tc.want + `"}}`
		if string(got) != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if _, err := SetMeta(body, "a", "1", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("year 10000 accepted")
	}
}

func TestSetMetaErrors(t *testing.T) {
	ok := []byte(`{"resourceType":"Patient"}`)
	for _, id := range []string{"", "a b", "a/b", strings.Repeat("x", 65), "é"} {
		_, err := SetMeta(ok, id, "1", goldenTime)
		if oe, isOE := outcome.As(err); !isOE || oe.Status != 400 {
			t.Errorf("id %q: %v", id, err)
		}
		if _, err := SetMeta(ok, "a", id, goldenTime); err == nil {
			t.Errorf("versionId %q accepted", id)
		}
	}
	for _, body := range []string{``, `[]`, `{}`, `{"resourceType":1}`, `{"resourceType":"Patient"`, `{"resourceType":"Patient","a":1,"a":2}`, `{"resourceType":"Patient","meta":null}`} {
		if out, err := SetMeta([]byte(body), "a", "1", goldenTime); err == nil {
			t.Errorf("SetMeta(%s) = %s, want an error", body, out)
		}
	}
}

// TestRestamp: a body SetMeta made is moved to another time in place; a
// body it did not make, or a time outside 0001-9999, is refused.
func TestRestamp(t *testing.T) {
	t1 := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	t2 := time.Date(2026, 3, 1, 9, 30, 1, 250e6, time.FixedZone("CET", 3600))
	stamped, err := SetMeta([]byte(`{"resourceType":"Observation","meta":{"lastUpdated":"2020-01-01T00:00:00Z","tag":[{"code":"x"}]},"status":"final"}`), "o1", "1", t1)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := Restamp(stamped, t2)
	want := `{"resourceType":"Observation","id":"o1","meta":{"versionId":"1","lastUpdated":"2026-03-01T08:30:01.250Z","tag":[{"code":"x"}]},"status":"final"}`
	if !ok || string(got) != want {
		t.Fatalf("Restamp = %s %v, want %s", got, ok, want)
	}
	if string(stamped) == string(got) {
		t.Fatal("Restamp changed its input")
	}
	for _, tt := range []struct {
		name string
		body string
		at   time.Time
	}{
		{"not SetMeta's", `{"status":"final","resourceType":"Observation","meta":{"lastUpdated":"2026-03-01T09:30:00.000Z"}}`, t2},
		{"no lastUpdated", `{"resourceType":"Observation","id":"o1"}`, t2},
		{"short timestamp", `{"resourceType":"Observation","id":"o1","meta":{"versionId":"1","lastUpdated":"2026"}}`, t2},
		{"year 10000", string(stamped), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if got, ok := Restamp([]byte(tt.body), tt.at); ok {
			t.Errorf("%s: Restamp = %s, want refusal", tt.name, got)
		}
	}
}
