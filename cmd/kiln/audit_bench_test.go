package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRead measures reads of one stored Patient through the whole
// server (TLS 1.3, HTTP/2, bearer token, routing), with the audit trail
// on (every read queued for the group-committing recorder) and off, at
// GOMAXPROCS parallel clients.
func BenchmarkRead(b *testing.B) {
	for _, mode := range []string{"audit-on", "audit-off"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			a, _ := openTestApp(b, "--data", b.TempDir())
			if mode == "audit-off" {
				rec := a.Recorder
				a.Recorder = nil // neither the FHIR service nor the router records
				a.Handler = a.Routes()
				b.Cleanup(func() { a.Recorder = rec }) // still closed by Close, which runs after
			}
			tok, err := a.AdminToken(ctx)
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(a.Handler)
			srv.EnableHTTP2 = true
			srv.StartTLS()
			defer srv.Close()
			client := srv.Client()
			put, _ := http.NewRequest("PUT", srv.URL+"/fhir/Patient/p1", strings.NewReader(`{"resourceType":"Patient","id":"p1","identifier":[{"system":"https://fhir.health.example/sid/national-id","value":"NID-1"}],"name":[{"family":"Okafor","given":["Ada"]}],"birthDate":"1975-04-12"}`))
			put.Header.Set("Authorization", "Bearer "+tok)
			put.Header.Set("Content-Type", "application/fhir+json")
			if resp, err := client.Do(put); err != nil || resp.StatusCode != http.StatusCreated {
				b.Fatalf("seed: %v %v", err, resp)
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("GET", srv.URL+"/fhir/Patient/p1", nil)
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := client.Do(req)
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
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
	}
}
