package fhirserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// The walk a new user takes: create, read, stale update, update, vread,
// history, delete, read after delete.
func TestResourceLifecycle(t *testing.T) {
	h := newHarness(t)
	patient := fixture(t, "patient.json")

	created := h.do("POST", "/Patient", patient)
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	if got := created.header.Get("ETag"); got != `W/"1"` {
		t.Errorf("create ETag %q, want W/\"1\"", got)
	}
	if created.header.Get("Last-Modified") == "" {
		t.Error("create sent no Last-Modified")
	}
	cm := created.json(t)
	id, _ := cm["id"].(string)
	if id == "" {
		t.Fatalf("created resource has no id: %s", created.body)
	}
	if want := h.base + "/Patient/" + id + "/_history/1"; created.header.Get("Location") != want {
		t.Errorf("Location %q, want %q", created.header.Get("Location"), want)
	}
	if vid, _ := meta(t, cm); vid != "1" {
		t.Errorf("meta.versionId %q, want 1", vid)
	}

	read := h.do("GET", "/Patient/"+id, nil)
	if read.status != http.StatusOK || !bytes.Equal(read.body, created.body) {
		t.Fatalf("read: %d, body differs from the create response:\n%s\n%s", read.status, read.body, created.body)
	}
	if read.header.Get("ETag") != `W/"1"` {
		t.Errorf("read ETag %q", read.header.Get("ETag"))
	}

	// Update with a stale version: 412, nothing written.
	update := bytes.Replace(read.body, []byte(`"Okafor"`), []byte(`"Okafor-Bello"`), 1)
	stale := h.do("PUT", "/Patient/"+id, update, "If-Match", `W/"2"`)
	expectOutcome(t, stale, http.StatusPreconditionFailed, "current version is 1")

	ok := h.do("PUT", "/Patient/"+id, update, "If-Match", `W/"1"`)
	if ok.status != http.StatusOK || ok.header.Get("ETag") != `W/"2"` {
		t.Fatalf("update: %d %s %s", ok.status, ok.header.Get("ETag"), ok.body)
	}
	if !bytes.Contains(ok.body, []byte("Okafor-Bello")) {
		t.Errorf("update response lacks the new name: %s", ok.body)
	}

	v1 := h.do("GET", "/Patient/"+id+"/_history/1", nil)
	if v1.status != http.StatusOK || !bytes.Equal(v1.body, created.body) {
		t.Fatalf("vread 1: %d %s", v1.status, v1.body)
	}

	hist := h.do("GET", "/Patient/"+id+"/_history", nil)
	if hist.status != http.StatusOK {
		t.Fatalf("history: %d %s", hist.status, hist.body)
	}
	if got := entryVersions(t, hist); fmt.Sprint(got) != "[2 1]" {
		t.Errorf("history versions %v, want [2 1] (newest first)", got)
	}

	del := h.do("DELETE", "/Patient/"+id, nil)
	if del.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", del.status, del.body)
	}
	expectOutcome(t, h.do("GET", "/Patient/"+id, nil), http.StatusGone, "deleted")
	// Deleting again changes nothing.
	if again := h.do("DELETE", "/Patient/"+id, nil); again.status != http.StatusNoContent {
		t.Errorf("second delete: %d", again.status)
	}
	hist = h.do("GET", "/Patient/"+id+"/_history", nil)
	if got := entryVersions(t, hist); fmt.Sprint(got) != "[3 2 1]" {
		t.Errorf("history after delete %v, want [3 2 1]", got)
	}
	first := bundleEntries(t, hist)[0]
	if _, has := first["resource"]; has {
		t.Error("the delete entry of history carries a resource")
	}
	if req := first["request"].(map[string]any); req["method"] != "DELETE" {
		t.Errorf("delete entry request %v", req)
	}
	// The old versions stay readable; the tombstone is gone.
	if v2 := h.do("GET", "/Patient/"+id+"/_history/2", nil); v2.status != http.StatusOK {
		t.Errorf("vread 2 after delete: %d", v2.status)
	}
	expectOutcome(t, h.do("GET", "/Patient/"+id+"/_history/3", nil), http.StatusGone, "")
	// An update after delete brings the resource back as a new version.
	back := h.do("PUT", "/Patient/"+id, update)
	if back.status != http.StatusCreated || back.header.Get("ETag") != `W/"4"` {
		t.Errorf("update after delete: %d %s", back.status, back.header.Get("ETag"))
	}
}

