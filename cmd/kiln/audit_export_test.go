package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
)

// `kiln admin audit export --partition workforce --since DATE` writes the
// workforce service's records of that period as NDJSON, and only those:
// each line a stored, chained AuditEvent whose source names the workforce
// partition, naming opaque ids, never the worker's name or EMP id.
func TestAuditExportWorkforce(t *testing.T) {
	data := t.TempDir()
	a, _ := openTestApp(t, "--data", data, "--base-url", "https://kiln.test:9443")
	tok, err := a.AdminToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, ct, body string) {
		t.Helper()
		req := httptest.NewRequest(method, "https://kiln.test:9443"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		a.Handler.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	do("POST", "/workforce", "application/json", `{"name":"Oksana Velmira","employee_id":"EMP-31337","company":"Velmira Drilling","role":"Driller"}`)
	do("GET", "/workforce/EMP-31337/compliance", "", "")
	do("POST", "/fhir/Organization", "application/fhir+json", `{"resourceType":"Organization","name":"Clinic"}`)
	a.Close()

	out := filepath.Join(t.TempDir(), "export.ndjson")
	var stderr bytes.Buffer
	today := time.Now().UTC().Format(time.DateOnly)
	if err := run(context.Background(), []string{"admin", "audit", "export", "--data", data, "--partition", "workforce", "--since", today, "--out", out},
		nil, io.Discard, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	f, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		var ev struct {
			ResourceType string
			Source       struct {
				Type []struct{ System, Code string }
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ResourceType != "AuditEvent" {
			t.Fatalf("line %d is not an AuditEvent: %v %s", n, err, sc.Bytes())
		}
		partition := ""
		for _, c := range ev.Source.Type {
			if c.System == audit.SystemPartition {
				partition = c.Code
			}
		}
		if partition != "workforce" {
			t.Errorf("line %d is of partition %q", n, partition)
		}
		for _, canary := range []string{"EMP-31337", "Velmira", "Oksana"} {
			if bytes.Contains(sc.Bytes(), []byte(canary)) {
				t.Errorf("line %d holds %q", n, canary)
			}
		}
	}
	// The registration (an Organization and a Patient created) and the
	// compliance read (the Patient, two searches).
	if n != 5 {
		t.Errorf("%d records exported, want 5:\n%s", n, f)
	}
	if !strings.Contains(stderr.String(), "5 records") {
		t.Errorf("stderr %q", stderr.String())
	}
	// Since tomorrow: nothing; an existing file is never overwritten.
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"admin", "audit", "export", "--data", data, "--since", tomorrow}, nil, &stdout, io.Discard); err != nil || stdout.Len() != 0 {
		t.Errorf("since tomorrow: %v, %d bytes", err, stdout.Len())
	}
	if err := run(context.Background(), []string{"admin", "audit", "export", "--data", data, "--out", out}, nil, io.Discard, io.Discard); err == nil {
		t.Error("an existing export file was overwritten")
	}
	if err := run(context.Background(), []string{"admin", "audit", "export", "--data", data, "--partition", "nope"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("an unknown partition was accepted")
	}
}
