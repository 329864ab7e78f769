package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/cmd/kiln/internal/synth"
	"github.com/kiln-fhir/kiln/profiles/national"
)

// readBack opens the data folder as `kiln serve` would and GETs path
// through the handler.
func readBack(t *testing.T, dir string, paths ...string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	a, _ := openTestApp(t, "--data", dir)
	tok, err := a.AdminToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "https://127.0.0.1"+p, nil)
		req.Header.Set("Accept", "application/fhir+json")
		req.Header.Set("Authorization", "Bearer "+tok)
		a.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, rec.Code, rec.Body)
		}
		out[p] = rec.Body.Bytes()
	}
	return out
}

func testGenerate(t *testing.T, mode string) {
	dir := t.TempDir()
	args := []string{"admin", "generate", "--data", dir, "--patients", "3", "--observations-per-patient", "2",
		"--workers", "2", "--batch", "6", "--mode", mode}
	for round := 1; round <= 2; round++ { // the second run rewrites the same ids
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, nil, &out, &errOut); err != nil {
			t.Fatalf("round %d: %v\n%s%s", round, err, out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "wrote 9 resources (3 patients)") {
			t.Errorf("round %d output:\n%s", round, out.String())
		}
	}
	got := readBack(t, dir, "/fhir/Patient/pat-3", "/fhir/Observation/obs-3-2", "/fhir/Observation/obs-1-1")
	var obs struct {
		ID      string `json:"id"`
		Subject struct{ Reference string }
		Code    struct {
			Coding []struct{ System, Code string }
		}
		Meta struct{ VersionID string }
	}
	if err := json.Unmarshal(got["/fhir/Observation/obs-3-2"], &obs); err != nil {
		t.Fatal(err)
	}
	if obs.ID != "obs-3-2" || obs.Subject.Reference != "Patient/pat-3" ||
		obs.Code.Coding[0].Code != synth.Codes[synth.ObservationCode(3, 2)].Code {
		t.Errorf("read back %s", got["/fhir/Observation/obs-3-2"])
	}
	var pat struct {
		ID   string
		Name []struct{ Family string }
	}
	if err := json.Unmarshal(got["/fhir/Patient/pat-3"], &pat); err != nil {
		t.Fatal(err)
	}
	if pat.ID != "pat-3" || pat.Name[0].Family != synth.New(synth.DefaultSeed).Family(3) {
		t.Errorf("read back %s", got["/fhir/Patient/pat-3"])
	}
}

func TestAdminGeneratePut(t *testing.T) { testGenerate(t, "put") }

func TestAdminGenerateTransaction(t *testing.T) { testGenerate(t, "transaction") }

func TestAdminGenerateFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--patients", "0"},
		{"--patients", "2", "--mode", "post"},
		{"--patients", "2", "--workers", "0"},
		{"--patients", "2", "--batch", "-1"},
		{"--patients", "2", "extra"},
	} {
		if err := run(context.Background(), append([]string{"admin", "generate", "--data", t.TempDir()}, args...), nil, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if err := run(context.Background(), []string{"admin", "nothing"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("unknown admin command accepted")
	}
}

func TestOutcomeText(t *testing.T) {
	oo := `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"invalid","diagnostics":"bad value","expression":["Patient.birthDate"]}]}`
	if got := outcomeText([]byte(oo)); got != "error invalid: bad value (at Patient.birthDate)" {
		t.Errorf("%q", got)
	}
	if got := outcomeText([]byte("plain text\n")); got != "plain text" {
		t.Errorf("%q", got)
	}
}

// loadTestServer answers every search with a two-entry Bundle and every
// read with a Patient, over TLS on 127.0.0.1, and checks the parameters.
func loadTestServer(t *testing.T) (srv *httptest.Server, caFile string, served *atomic.Int64, bad *atomic.Value) {
	t.Helper()
	served, bad = new(atomic.Int64), new(atomic.Value)
	codes := map[string]bool{}
	for _, c := range synth.Codes {
		codes[synth.LOINC+"|"+c.Code] = true
	}
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/fhir+json")
		switch {
		case r.URL.Path == "/fhir/Observation":
			n, err := strconv.Atoi(strings.TrimPrefix(q.Get("subject"), "Patient/pat-"))
			if err != nil || n < 1 || n > 5 || !codes[q.Get("code")] {
				bad.Store(r.URL.RawQuery)
			}
			io.WriteString(w, `{"resourceType":"Bundle","type":"searchset","total":2,"entry":[{"fullUrl":"https://x/fhir/Observation/a","resource":{"resourceType":"Observation"}},{"fullUrl":"https://x/fhir/Observation/b","resource":{"resourceType":"Observation"}}]}`)
		case r.URL.Path == "/fhir/Patient" && q.Has("family"):
			if len([]rune(q.Get("family"))) > 3 || !strings.HasPrefix(q.Get("birthdate"), "ge") {
				bad.Store(r.URL.RawQuery)
			}
			io.WriteString(w, `{"resourceType":"Bundle","type":"searchset","entry":[{"fullUrl":"https://x/fhir/Patient/pat-1","resource":{"resourceType":"Patient"}}]}`)
		case strings.HasPrefix(r.URL.Path, "/fhir/Patient/pat-"):
			io.WriteString(w, `{"resourceType":"Patient"}`)
		default:
			bad.Store(r.URL.String())
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile, served, bad
}

// loadRow returns the cells of the summary row of a load report.
func loadRow(t *testing.T, out string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| scenario") {
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			if len(cells) == 11 {
				return cells
			}
		}
	}
	t.Fatalf("no summary row in:\n%s", out)
	return nil
}

func TestAdminLoad(t *testing.T) {
	srv, ca, served, bad := loadTestServer(t)
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("test server on %s", srv.URL)
	}
	for _, tc := range []struct {
		scenario, proto, entries string
	}{
		{"obs-by-subject-code", "h2", "2.00"},
		{"patient-family-birthdate", "http1", "1.00"},
		{"read", "h2", "1.00"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			before := served.Load()
			var out bytes.Buffer
			start := time.Now()
			err := run(context.Background(), []string{"admin", "load", "--url", srv.URL + "/fhir", "--ca", ca,
				"--connections", "2", "--duration", "300ms", "--warmup", "0s", "--scenario", tc.scenario,
				"--patients", "5", "--observations-per-patient", "3", "--proto", tc.proto}, nil, &out, io.Discard)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("ran %s for a 300ms run", el)
			}
			row := loadRow(t, out.String())
			requests, _ := strconv.Atoi(row[3])
			rps, _ := strconv.ParseFloat(row[5], 64)
			p50, _ := strconv.ParseFloat(row[6], 64)
			p99, _ := strconv.ParseFloat(row[8], 64)
			if row[0] != tc.scenario || row[1] != tc.proto || row[2] != "2" || row[4] != "0" || row[10] != tc.entries {
				t.Errorf("row %q\n%s", row, out.String())
			}
			if n := served.Load() - before; requests < 10 || int64(requests) > n {
				t.Errorf("reported %d requests, server saw %d\n%s", requests, n, out.String())
			}
			if rps <= 0 || p50 <= 0 || p99 < p50 {
				t.Errorf("row %q", row)
			}
			if b := bad.Load(); b != nil {
				t.Errorf("unexpected request %v", b)
			}
		})
	}
}

