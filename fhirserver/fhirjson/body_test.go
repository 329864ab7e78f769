package fhirjson

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		limit    int64
		declared int64 // the Content-Length, -1 for none
		status   int   // 0 = success
		msg      string
	}{
		{"under", "abc", 10, -1, 0, ""},
		{"exactly at", "0123456789", 10, -1, 0, ""},
		{"over", "0123456789x", 10, -1, 413, "10 bytes"},
		{"MiB wording", strings.Repeat("x", 1<<20+1), 1 << 20, -1, 413, "1 MiB"},
		{"KiB wording", strings.Repeat("x", 3<<10+1), 3 << 10, -1, 413, "3 KiB"},
		{"empty", "", 10, -1, 0, ""},
		{"declared", "abc", 10, 3, 0, ""},
		{"declared short of the body", "0123456789", 10, 3, 0, ""},
		{"declared over the limit", "0123456789x", 10, 1 << 40, 413, "10 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadBody(strings.NewReader(tc.body), tc.limit, tc.declared)
			if tc.status == 0 {
				if err != nil || string(got) != tc.body {
					t.Fatalf("ReadBody = %q, %v", got, err)
				}
				return
			}
			oe, ok := outcome.As(err)
			if !ok || oe.Status != tc.status || oe.Issues[0].Code != "too-costly" || !strings.Contains(oe.Issues[0].Diagnostics, tc.msg) {
				t.Fatalf("ReadBody error = %v, want %d mentioning %q", err, tc.status, tc.msg)
			}
		})
	}
}

func TestReadBodyMaxBytesError(t *testing.T) {
	rec := httptest.NewRecorder()
	r := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), 50)
	_, err := ReadBody(r, 1000, -1)
	oe, ok := outcome.As(err)
	if !ok || oe.Status != http.StatusRequestEntityTooLarge || !strings.Contains(oe.Issues[0].Diagnostics, "50 bytes") {
		t.Fatalf("ReadBody = %v, want 413 naming the 50-byte limit", err)
	}
}

func TestReadBodyReadError(t *testing.T) {
	_, err := ReadBody(iotest.ErrReader(errors.New("connection reset")), 10, -1)
	oe, ok := outcome.As(err)
	if !ok || oe.Status != http.StatusBadRequest || !strings.Contains(oe.Issues[0].Diagnostics, "connection reset") {
		t.Fatalf("ReadBody = %v", err)
	}
}

func TestReadBodyDefaultLimit(t *testing.T) {
	_, err := ReadBody(strings.NewReader(strings.Repeat("x", 5<<20+1)), 0, -1)
	if oe, ok := outcome.As(err); !ok || oe.Status != 413 {
		t.Fatalf("limit 0 must mean the default 5 MiB, got %v", err)
	}
}