func TestDeleteOfUnknownIsIdempotent(t *testing.T) {
	h := newHarness(t)
	if r := h.do("DELETE", "/Patient/never-was", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete of unknown: %d %s", r.status, r.body)
	}
	expectOutcome(t, h.do("GET", "/Patient/never-was", nil), http.StatusNotFound, "Patient/never-was")
	expectOutcome(t, h.do("DELETE", "/Patient/never-was", nil, "If-Match", `W/"1"`), http.StatusPreconditionFailed, "")
}

func TestUpdateCreatesWithClientID(t *testing.T) {
	h := newHarness(t)
	body := withID(fixture(t, "patient.json"), "PT-42")
	r := h.do("PUT", "/Patient/PT-42", body)
	if r.status != http.StatusCreated || r.header.Get("ETag") != `W/"1"` {
		t.Fatalf("create-on-update: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	if r.header.Get("Location") != h.base+"/Patient/PT-42/_history/1" {
		t.Errorf("Location %q", r.header.Get("Location"))
	}
	r = h.do("PUT", "/Patient/PT-42", body)
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"2"` {
		t.Fatalf("second update: %d %s", r.status, r.header.Get("ETag"))
	}
	// If-Match on a resource that does not exist fails rather than creating it.
	expectOutcome(t, h.do("PUT", "/Patient/PT-43", withID(body, "PT-43"), "If-Match", `W/"1"`), http.StatusPreconditionFailed, "")
}

func TestCreateIgnoresClientID(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "/Patient", withID(fixture(t, "patient.json"), "chosen-by-client"))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if id := r.json(t)["id"]; id == "chosen-by-client" {
		t.Error("create kept the client's id; the server must assign one")
	}
}

// Concurrent updates of one resource never lose a write: each lands as its
// own version.
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	h := newHarness(t)
	needsAtomicCAS(t, h)
	body := withID(fixture(t, "patient.json"), "busy")
	if r := h.do("PUT", "/Patient/busy", body); r.status != http.StatusCreated {
		t.Fatalf("seed: %d %s", r.status, r.body)
	}
	const writers = 32
	var wg sync.WaitGroup
	statuses := make([]int, writers)
	for i := range writers {
		wg.Go(func() {
			b := bytes.Replace(body, []byte(`"Okafor"`), fmt.Appendf(nil, `"Writer%d"`, i), 1)
			req, _ := http.NewRequest("PUT", h.base+"/Patient/busy", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/fhir+json")
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("writer %d: status %d", i, s)
		}
	}
	r := h.do("GET", "/Patient/busy", nil)
	if want := fmt.Sprintf(`W/"%d"`, writers+1); r.header.Get("ETag") != want {
		t.Errorf("final version %s, want %s", r.header.Get("ETag"), want)
	}
	hist := h.do("GET", "/Patient/busy/_history?_count=100", nil)
	seen := map[string]bool{}
	for _, e := range bundleEntries(t, hist) {
		res := e["resource"].(map[string]any)
		name := res["name"].([]any)[0].(map[string]any)["family"].(string)
		seen[name] = true
	}
	for i := range writers {
		if !seen[fmt.Sprintf("Writer%d", i)] {
			t.Errorf("the write of writer %d is missing from history", i)
		}
	}
}

func TestConditionalRead(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	r := h.do("GET", "/Patient/"+id, nil, "If-None-Match", `W/"1"`)
	if r.status != http.StatusNotModified || len(r.body) != 0 {
		t.Errorf("If-None-Match current: %d %q", r.status, r.body)
	}
	if r := h.do("GET", "/Patient/"+id, nil, "If-None-Match", `W/"7"`); r.status != http.StatusOK {
		t.Errorf("If-None-Match other: %d", r.status)
	}
	if r := h.do("GET", "/Patient/"+id, nil, "If-Modified-Since", "Mon, 02 Jan 2006 15:04:05 GMT"); r.status != http.StatusOK {
		t.Errorf("If-Modified-Since long ago: %d", r.status)
	}
	if r := h.do("GET", "/Patient/"+id, nil, "If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT"); r.status != http.StatusNotModified {
		t.Errorf("If-Modified-Since in the future: %d", r.status)
	}
}

func TestPreferReturn(t *testing.T) {
	h := newHarness(t)
	minimal := h.do("POST", "/Patient", fixture(t, "patient.json"), "Prefer", "return=minimal")
	if minimal.status != http.StatusCreated || len(minimal.body) != 0 || minimal.header.Get("Location") == "" {
		t.Errorf("return=minimal: %d %q Location %q", minimal.status, minimal.body, minimal.header.Get("Location"))
	}
	oo := h.do("POST", "/Patient", fixture(t, "patient.json"), "Prefer", "return=OperationOutcome")
	if oo.status != http.StatusCreated || oo.json(t)["resourceType"] != "OperationOutcome" {
		t.Errorf("return=OperationOutcome: %d %s", oo.status, oo.body)
	}
	rep := h.do("POST", "/Patient", fixture(t, "patient.json"), "Prefer", "return=representation")
	if rep.json(t)["resourceType"] != "Patient" {
		t.Errorf("return=representation: %s", rep.body)
	}
}

func TestFormats(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	tests := []struct {
		name       string
		query      string
		headers    []string
		wantStatus int
		wantType   string
	}{
		{"default", "", nil, 200, "application/fhir+json"},
		{"accept fhir json", "", []string{"Accept", "application/fhir+json"}, 200, "application/fhir+json"},
		{"accept json", "", []string{"Accept", "application/json"}, 200, "application/json"},
		{"browser accept", "", []string{"Accept", "text/html,application/xhtml+xml,*/*;q=0.8"}, 200, "application/fhir+json"},
		{"_format json", "?_format=json", nil, 200, "application/fhir+json"},
		{"fhirVersion 4.0", "", []string{"Accept", "application/fhir+json; fhirVersion=4.0"}, 200, "application/fhir+json"},
		{"fhirVersion 5.0 only", "", []string{"Accept", "application/fhir+json; fhirVersion=5.0"}, 406, "application/fhir+json"},
		{"q=0.0 refuses", "", []string{"Accept", "application/json;q=0.0"}, 406, "application/fhir+json"},
		{"_format application/json", "?_format=application/json", nil, 200, "application/json"},
		{"accept xml", "", []string{"Accept", "application/fhir+xml"}, 406, "application/fhir+json"},
		{"_format xml", "?_format=xml", nil, 406, "application/fhir+json"},
		{"_format wins over accept", "?_format=xml", []string{"Accept", "application/fhir+json"}, 406, "application/fhir+json"},
		{"unknown _format", "?_format=yaml", nil, 400, "application/fhir+json"},
		{"bad _pretty", "?_pretty=yes", nil, 400, "application/fhir+json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			r := h.do("GET", "/Patient/"+id+tc.query, nil, tc.headers...)
			if r.status != tc.wantStatus || !strings.HasPrefix(r.header.Get("Content-Type"), tc.wantType) {
				t.Errorf("status %d type %q; want %d %q (%s)", r.status, r.header.Get("Content-Type"), tc.wantStatus, tc.wantType, r.body)
			}
		})
	}
	pretty := h.do("GET", "/Patient/"+id+"?_pretty=true", nil)
	if !bytes.Contains(pretty.body, []byte("\n  \"resourceType\"")) {
		t.Errorf("_pretty=true did not indent: %s", pretty.body)
	}
	var a, b any
	_ = json.Unmarshal(pretty.body, &a)
	_ = json.Unmarshal(h.do("GET", "/Patient/"+id, nil).body, &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("_pretty=true changed the content")
	}
}

func (h *harness) create(t *testing.T, typ string, body []byte) string {
	t.Helper()
	r := h.do("POST", "/"+typ, body)
	if r.status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", typ, r.status, r.body)
	}
	return r.json(t)["id"].(string)
}

// withID returns a copy of a resource with its id set.
func withID(body []byte, id string) []byte {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		panic(err)
	}
	m["id"] = id
	b, _ := json.Marshal(m)
	return b
}

func bundleEntries(t *testing.T, r response) []map[string]any {
	t.Helper()
	m := r.json(t)
	if m["resourceType"] != "Bundle" {
		t.Fatalf("not a Bundle: %s", r.body)
	}
	raw, _ := m["entry"].([]any)
	out := make([]map[string]any, len(raw))
	for i, e := range raw {
		out[i] = e.(map[string]any)
	}
	return out
}

// entryVersions lists the version of each history entry (from its ETag).
func entryVersions(t *testing.T, r response) []string {
	t.Helper()
	var out []string
	for _, e := range bundleEntries(t, r) {
		etag := e["response"].(map[string]any)["etag"].(string)
		out = append(out, strings.Trim(strings.TrimPrefix(etag, "W/"), `"`))
	}
	return out
}