func TestAdminLoadErrorsAreCounted(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotImplemented)
		io.WriteString(w, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-supported","diagnostics":"search is not implemented"}]}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	var out bytes.Buffer
	err := run(context.Background(), []string{"admin", "load", "--url", srv.URL + "/fhir", "--insecure",
		"--connections", "1", "--duration", "300ms", "--warmup", "0s", "--patients", "3"}, nil, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	row := loadRow(t, out.String())
	if row[3] != row[4] || row[3] == "0" || !strings.Contains(out.String(), "search is not implemented") || !strings.Contains(out.String(), "501×") {
		t.Errorf("%s", out.String())
	}
}

func TestAdminLoadRefusesRemote(t *testing.T) {
	for _, u := range []string{"https://example.com/fhir", "https://10.0.0.1:8443/fhir", "http://127.0.0.1:8443/fhir"} {
		err := run(context.Background(), []string{"admin", "load", "--url", u, "--patients", "3", "--duration", "1s"}, nil, io.Discard, io.Discard)
		if err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1", "127.3.2.1"} {
		if !isLoopback(h) {
			t.Errorf("%s is loopback", h)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	var vals []time.Duration
	for i := 1; i <= 10000; i++ {
		d := time.Duration(i) * 3 * time.Microsecond
		vals = append(vals, d)
		h.record(d)
	}
	slices.Sort(vals)
	for _, q := range []float64{.5, .9, .99, 1} {
		want := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		if got < want || float64(got) > float64(want)*1.016 {
			t.Errorf("q%.2f = %s, want %s (+1.6%%)", q, got, want)
		}
	}
	for v := int64(0); v < 1<<20; v += 7 {
		i := histIndex(v)
		if histUpper(i) < v || (i > 0 && histUpper(i-1) >= v) {
			t.Fatalf("value %d in bucket %d [.., %d]", v, i, histUpper(i))
		}
	}
	if i := histIndex(1<<63 - 1); i >= histBuckets {
		t.Fatalf("max index %d ≥ %d", i, histBuckets)
	}
	var m histogram
	m.merge(&h)
	if m.n != h.n || m.quantile(.5) != h.quantile(.5) || m.max != h.max {
		t.Error("merge")
	}
}

// kiln admin reindex rebuilds the index of every resource in a data folder
// and says how many it reindexed; unknown types and missing folders are
// refused.
func TestAdminReindex(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := run(ctx, []string{"admin", "generate", "--data", dir, "--patients", "2", "--observations-per-patient", "3", "--mode", "put"}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(ctx, []string{"admin", "reindex", "--data", dir}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	// The generated resources, and the national pack's conformance
	// resources the server installed.
	pack, err := fs.Glob(national.Files, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("reindex: %d resources", 8+len(pack)); !strings.Contains(out.String(), want) {
		t.Errorf("output %q does not report %s", out.String(), want)
	}
	out.Reset()
	if err := run(ctx, []string{"admin", "reindex", "--data", dir, "--type", "Observation"}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "reindex: 6 resources") {
		t.Errorf("--type Observation: %v, %q", err, out.String())
	}
	for _, args := range [][]string{{"--data", dir, "--type", "Nope"}, {"--data", filepath.Join(dir, "missing")}} {
		if err := run(ctx, append([]string{"admin", "reindex"}, args...), nil, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// With --rate the connections send on a schedule instead of as fast as
// answers come: a fast server gets about the asked rate, never far more.
func TestAdminLoadRate(t *testing.T) {
	srv, ca, served, _ := loadTestServer(t)
	before := served.Load()
	var out bytes.Buffer
	err := run(context.Background(), []string{"admin", "load", "--url", srv.URL + "/fhir", "--ca", ca,
		"--connections", "4", "--rate", "50", "--duration", "500ms", "--warmup", "0s", "--scenario", "read",
		"--patients", "5"}, nil, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "50 req/s scheduled") {
		t.Errorf("output does not say the rate:\n%s", out.String())
	}
	// 50 req/s for 0.5 s is 25: a closed loop against this server sends
	// hundreds.
	if n := served.Load() - before; n < 1 || n > 40 {
		t.Errorf("server saw %d requests at --rate 50 for 0.5s\n%s", n, out.String())
	}
	if err := run(context.Background(), []string{"admin", "load", "--rate", "-1", "--patients", "5"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("a negative rate was accepted")
	}
}
