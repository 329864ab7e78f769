package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPanicsBecome500InTheRightShape(t *testing.T) {
	tests := []struct {
		path     string
		wantType string
		wantKey  string
	}{
		{"/fhir/Patient/1", "application/fhir+json", `"resourceType":"OperationOutcome"`},
		{"/patients/PT-1", "application/json", `"error":{"code":"internal"`},
	}
	for _, tc := range tests {
		var logs bytes.Buffer
		h := Chain(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }),
			slog.New(slog.NewJSONHandler(&logs, nil)), 1<<20)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != 500 || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.wantType) ||
			!strings.Contains(rec.Body.String(), tc.wantKey) {
			t.Errorf("%s: %d %q %s", tc.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		if !strings.Contains(logs.String(), "panic serving request") || !strings.Contains(logs.String(), "goroutine") {
			t.Errorf("%s: panic and stack not logged: %s", tc.path, logs.String())
		}
	}
}

func TestAbortHandlerPanicPassesThrough(t *testing.T) {
	h := Chain(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }),
		slog.New(slog.NewJSONHandler(io.Discard, nil)), 1<<20)
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler re-panicked", p)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fhir/metadata", nil))
}

// The access log has one line per request with its status and request id,
// and never the query string (search parameters can carry names).
func TestAccessLogOmitsQueryStrings(t *testing.T) {
	var logs bytes.Buffer
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }),
		slog.New(slog.NewJSONHandler(&logs, nil)), 1<<20)
	req := httptest.NewRequest("GET", "/fhir/Patient?name=Okafor&birthdate=1987-04-12", nil)
	req.Header.Set("Authorization", "Bearer secret-token")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log is not one JSON line: %v: %s", err, logs.String())
	}
	if line["status"] != float64(http.StatusTeapot) || line["path"] != "/fhir/Patient" || line["request_id"] != rec.Header().Get("X-Request-Id") {
		t.Errorf("unexpected access log line: %v", line)
	}
	for _, secret := range []string{"Okafor", "1987", "secret-token"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("log contains %q: %s", secret, logs.String())
		}
	}
}

func TestBodyLimitIsABackstopForEveryRoute(t *testing.T) {
	var readErr error
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
	}), slog.New(slog.NewJSONHandler(io.Discard, nil)), 10)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/anything", strings.NewReader("more than ten bytes")))
	var mbe *http.MaxBytesError
	if !errors.As(readErr, &mbe) {
		t.Errorf("reading past the cap: %v, want *http.MaxBytesError", readErr)
	}
}

func TestRequestIDs(t *testing.T) {
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, RequestID(r.Context()))
	}), slog.New(slog.NewJSONHandler(io.Discard, nil)), 1<<20)
	tests := []struct {
		in   string
		keep bool
	}{
		{"", false},
		{"abc-123_X.y", true},
		{"has space", false},
		{"<script>", false},
		{strings.Repeat("a", 129), false},
	}
	for _, tc := range tests {
		req := httptest.NewRequest("GET", "/livez", nil)
		if tc.in != "" {
			req.Header.Set("X-Request-Id", tc.in)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get("X-Request-Id")
		if got != rec.Body.String() || got == "" {
			t.Errorf("%q: header %q, context %q", tc.in, got, rec.Body.String())
		}
		if (got == tc.in) != tc.keep {
			t.Errorf("%q: kept=%v, want %v", tc.in, got == tc.in, tc.keep)
		}
		if rec.Header().Get("Strict-Transport-Security") == "" {
			t.Error("no HSTS header")
		}
	}
}

func FuzzValidRequestID(f *testing.F) {
	f.Add("abc-123")
	f.Fuzz(func(t *testing.T, s string) {
		if validRequestID(s) && strings.ContainsAny(s, " \r\n\"<>") {
			t.Fatalf("accepted unsafe id %q", s)
		}
	})
}
