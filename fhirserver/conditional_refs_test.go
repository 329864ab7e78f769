package fhirserver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// A conditional reference ("Patient?identifier=…") in a resource written
// outside a transaction (create, update, conditional update, patch, an
// entry of a batch) is replaced by the one resource its criteria match,
// wherever in the resource it is. No match or several is a 412, a
// malformed criteria a 400, and nothing is written.
func TestConditionalReferencesOutsideTransactions(t *testing.T) {
	h := newHarness(t)
	one := h.create(t, "Patient", patientWith("cref-one", "One"))
	h.create(t, "Patient", patientWith("cref-dup", "A"))
	h.create(t, "Patient", patientWith("cref-dup", "B"))
	const (
		toOne  = "Patient?identifier=" + testSystem + "|cref-one"
		toNone = "Patient?identifier=" + testSystem + "|cref-none"
		toDup  = "Patient?identifier=" + testSystem + "|cref-dup"
	)
	h.do("PUT", "/Observation/cref-put", withID(observationOf("Patient/"+one), "cref-put"))
	h.do("PUT", "/Observation/cref-patch", withID(observationOf("Patient/"+one), "cref-patch"))
	withExtension := func(ref string) []byte {
		return fmt.Appendf(nil, `{"resourceType":"Observation","status":"final","code":{"text":"x"},`+
			`"extension":[{"url":"https://kiln.example/focus","valueReference":{"reference":%q}}]}`, ref)
	}
	identified := func(value, ref string) []byte {
		return fmt.Appendf(nil, `{"resourceType":"Observation","identifier":[{"system":%q,"value":%q}],"status":"final","code":{"text":"x"},"subject":{"reference":%q}}`,
			testSystem, value, ref)
	}
	escaped := func(b []byte) []byte { return bytes.Replace(b, []byte("?"), []byte(`\u003f`), 1) }
	jsonPatch := func(ref string) []byte {
		return fmt.Appendf(nil, `[{"op":"replace","path":"/subject/reference","value":%q}]`, ref)
	}
	tests := []struct {
		name    string
		method  string
		path    string
		body    []byte
		headers []string
		status  int
		subject string // where status < 300: the reference the stored resource carries
		cond    bool   // a conditional interaction: needs store transactions
	}{
		{"create", "POST", "/Observation", observationOf(toOne), nil, 201, "Patient/" + one, false},
		{"create, in an extension", "POST", "/Observation", withExtension(toOne), nil, 201, "Patient/" + one, false},
		{"create, no match", "POST", "/Observation", observationOf(toNone), nil, 412, "", false},
		{"create, several matches", "POST", "/Observation", observationOf(toDup), nil, 412, "", false},
		{"create, under this server's base", "POST", "/Observation", observationOf(h.base + "/" + toOne), nil, 201, "Patient/" + one, false},
		{"create, another server's is left", "POST", "/Observation", observationOf("https://elsewhere.example/fhir/" + toNone), nil, 201, "https://elsewhere.example/fhir/" + toNone, false},
		{"create, ? escaped", "POST", "/Observation", escaped(observationOf(toOne)), nil, 201, "Patient/" + one, false},
		{"create, ? escaped, no match", "POST", "/Observation", escaped(observationOf(toNone)), nil, 412, "", false},
		{"create, malformed criteria", "POST", "/Observation", observationOf("Patient?birthdate=soon"), nil, 400, "", false},
		{"conditional create", "POST", "/Observation", identified("cref-ifnone", toOne), []string{"If-None-Exist", "identifier=" + testSystem + "|cref-ifnone"}, 201, "Patient/" + one, true},
		{"conditional create that matches ignores the body", "POST", "/Observation", identified("cref-ifnone", toNone), []string{"If-None-Exist", "identifier=" + testSystem + "|cref-ifnone"}, 200, "Patient/" + one, true},
		{"update", "PUT", "/Observation/cref-put", withID(observationOf(toOne), "cref-put"), nil, 200, "Patient/" + one, false},
		{"update, no match", "PUT", "/Observation/cref-put", withID(observationOf(toNone), "cref-put"), nil, 412, "", false},
		{"conditional update", "PUT", "/Observation?identifier=" + testSystem + "|cref-cond", identified("cref-cond", toOne), nil, 201, "Patient/" + one, true},
		{"patch", "PATCH", "/Observation/cref-patch", jsonPatch(toOne), []string{"Content-Type", "application/json-patch+json"}, 200, "Patient/" + one, false},
		{"patch, several matches", "PATCH", "/Observation/cref-patch", jsonPatch(toDup), []string{"Content-Type", "application/json-patch+json"}, 412, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cond {
				needsTransactions(t, h)
			}
			before := h.historyCount(t)
			r := h.do(tc.method, tc.path, tc.body, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("%d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.status >= 400 {
				expectOutcome(t, r, tc.status, "")
				if after := h.historyCount(t); after != before {
					t.Errorf("a refused write added %d versions", after-before)
				}
				return
			}
			stored := string(h.do("GET", "/Observation/"+r.json(t)["id"].(string), nil).body)
			unresolved := strings.Contains(stored, "?identifier") && !strings.Contains(tc.subject, "?")
			if unresolved || !strings.Contains(stored, `"reference":"`+tc.subject+`"`) {
				t.Errorf("stored %s, want the reference %s", stored, tc.subject)
			}
		})
	}
}

