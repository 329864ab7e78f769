package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nationalExamples copies the national pack's example instances into a
// folder with the placeholders filled in for the default profile URL.
func nationalExamples(t *testing.T, sub string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "profiles", "national", "examples", sub)
	files, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", src, err)
	}
	canonical := strings.TrimSuffix(defaultProfileURL, "/StructureDefinition")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("{{profile_url}}", defaultProfileURL, "{{canonical}}", canonical).Replace(string(b))
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runValidateCmd(args ...string) (string, error) {
	var out, errOut strings.Builder
	err := run(context.Background(), append([]string{"validate"}, args...), nil, &out, &errOut)
	return out.String() + errOut.String(), err
}

// The national examples pass; each invalid one fails with the rule it was
// written to break, located by a FHIRPath expression.
func TestValidateCommandNationalPack(t *testing.T) {
	out, err := runValidateCmd(nationalExamples(t, ""))
	if err != nil || !strings.Contains(out, "0 with errors") {
		t.Fatalf("valid examples: %v\n%s", err, out)
	}
	invalid := nationalExamples(t, "invalid")
	tests := []struct{ file, want string }{
		{"Patient-invalid-platform-id.json", "nat-pat-1"},
		{"Patient-invalid-platform-id.json", "Patient.birthDate"},
		{"Observation-invalid-no-category-non-ucum.json", "Observation.category"},
		{"Observation-invalid-fitness-for-work.json", "nat-ffw-1"},
		{"Appointment-invalid-no-patient.json", "nat-app-1"},
	}
	for _, tt := range tests {
		out, err := runValidateCmd(filepath.Join(invalid, tt.file))
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s: %v; want an error mentioning %s:\n%s", tt.file, err, tt.want, out)
		}
	}
}

// US Core loads as a package, and hand-written instances that break
// specific US Core rules are caught at the right place.
func TestValidateCommandUSCore(t *testing.T) {
	shared := os.Getenv("KILN_SHARED")
	if shared == "" {
		t.Skip("set KILN_SHARED to the shared reference folder (with fhir/us-core-3.1.0) to run; make test does when ../shared is present")
	}
	pkg := filepath.Join(shared, "fhir", "us-core-3.1.0")
	data := filepath.Join("..", "..", "testdata", "us-core")
	if out, err := runValidateCmd("--package", pkg, filepath.Join(data, "valid")); err != nil {
		t.Fatalf("valid US Core instances: %v\n%s", err, out)
	}
	tests := []struct{ file, want string }{
		{"patient-identifier-without-system.json", "Patient.identifier[0].system"},
		{"patient-race-extension-wrong.json", "Patient.extension[0]"},
		{"patient-without-gender.json", "Patient.gender"},
		{"observation-lab-without-laboratory-category.json", "Laboratory"},
	}
	for _, tt := range tests {
		out, err := runValidateCmd("--package", pkg, "--output", "summary", filepath.Join(data, "invalid", tt.file))
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s: %v; want an error at %s:\n%s", tt.file, err, tt.want, out)
		}
	}
}

func TestValidateCommandOutputs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(`{"resourceType":"Basic","code":{"text":"x"}}`), 0o600)
	os.WriteFile(bad, []byte(`{"resourceType":"Basic"}`), 0o600) // Basic.code is 1..1

	out, err := runValidateCmd("--output", "json", bad)
	var oo map[string]any
	if err == nil || json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &oo) != nil || oo["resourceType"] != "OperationOutcome" {
		t.Errorf("json, one file: %v\n%s", err, out)
	}
	out, _ = runValidateCmd("--output", "json", good, bad)
	var bundle struct {
		ResourceType string
		Entry        []struct{ FullURL string }
	}
	if json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &bundle) != nil || bundle.ResourceType != "Bundle" || len(bundle.Entry) != 2 ||
		!strings.HasSuffix(bundle.Entry[1].FullURL, "/bad.json") {
		t.Errorf("json, two files: %s", out)
	}
	if out, err := runValidateCmd(good); err != nil || !strings.Contains(out, "1 files: 0 with errors") {
		t.Errorf("text, valid: %v\n%s", err, out)
	}

	// A baseline names the files expected to fail: exactly those passes.
	base := filepath.Join(dir, "baseline.txt")
	os.WriteFile(base, []byte("# known\nbad.json\n"), 0o600)
	if out, err := runValidateCmd("--output", "summary", "--baseline", base, good, bad); err != nil {
		t.Errorf("baseline met: %v\n%s", err, out)
	}
	os.WriteFile(base, []byte("good.json\n"), 0o600)
	if out, err := runValidateCmd("--output", "summary", "--baseline", base, good, bad); err == nil ||
		!strings.Contains(out, "bad.json has errors and is not in the baseline") || !strings.Contains(out, "good.json is in the baseline but has no error") {
		t.Errorf("baseline differs: %v\n%s", err, out)
	}

	if _, err := runValidateCmd("--profile", "https://nowhere.test/X", good); err == nil {
		t.Error("an unknown --profile is accepted")
	}
	if _, err := runValidateCmd(); err == nil {
		t.Error("no files: no usage error")
	}
}
