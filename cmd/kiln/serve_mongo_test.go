package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/internal/syncbuf"
)

// TestServeOnMongoDB runs `kiln serve --mongodb-uri` from a fresh start
// against the server at MONGODB_URI (make test-mongo) and walks the
// foundation flow: create, read, update, history, search, delete.
func TestServeOnMongoDB(t *testing.T) {
	m := serveOnMongo(t)
	client, out, token := m.client, m.out, m.token
	if !strings.Contains(out.String(), "MongoDB, databases "+m.prefix+"_*") || strings.Contains(out.String(), m.uri) {
		t.Errorf("the banner should name the MongoDB store without its URI:\n%s", out.String())
	}
	base := m.base + "/fhir"
	do := func(method, path string, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader([]byte(body)))
		if body != "" {
			ct := "application/fhir+json"
			if strings.HasPrefix(path, "/patients") {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, m
	}
	status, created := do("POST", "/Patient", `{"resourceType":"Patient","identifier":[{"system":"https://fhir.health.example/sid/national-id","value":"NID-77"}],"name":[{"family":"Okafor","given":["Ada"]}],"birthDate":"1975-04-12"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, created)
	}
	id, _ := created["id"].(string)
	if status, _ := do("GET", "/Patient/"+id, ""); status != http.StatusOK {
		t.Errorf("read: %d", status)
	}
	if status, m := do("PUT", "/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","identifier":[{"system":"https://fhir.health.example/sid/national-id","value":"NID-77"}],"name":[{"family":"Okafor","given":["Adaeze"]}],"birthDate":"1975-04-12"}`); status != http.StatusOK {
		t.Errorf("update: %d %v", status, m)
	}
	if status, m := do("GET", "/Patient/"+id+"/_history", ""); status != http.StatusOK || len(entries(m)) != 2 {
		t.Errorf("history: %d, %d entries, want 2", status, len(entries(m)))
	}
	if status, m := do("GET", "/Patient?family=okaf&birthdate=1975", ""); status != http.StatusOK || len(entries(m)) != 1 {
		t.Errorf("search: %d, %d entries, want 1: %v", status, len(entries(m)), m)
	}
	if status, _ := do("DELETE", "/Patient/"+id, ""); status != http.StatusNoContent {
		t.Errorf("delete: %d", status)
	}
	if status, _ := do("GET", "/Patient/"+id, ""); status != http.StatusGone {
		t.Errorf("read after delete: %d, want 410", status)
	}
	if status, m := do("GET", "/Patient?family=okaf", ""); status != http.StatusOK || len(entries(m)) != 0 {
		t.Errorf("search after delete: %d, %d entries, want 0", status, len(entries(m)))
	}

	// The platform API on MongoDB: PT-<n> from the store's sequence, and
	// the erasure (step by step where the server has no transactions).
	base = m.base
	status, created = do("POST", "/patients", `{"first_name":"Ada","last_name":"Okafor","date_of_birth":"1975-04-12","phone":"0803 555 0101"}`)
	pid, _ := created["patient_id"].(string)
	if status != http.StatusCreated || !strings.HasPrefix(pid, "PT-") {
		t.Fatalf("POST /patients: %d %v", status, created)
	}
	if status, m := do("DELETE", "/patients/"+pid, ""); status != http.StatusOK || m["status"] != "anonymized" {
		t.Errorf("DELETE /patients/%s: %d %v", pid, status, m)
	}
	if status, m := do("GET", "/fhir/Patient?family=okafor", ""); status != http.StatusOK || len(entries(m)) != 0 {
		t.Errorf("the erased patient is still found by name: %d %v", status, m)
	}
}

func entries(bundle map[string]any) []any {
	e, _ := bundle["entry"].([]any)
	return e
}

// mongoServer is kiln serve on new MongoDB databases (MONGODB_URI),
// logged in as its first admin.
type mongoServer struct {
	uri, prefix, base, token string
	data                     string
	client                   *http.Client
	out                      *syncbuf.Buffer
	stop                     func() error
}

// serveOnMongo starts kiln serve on fresh databases of the MongoDB at
// MONGODB_URI (the test skips without one), dropped when the test ends,
// with a data folder of its own and extra flags; it logs in as the first
// admin, whose credentials it sets.
func serveOnMongo(t *testing.T, extra ...string) mongoServer {
	t.Helper()
	m := mongoServer{uri: mongotest.URI(t), prefix: mongotest.NewName(), data: t.TempDir()}
	t.Cleanup(func() {
		for _, p := range []string{"_clinical", "_workforce", "_audit"} {
			mongotest.Drop(t, m.prefix+p)
		}
	})
	t.Setenv("KILN_ADMIN_EMAIL", "admin@example.org")
	t.Setenv("KILN_ADMIN_PASSWORD", "correct horse battery staple")
	var addr string
	addr, m.client, m.out, m.stop = startServe(t, append([]string{"--data", m.data, "--mongodb-uri", m.uri, "--mongodb-database", m.prefix}, extra...)...)
	m.base = "https://" + addr
	m.token = login(t, m.client, m.base, "admin@example.org", "correct horse battery staple")
	return m
}
