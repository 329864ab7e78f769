package fhirserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/rest"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	mongotest.Report(os.Stdout)
	os.Exit(code)
}

// onMongo: KILN_TEST_STORE=mongo runs the HTTP tests on the MongoDB store
// at MONGODB_URI (make test-mongo) instead of the embedded one.
var onMongo = os.Getenv("KILN_TEST_STORE") == "mongo"

// testStore opens the store the HTTP tests run on, closed at cleanup.
func testStore(t testing.TB) store.Store {
	t.Helper()
	if onMongo {
		st := mongotest.Open(t)
		t.Cleanup(func() { st.Close() })
		return st
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "clinical.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// needsTransactions skips a test that needs multi-document transactions
// when the store has none, and records it in the not-run report.
func needsTransactions(t *testing.T, h *harness) {
	t.Helper()
	if !hasTransactions(t, h) {
		why := "the store has no multi-document transactions (FerretDB); the refusal itself is tested by TestTransactionRefusedWithoutStoreTransactions"
		mongotest.NotRun("HTTP "+t.Name(), why)
		t.Skip(why)
	}
}

// needsAtomicCAS skips a test of concurrent compare-and-swap writes on
// FerretDB, which applies updates read-modify-write without checking the
// version filter atomically, and records it in the not-run report.
func needsAtomicCAS(t *testing.T, h *harness) {
	t.Helper()
	if m, ok := h.store.(*mongo.Store); ok && m.Server().FerretDB {
		why := "FerretDB loses concurrent compare-and-swap updates (no atomic version check)"
		mongotest.NotRun("HTTP "+t.Name(), why)
		t.Skip(why)
	}
}

// hasTransactions reports whether the harness's store runs transactions.
func hasTransactions(t *testing.T, h *harness) bool {
	t.Helper()
	err := h.store.Transact(t.Context(), func(store.Tx) error { return nil })
	if errors.Is(err, store.ErrTransactionsUnsupported) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// harness is a Kiln FHIR API behind the real middleware chain, served over
// TLS on loopback, with an embedded store in a temporary folder.
type harness struct {
	t     testing.TB
	srv   *httptest.Server
	base  string
	store store.Store
	cfg   fhirserver.Config
}

func newHarness(t testing.TB, mutate ...func(*fhirserver.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, testStore(t), mutate...)
}

// newHarnessOn is newHarness on a given store.
func newHarnessOn(t testing.TB, st store.Store, mutate ...func(*fhirserver.Config)) *harness {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := fhirserver.Config{BaseURL: srv.URL + "/fhir", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, m := range mutate {
		m(&cfg)
	}
	fs, err := fhirserver.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter().SkipClean(true)
	r.Use(httpserver.LabelRoute)
	rest.Register(r, "/fhir", fs)
	srv.Config.Handler = httpserver.Chain(r, httpserver.Options{Logger: cfg.Logger, MaxBody: 32 << 20, FHIRBases: []string{"/fhir"}})
	return &harness{t: t, srv: srv, base: srv.URL + "/fhir", store: st, cfg: cfg}
}

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

// do sends a request; path is relative to the FHIR base unless it starts
// with https://. Headers come in pairs.
func (h *harness) do(method, path string, body []byte, headers ...string) response {
	h.t.Helper()
	url := path
	if !strings.HasPrefix(path, "https://") {
		url = h.base + path
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
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

func meta(t *testing.T, m map[string]any) (versionID, lastUpdated string) {
	t.Helper()
	mm, ok := m["meta"].(map[string]any)
	if !ok {
		t.Fatalf("no meta in %v", m)
	}
	return mm["versionId"].(string), mm["lastUpdated"].(string)
}
