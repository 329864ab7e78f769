package sealed

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/rest"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// fhirService is the FHIR service over a sealed store, called without a
// network.
type fhirService struct {
	t   *testing.T
	srv *fhirserver.Server
	r   *mux.Router
}

func newFHIRService(t *testing.T, st store.Store) *fhirService {
	t.Helper()
	srv, err := fhirserver.New(fhirserver.Config{BaseURL: "https://kiln.test/workforce/fhir",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter().SkipClean(true)
	rest.Register(r, "/workforce/fhir", srv)
	return &fhirService{t: t, srv: srv, r: r}
}

// do sends a request and returns the status and the decoded body.
func (f *fhirService) do(method, path, body string) (int, map[string]any) {
	f.t.Helper()
	req := httptest.NewRequest(method, "https://kiln.test/workforce/fhir"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	rec := httptest.NewRecorder()
	f.r.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			f.t.Fatalf("%s %s: %d, not JSON: %s", method, path, rec.Code, rec.Body.Bytes())
		}
	}
	return rec.Code, out
}

func (f *fhirService) create(body string) string {
	f.t.Helper()
	var res map[string]any
	json.Unmarshal([]byte(body), &res)
	status, got := f.do("POST", "/"+res["resourceType"].(string), body)
	if status != http.StatusCreated {
		f.t.Fatalf("create: %d %v", status, got)
	}
	return got["id"].(string)
}

// found lists Type/id of a searchset's entries.
func found(bundle map[string]any) []string {
	var out []string
	entries, _ := bundle["entry"].([]any)
	for _, e := range entries {
		res := e.(map[string]any)["resource"].(map[string]any)
		out = append(out, res["resourceType"].(string)+"/"+res["id"].(string))
	}
	return out
}

// TestFHIRService: the FHIR service runs over the sealed store as over
// any store: server-assigned ids stay plain in references, so search by
// identifier, chains, _include, _revinclude, $everything, history,
// reindex and erasure work; a refused search is a 400 OperationOutcome.
func TestFHIRService(t *testing.T) {
	dir := t.TempDir()
	st, _ := sealedSQLite(t, dir, newTestKeys(t).config("workforce"))
	f := newFHIRService(t, st)
	org := f.create(`{"resourceType":"Organization","name":"` + canaryCompany + `"}`)
	worker := f.create(`{"resourceType":"Patient","identifier":[{"system":"` + empSystem + `","value":"` + canaryEMP + `"}],
		"name":[{"family":"` + canaryFamily + `"}],"telecom":[{"system":"phone","value":"` + canaryPhone + `"}],
		"managingOrganization":{"reference":"Organization/` + org + `"}}`)
	obs := f.create(`{"resourceType":"Observation","status":"final","code":{"text":"fitness for work"},
		"subject":{"reference":"Patient/` + worker + `"},"performer":[{"display":"` + canaryProvider + `"}]}`)
	if !IsUUID(worker) || !IsUUID(org) || !IsUUID(obs) {
		t.Fatalf("ids %s %s %s: the service no longer assigns UUIDs, which the plain references rely on", org, worker, obs)
	}

	want := func(path string, refs ...string) {
		t.Helper()
		status, bundle := f.do("GET", path, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, status, bundle)
		}
		if got := strings.Join(found(bundle), " "); got != strings.Join(refs, " ") {
			t.Errorf("GET %s: found %q, want %q", path, got, strings.Join(refs, " "))
		}
	}
	p, o, g := "Patient/"+worker, "Observation/"+obs, "Organization/"+org
	want("/Patient?identifier="+empSystem+"|"+canaryEMP, p)
	want("/Patient?identifier="+canaryEMP+"&_include=Patient:organization", p, g)
	want("/Observation?subject:Patient.identifier="+canaryEMP+"&_include=Observation:subject", o, p)
	want("/Patient?_has:Observation:subject:code:missing=false&_revinclude=Observation:subject", p, o)
	want("/Patient?family:exact="+canaryFamily, p)
	want("/Patient?_lastUpdated=gt2000-01-01&_sort=-_lastUpdated", p)
	want("/Patient/"+worker+"/$everything", p, o, g)

	status, oo := f.do("GET", "/Patient?name=quill", "")
	if status != http.StatusBadRequest || oo["resourceType"] != "OperationOutcome" || !strings.Contains(oo["issue"].([]any)[0].(map[string]any)["diagnostics"].(string), "encrypted partition") {
		t.Errorf("a string prefix search: %d %v, want a 400 OperationOutcome", status, oo)
	}
	if status, oo := f.do("GET", "/Patient?_sort=birthdate", ""); status != http.StatusBadRequest {
		t.Errorf("_sort=birthdate: %d %v, want 400", status, oo)
	}

	// An update, history, a reindex.
	status, got := f.do("PUT", "/Patient/"+worker, `{"resourceType":"Patient","id":"`+worker+`","identifier":[{"system":"`+empSystem+`","value":"`+canaryEMP+`"}],
		"name":[{"family":"`+canaryFamily+`"}],"telecom":[{"system":"phone","value":"`+canaryPhoneNew+`"}]}`)
	if status != http.StatusOK {
		t.Fatalf("update: %d %v", status, got)
	}
	if status, h := f.do("GET", "/Patient/"+worker+"/_history", ""); status != http.StatusOK || len(found(h)) != 2 {
		t.Errorf("history: %d, %d versions", status, len(found(h)))
	}
	want("/Patient?phone="+strings.ReplaceAll(canaryPhoneNew, " ", "%20"), p)
	if n, err := f.srv.Reindex(context.Background(), []string{"Patient"}, nil); err != nil || n != 1 {
		t.Fatalf("Reindex: %d, %v", n, err)
	}
	want("/Patient?identifier="+canaryEMP, p)

	// Erasure rewrites every version through the sealed store.
	erased, err := f.srv.ErasePatient(context.Background(), worker, fhirserver.Erasure{
		Anonymize: func(res map[string]any) map[string]any {
			delete(res, "name")
			delete(res, "telecom")
			delete(res, "identifier")
			return res
		},
		Scrub: func(res map[string]any, ref string) (map[string]any, bool) { return res, false },
	})
	if err != nil || erased.At.IsZero() {
		t.Fatalf("ErasePatient: %+v, %v", erased, err)
	}
	want("/Patient?identifier=" + canaryEMP)
	status, h := f.do("GET", "/Patient/"+worker+"/_history", "")
	if raw, _ := json.Marshal(h); status != http.StatusOK || bytes.Contains(raw, []byte(canaryFamily)) {
		t.Errorf("history after erasure: %d %s", status, raw)
	}
	if hits := canaryHits(t, dir); len(hits) > 0 {
		t.Errorf("canaries readable in the data folder: %v", hits)
	}
}

