package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/internal/securitytest"
)

// postOutcome posts body and decodes the OperationOutcome answered.
func (s *largeWriteServer) postOutcome(t *testing.T, body []byte) (status int, raw []byte, issues []outcome.Issue) {
	t.Helper()
	req, err := http.NewRequest("POST", s.srv.URL+"/fhir/Patient", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/fhir+json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var oo struct{ Issue []outcome.Issue }
	if err := json.Unmarshal(raw, &oo); err != nil {
		t.Fatalf("%d: not an OperationOutcome: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, raw, oo.Issue
}

// checkCappedRefusal checks that a write with one fault per identifier is
// refused with a capped OperationOutcome, smaller than the request, whose
// last issue counts what it does not list.
func checkCappedRefusal(t *testing.T, s *largeWriteServer, identifiers int) {
	t.Helper()
	body := identifiedPatient(identifiers)
	status, raw, issues := s.postOutcome(t, body)
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("%d identifiers without a system: status %d, want 422", identifiers, status)
	}
	if len(raw) >= len(body) {
		t.Errorf("the OperationOutcome (%s) is not smaller than the request (%s)", sizeLabel(len(raw)), sizeLabel(len(body)))
	}
	if len(issues) > outcome.MaxIssues+1 {
		t.Errorf("%d issues listed, want at most %d and a summary", len(issues), outcome.MaxIssues)
	}
	last := issues[len(issues)-1]
	if last.Code != "too-costly" || last.Severity != "error" {
		t.Errorf("the last issue does not count the rest: %+v", last)
	}
}

// A write with thousands of faults is refused with a capped answer (issue
// 22: 200,000 identifiers drew a 48.7 MB OperationOutcome).
func TestSecurityWriteOutcomeIsCapped(t *testing.T) {
	checkCappedRefusal(t, startLargeWriteServer(t), 5000)
}

// The write-size series (slow: make test-security). A write's CPU grows in
// proportion to its size: the CPU per name of 10k, 30k and 100k names
// stays within 3× (the target is 1.5×, measured by BenchmarkLargeWrite;
// shared CI machines vary), where 30k names cost 12.9 s and 100k 92 s
// before. And 200,000 bad identifiers get a capped 422 smaller than the
// request.
func TestSecurityWriteSizeSeries(t *testing.T) {
	securitytest.Slow(t)
	s := startLargeWriteServer(t)
	if status, _, err := s.post(namedPatient(1000)); err != nil || status != http.StatusCreated { // warm up
		t.Fatalf("warm-up: %d %v", status, err)
	}
	var perName []float64
	for _, n := range []int{10_000, 30_000, 100_000} {
		body := namedPatient(n)
		cpu0 := cpuTime()
		status, _, err := s.post(body)
		cpu := cpuTime() - cpu0
		if err != nil || status != http.StatusCreated {
			t.Fatalf("%d names: %d %v", n, status, err)
		}
		perName = append(perName, float64(cpu.Nanoseconds())/float64(n))
		t.Logf("%d names (%s): %v CPU, %.0f ns/name", n, sizeLabel(len(body)), cpu, perName[len(perName)-1])
	}
	lo, hi := perName[0], perName[0]
	for _, p := range perName {
		lo, hi = min(lo, p), max(hi, p)
	}
	if hi > 3*lo {
		t.Errorf("CPU per name ranges %.0f..%.0f ns across 10k..100k names: not linear", lo, hi)
	}
	checkCappedRefusal(t, s, 200_000)
}
