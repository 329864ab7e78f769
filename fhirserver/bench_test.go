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
// 16 requests in flight (like 16 client connections), so ns/op is the
// inverse of throughput (req/s = 1e9 / ns/op). Client and server share the
// machine's cores, so this understates what the server alone can do.
func BenchmarkReadPatient(b *testing.B) {
	h := newHarness(b)
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	r := h.do("PUT", "/Patient/bench", withID(body, "bench"))
	if r.status != http.StatusCreated {
		b.Fatalf("seed: %d %s", r.status, r.body)
	}
	client := h.srv.Client()
	url := h.base + "/Patient/bench"
	b.SetParallelism(16 / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkCreatePatient measures a create through the whole stack,
// structural validation and a durable commit included.
func BenchmarkCreatePatient(b *testing.B) {
	h := newHarness(b)
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	client := h.srv.Client()
	url := h.base + "/Patient"
	b.SetParallelism(16 / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/fhir+json")
			req.Header.Set("Prefer", "return=minimal")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