// TestOnlyOpaqueIDs: with OnlyOpaqueIDs an update that would create a
// resource under an id the client chose is refused (400) and stores
// nothing, so the id never reaches the disk; creates get UUIDs.
func TestOnlyOpaqueIDs(t *testing.T) {
	dir := t.TempDir()
	cfg := newTestKeys(t).config("workforce")
	cfg.OnlyOpaqueIDs = true
	st, _ := sealedSQLite(t, dir, cfg)
	f := newFHIRService(t, st)
	status, oo := f.do("PUT", "/Patient/"+canaryEMP, `{"resourceType":"Patient","id":"`+canaryEMP+`"}`)
	if status != http.StatusBadRequest || oo["resourceType"] != "OperationOutcome" {
		t.Errorf("PUT under a chosen id: %d %v, want a 400 OperationOutcome", status, oo)
	}
	if status, _ := f.do("GET", "/Patient/"+canaryEMP, ""); status != http.StatusNotFound {
		t.Errorf("GET after the refused PUT: %d, want 404", status)
	}
	id := f.create(`{"resourceType":"Patient","identifier":[{"system":"` + empSystem + `","value":"` + canaryEMP + `"}]}`)
	if status, _ := f.do("PUT", "/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","active":true}`); status != http.StatusOK {
		t.Errorf("update under the assigned id: %d", status)
	}
	if hits := canaryHits(t, dir); len(hits) > 0 {
		t.Errorf("canaries readable in the data folder: %v", hits)
	}
}
