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

	"github.com/gorilla/mux"
)

func TestPanicsBecome500(t *testing.T) {
	var logs bytes.Buffer
	h := Chain(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), MaxBody: 1 << 20})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/patients/PT-1", nil))
	if rec.Code != 500 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") ||
		!strings.Contains(rec.Body.String(), `"error":{"code":"internal"`) {
		t.Errorf("%d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if !strings.Contains(logs.String(), "panic serving request") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("panic and stack not logged: %s", logs.String())
	}
}

// Recover lets a sub-API answer panics in its own error shape, and writes
// nothing once the response has started.
func TestRecoverUsesTheGivenWriter(t *testing.T) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	custom := func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "custom")
	}
	h := Recover(log, custom)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fhir/Patient/1", nil))
	if rec.Code != 500 || rec.Body.String() != "custom" {
		t.Errorf("%d %q", rec.Code, rec.Body)
	}
	h = Recover(log, custom)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
		panic("late")
	}))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/fhir/Patient/1", nil))
	if rec.Code != 200 || rec.Body.String() != "partial" {
		t.Errorf("a started response was rewritten: %d %q", rec.Code, rec.Body)
	}
}

func TestAbortHandlerPanicPassesThrough(t *testing.T) {
	h := Chain(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }), Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 1 << 20})
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler re-panicked", p)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/fhir/metadata", nil))
}

// The access log has one line per request with the route template, status
// and request id, and never the path's ids, the query string or headers.
func TestAccessLogShowsRoutesNotPaths(t *testing.T) {
	var logs bytes.Buffer
	r := mux.NewRouter()
	r.Use(LabelRoute)
	r.HandleFunc("/fhir/{type:[A-Z][A-Za-z]*}/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := Chain(r, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), MaxBody: 1 << 20})
	req := httptest.NewRequest("GET", "/fhir/Patient/MRN-4471?name=Okafor&birthdate=1987-04-12", nil)
	req.Header.Set("Authorization", "Bearer secret-token")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log is not one JSON line: %v: %s", err, logs.String())
	}
	if line["status"] != float64(http.StatusTeapot) || line["route"] != "/fhir/{type}/{id}" || line["request_id"] != rec.Header().Get("X-Request-Id") {
		t.Errorf("unexpected access log line: %v", line)
	}
	for _, secret := range []string{"MRN-4471", "Okafor", "1987", "secret-token"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("log contains %q: %s", secret, logs.String())
		}
	}
}

func TestPlainTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"/fhir/{type:[A-Z][A-Za-z]*}/{id}": "/fhir/{type}/{id}",
		"/livez":                           "/livez",
		"/x/{n:[0-9]{2}}/y":                "/x/{n}/y",
	} {
		if got := plainTemplate(in); got != want {
			t.Errorf("plainTemplate(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequestsHaveADeadline(t *testing.T) {
	var has bool
	h := Chain(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, has = r.Context().Deadline()
	}), Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 1 << 20})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/livez", nil))
	if !has {
		t.Error("the request context has no deadline")
	}
}

func TestBodyLimitIsABackstopForEveryRoute(t *testing.T) {
	var readErr error
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
	}), Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 10})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/anything", strings.NewReader("more than ten bytes")))
	var mbe *http.MaxBytesError
	if !errors.As(readErr, &mbe) {
		t.Errorf("reading past the cap: %v, want *http.MaxBytesError", readErr)
	}
}

func TestRequestIDs(t *testing.T) {
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, RequestID(r.Context()))
	}), Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 1 << 20})
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
		if rec.Header().Get("Strict-Transport-Security") == "" || rec.Header().Get("Cache-Control") != "no-store" {
			t.Error("security headers missing")
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
