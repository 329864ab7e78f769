package patch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// addGoldenSeeds adds the input and patch of every golden case.
func addGoldenSeeds(f *testing.F, dir string) {
	cases, err := os.ReadDir(filepath.Join("testdata", dir))
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		base := filepath.Join("testdata", dir, c.Name())
		in, err1 := os.ReadFile(filepath.Join(base, "input.json"))
		p, err2 := os.ReadFile(filepath.Join(base, "patch.json"))
		if err1 == nil && err2 == nil {
			f.Add(in, p)
		}
	}
}

// checkOutcome is what every input must satisfy: a valid JSON object on
// success; on failure no result, and a *Error unless the resource itself
// is not a JSON object.
func checkOutcome(t *testing.T, resource, out []byte, err error) {
	if err != nil {
		if out != nil {
			t.Fatalf("result returned with error %v", err)
		}
		var pe *Error
		if errors.As(err, &pe) && pe.Status != 400 && pe.Status != 422 {
			t.Fatalf("status %d: %v", pe.Status, err)
		}
		if v, derr := decode(resource); derr == nil && !errors.As(err, &pe) {
			if _, isObject := v.(map[string]any); isObject {
				t.Fatalf("error on a valid resource is not a *Error: %v", err)
			}
		}
		return
	}
	if !json.Valid(out) {
		t.Fatalf("result is not valid JSON: %s", out)
	}
	if v, derr := decode(out); derr != nil {
		t.Fatalf("result cannot be decoded: %v", derr)
	} else if _, ok := v.(map[string]any); !ok {
		t.Fatalf("result is not an object: %s", out)
	}
}

func FuzzJSONPatch(f *testing.F) {
	addGoldenSeeds(f, "jsonpatch")
	f.Fuzz(func(t *testing.T, resource, patch []byte) {
		out, err := JSONPatch(resource, patch)
		checkOutcome(t, resource, out, err)
	})
}

func FuzzFHIRPathPatch(f *testing.F) {
	addGoldenSeeds(f, "fhirpathpatch")
	f.Fuzz(func(t *testing.T, resource, parameters []byte) {
		if len(resource)+len(parameters) > 1<<16 {
			return
		}
		out, err := FHIRPathPatch(resource, parameters)
		checkOutcome(t, resource, out, err)
	})
}

// FuzzFHIRPathPatchOperation builds one well-formed operation from its
// pieces, so the fuzzer spends its time on paths and values rather than
// on the JSON syntax of Parameters.
func FuzzFHIRPathPatchOperation(f *testing.F) {
	resource, err := os.ReadFile(filepath.Join("testdata", "fhirpathpatch", "add-identifier", "input.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("replace", "Patient.birthDate", "", 0, 0, `"valueDate":"2000-01-01"`)
	f.Add("delete", "Patient.name[0].given[1]", "", 0, 0, "")
	f.Add("add", "Patient.name.where(use='official')", "given", 0, 0, `"valueString":"X"`)
	f.Add("insert", "Patient.telecom", "", 1, 0, `"valueContactPoint":{"system":"fax"}`)
	f.Add("move", "Patient.name", "", 1, 0, "")
	f.Add("add", "Patient.birthDate", "extension", 0, 0, `"part":[{"name":"url","valueUri":"u"}]`)
	f.Fuzz(func(t *testing.T, typ, path, name string, a, b int, value string) {
		parts := []any{
			map[string]any{"name": "type", "valueCode": typ},
			map[string]any{"name": "path", "valueString": path},
		}
		switch typ {
		case "add":
			parts = append(parts, map[string]any{"name": "name", "valueString": name})
		case "insert":
			parts = append(parts, map[string]any{"name": "index", "valueInteger": a})
		case "move":
			parts = append(parts, map[string]any{"name": "source", "valueInteger": a}, map[string]any{"name": "destination", "valueInteger": b})
		}
		if value != "" {
			var v map[string]any
			if json.Unmarshal([]byte(`{"name":"value",`+value+`}`), &v) != nil {
				return
			}
			parts = append(parts, v)
		}
		params, _ := json.Marshal(map[string]any{"resourceType": "Parameters", "parameter": []any{map[string]any{"name": "operation", "part": parts}}})
		out, err := FHIRPathPatch(resource, params)
		checkOutcome(t, resource, out, err)
	})
}