// In a batch each entry resolves its own conditional references, and one
// that matches nothing fails only its entry.
func TestBatchEntriesResolveConditionalReferences(t *testing.T) {
	h := newHarness(t)
	one := h.create(t, "Patient", patientWith("bref-one", "One"))
	entry := func(ref string) string {
		return fmt.Sprintf(`{"resource":%s,"request":{"method":"POST","url":"Observation"}}`, observationOf(ref))
	}
	r := h.do("POST", "", bundleOf("batch",
		entry("Patient?identifier="+testSystem+"|bref-one"),
		entry("Patient?identifier="+testSystem+"|bref-none"),
		entry("Patient/"+one)))
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	entries := r.json(t)["entry"].([]any)
	var statuses []string
	for _, e := range entries {
		statuses = append(statuses, e.(map[string]any)["response"].(map[string]any)["status"].(string))
	}
	if len(statuses) != 3 || !strings.HasPrefix(statuses[0], "201") || !strings.HasPrefix(statuses[1], "412") || !strings.HasPrefix(statuses[2], "201") {
		t.Fatalf("statuses %q, want 201, 412, 201", statuses)
	}
	expectIDs(t, "Observations of the patient", h.matchIDs(t, "Observation", "subject=Patient/"+one), []string{
		idOf(t, entries[0]), idOf(t, entries[2]),
	})
}

// idOf is the id in a batch entry's response location.
func idOf(t *testing.T, entry any) string {
	t.Helper()
	loc := entry.(map[string]any)["response"].(map[string]any)["location"].(string)
	_, rest, _ := strings.Cut(loc, "Observation/")
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// A version stored before conditional references were resolved may hold
// one as it was written: updates and patches keep the references the
// current version already has, so the resource stays writable.
func TestConditionalReferencesAlreadyStoredAreKept(t *testing.T) {
	h := newHarness(t)
	const ref = "Patient?identifier=" + testSystem + "|kept-none"
	legacy := withID(observationOf(ref), "legacy")
	err := h.store.Put(t.Context(), store.Write{Type: "Observation", ID: "legacy", Version: 1, LastUpdated: time.Now().UTC(),
		Method: store.MethodCreate, Body: legacy})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`[{"op":"replace","path":"/status","value":"amended"}]`)
	if r := h.do("PATCH", "/Observation/legacy", patch, "Content-Type", "application/json-patch+json"); r.status != http.StatusOK {
		t.Fatalf("patch of another element: %d %s", r.status, r.body)
	}
	if r := h.do("PUT", "/Observation/legacy", legacy); r.status != http.StatusOK {
		t.Fatalf("update keeping the reference: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/Observation/legacy", nil); !strings.Contains(string(r.body), `"reference":"`+ref+`"`) {
		t.Errorf("the stored reference changed: %s", r.body)
	}
	// A new one is resolved, or refused when it matches nothing.
	other := withID(observationOf("Patient?identifier="+testSystem+"|kept-other"), "legacy")
	expectOutcome(t, h.do("PUT", "/Observation/legacy", other), http.StatusPreconditionFailed, "kept-other")
}
