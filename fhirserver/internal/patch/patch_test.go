package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the output.json golden files of the cases that succeed")

// runGolden runs every case directory under testdata/dir: input.json and
// patch.json, and either output.json (the expected result, compared as
// JSON with numbers compared by their text) or status.txt (the expected
// *Error status).
func runGolden(t *testing.T, dir string, apply func(resource, patch []byte) ([]byte, error)) {
	t.Helper()
	cases, err := os.ReadDir(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no test cases")
	}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		name := c.Name()
		t.Run(name, func(t *testing.T) {
			base := filepath.Join("testdata", dir, name)
			input := readFile(t, filepath.Join(base, "input.json"))
			p := readFile(t, filepath.Join(base, "patch.json"))
			got, err := apply(input, p)
			if status, ok := readStatus(t, filepath.Join(base, "status.txt")); ok {
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("want *Error with status %d, got result %s, error %v", status, got, err)
				}
				if pe.Status != status {
					t.Fatalf("want status %d, got %d: %v", status, pe.Status, err)
				}
				if got != nil {
					t.Fatalf("a failed patch returned a result: %s", got)
				}
				t.Logf("%v", err)
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !json.Valid(got) {
				t.Fatalf("result is not valid JSON: %s", got)
			}
			golden := filepath.Join(base, "output.json")
			if *updateGolden {
				var b bytes.Buffer
				if err := json.Indent(&b, got, "", "  "); err != nil {
					t.Fatal(err)
				}
				b.WriteByte('\n')
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := readFile(t, golden)
			if !sameJSON(t, got, want) {
				t.Fatalf("result differs\n got: %s\nwant: %s", got, bytes.Join(bytes.Fields(want), nil))
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readStatus(t *testing.T, path string) (int, bool) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n, true
}

// sameJSON compares two documents exactly, numbers by their text.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	x, err := decode(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestJSONPatchGolden(t *testing.T) { runGolden(t, "jsonpatch", JSONPatch) }

func TestFHIRPathPatchGolden(t *testing.T) { runGolden(t, "fhirpathpatch", FHIRPathPatch) }
