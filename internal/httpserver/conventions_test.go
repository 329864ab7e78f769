package httpserver

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Origins are serialized origins or *; anything with a path, a query or
// another scheme is a configuration error, not an origin that never
// matches.
func TestParseOrigins(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ok       bool
		allow    string
		allowed  bool
		withCred bool
	}{
		{"", true, "https://a.example", false, false},
		{"https://a.example", true, "https://a.example", true, true},
		{"https://A.example:8443, http://localhost:3000", true, "https://a.example:8443", true, true},
		{"https://a.example:443", true, "https://a.example", true, true},
		{"http://a.example:80", true, "http://a.example", true, true},
		{"https://a.example:80", true, "https://a.example:80", true, true},
		{"https://a.example", true, "https://b.example", false, false},
		{"*", true, "https://b.example", true, false},
		{"*,https://a.example", true, "https://a.example", true, true},
		{"https://a.example/", false, "", false, false},
		{"https://a.example/app", false, "", false, false},
		{"ftp://a.example", false, "", false, false},
		{"a.example", false, "", false, false},
		{"https://user@a.example", false, "", false, false},
		{"https://a.example?x=1", false, "", false, false},
		{"https://bücher.example", false, "", false, false},
		{"https://xn--bcher-kva.example", true, "https://xn--bcher-kva.example", true, true},
	} {
		o, err := ParseOrigins(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseOrigins(%q): err %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if ok, cred := o.allows(tc.allow); ok != tc.allowed || cred != tc.withCred {
			t.Errorf("%q allows %q: %v %v, want %v %v", tc.in, tc.allow, ok, cred, tc.allowed, tc.withCred)
		}
	}
}

// One trailing slash is dropped from the path (raw and decoded); the
// root and a doubled slash keep their meaning.
func TestTrimTrailingSlash(t *testing.T) {
	var got string
	h := trimTrailingSlash(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.URL.EscapedPath() }))
	for in, want := range map[string]string{
		"/":                    "/",
		"/fhir/":               "/fhir",
		"/fhir/Patient/":       "/fhir/Patient",
		"/fhir/Patient//":      "/fhir/Patient/",
		"/fhir/Patient/a%2Fb/": "/fhir/Patient/a%2Fb",
		"/fhir/Patient":        "/fhir/Patient",
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", in, nil))
		if got != want {
			t.Errorf("%s → %s, want %s", in, got, want)
		}
	}
}

// Content codings other than gzip and identity are refused with 415 in
// the error shape of the path's API, naming the accepted coding.
func TestRequestContentCodings(t *testing.T) {
	var body string
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		body = string(b)
	}), Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 1 << 20, FHIRBases: []string{"/fhir"}})
	for _, tc := range []struct {
		path, coding string
		want         int
		shape        string
	}{
		{"/fhir/Patient", "identity", 200, ""},
		{"/fhir/Patient", "IDENTITY", 200, ""},
		{"/fhir/Patient", "br", 415, `"OperationOutcome"`},
		{"/patients", "compress", 415, `"error":{"code":"unsupported_encoding"`},
		{"/fhir/Patient", "gzip, gzip", 415, `"OperationOutcome"`},
		{"/fhir/Patient", "gzip", 400, ""}, // the body is not gzip: the handler's read fails
	} {
		body = ""
		req := httptest.NewRequest("POST", tc.path, strings.NewReader("plain"))
		req.Header.Set("Content-Encoding", tc.coding)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.shape) {
			t.Errorf("%s %q: %d %s", tc.path, tc.coding, rec.Code, rec.Body)
		}
		if tc.want == 200 && body != "plain" {
			t.Errorf("%q: the handler read %q", tc.coding, body)
		}
		if tc.want == 415 && rec.Header().Get("Accept-Encoding") != "gzip" && !strings.Contains(tc.coding, ",") {
			t.Errorf("%q: 415 without Accept-Encoding: gzip", tc.coding)
		}
	}
}

// Any body sent as gzip is either decoded or a read error, and never
// yields more than the body limit.
func FuzzGzipRequestBody(f *testing.F) {
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x01\x00\x00\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00"), "gzip")
	f.Add([]byte("plain"), "identity")
	f.Add([]byte{}, "x-gzip, identity")
	const limit = 4 << 10
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if n > limit {
			panic("read past the limit")
		}
	}), Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: limit})
	f.Fuzz(func(t *testing.T, body []byte, coding string) {
		req := httptest.NewRequest("POST", "/x", strings.NewReader(string(body)))
		req.Header.Set("Content-Encoding", coding)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
}
