package fhirserver_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"runtime"
	"testing"
)

// BenchmarkReadPatient measures a read of a stored Patient through the whole
// stack: TLS 1.3, HTTP/2, the middleware chain, routing and the store.
func BenchmarkReadPatient(b *testing.B) {
	h := newHarness(b)
	body := benchPatient(b)
	if r := h.do("PUT", "/Patient/bench", withID(body, "bench")); r.status != http.StatusCreated {
		b.Fatalf("seed: %d %s", r.status, r.body)
	}
	h.parallel(b, http.StatusOK, func() *http.Request {
		req, _ := http.NewRequest("GET", h.base+"/Patient/bench", nil)
		return req
	})
}

// BenchmarkCreatePatient measures a create through the whole stack,
// structural validation and a durable commit included.
func BenchmarkCreatePatient(b *testing.B) {
	h := newHarness(b)
	body := benchPatient(b)
	h.parallel(b, http.StatusCreated, func() *http.Request {
		req, _ := http.NewRequest("POST", h.base+"/Patient", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/fhir+json")
		req.Header.Set("Prefer", "return=minimal")
		return req
	})
}

func benchPatient(b *testing.B) []byte {
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// parallel sends requests with 16 in flight (like 16 client connections),
// so ns/op is the inverse of throughput (req/s = 1e9 / ns/op). Client and
// server share the machine's cores, so this understates the server alone.
func (h *harness) parallel(b *testing.B, want int, newRequest func() *http.Request) {
	client := h.srv.Client()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Do(newRequest())
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				b.Errorf("status %d, want %d", resp.StatusCode, want)
				return
			}
		}
	})
}
