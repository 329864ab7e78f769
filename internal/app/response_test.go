package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// response is an answer of the server under test.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, r.body)
	}
	return m
}

// expectOutcome asserts an OperationOutcome with the given status whose
// issues mention want (in diagnostics or expression).
func expectOutcome(t *testing.T, r response, status int, want string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/fhir+json") {
		t.Errorf("Content-Type %q, want application/fhir+json", r.header.Get("Content-Type"))
	}
	m := r.json(t)
	if m["resourceType"] != "OperationOutcome" {
		t.Fatalf("body is not an OperationOutcome: %s", r.body)
	}
	issues, _ := m["issue"].([]any)
	if len(issues) == 0 {
		t.Fatalf("OperationOutcome without issues: %s", r.body)
	}
	if want != "" && !bytes.Contains(r.body, []byte(want)) {
		t.Errorf("OperationOutcome does not mention %q: %s", want, r.body)
	}
}

// fixture reads a resource of fhirserver's test fixtures.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "fhirserver", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testProfileURL is the national profiles' base in these tests.
const testProfileURL = "https://fhir.health.example/StructureDefinition"
