package fhirserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// newService is a server for the in-process API, on the test store, with
// scope enforcement and the fake profile validation (profile testPatient
// bound to Patient).
func newService(t *testing.T) *fhirserver.Server {
	t.Helper()
	return newServiceWith(t)
}

// newServiceWith is newService with changes to its configuration.
func newServiceWith(t *testing.T, mutate ...func(*fhirserver.Config)) *fhirserver.Server {
	t.Helper()
	cfg := fhirserver.Config{BaseURL: "https://kiln.test/fhir", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionClinical}}
	withValidation(validation.Profiles, "warn", true)(&cfg)
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := fhirserver.New(cfg, testStore(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// as returns ctx carrying a principal with the scopes.
func as(ctx context.Context, scopes string) context.Context {
	g, _ := auth.ParseScopes(scopes)
	return auth.WithPrincipal(ctx, &auth.Principal{Subject: "user/test", Role: auth.RoleProvider, Grant: g})
}

func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	oe, ok := outcome.As(err)
	if !ok || oe.Status != status {
		t.Fatalf("error %v, want an outcome with status %d", err, status)
	}
}

func TestServiceCreateWithIDReadSearch(t *testing.T) {
	s := newService(t)
	rw := as(t.Context(), "patients:read patients:write")
	v, err := s.CreateWithID(rw, "Patient", "PT-1", []byte(patientValid))
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != "PT-1" || v.Version != 1 || !strings.Contains(string(v.Body), `"id":"PT-1"`) || !strings.Contains(string(v.Body), `"versionId":"1"`) {
		t.Errorf("created %+v %s", v, v.Body)
	}
	// Create-only: the id exists.
	_, err = s.CreateWithID(rw, "Patient", "PT-1", []byte(patientValid))
	wantStatus(t, err, http.StatusConflict)
	// Validated like a REST write: the bound profile needs a birthDate.
	_, err = s.CreateWithID(rw, "Patient", "PT-2", []byte(patientNoBirthDate))
	wantStatus(t, err, http.StatusUnprocessableEntity)
	// Structural R4 first.
	_, err = s.CreateWithID(rw, "Patient", "PT-2", []byte(`{"resourceType":"Patient","bogus":1}`))
	wantStatus(t, err, http.StatusBadRequest)
	_, err = s.CreateWithID(rw, "Patient", "PT-2", []byte(`{"resourceType":"Condition"}`))
	wantStatus(t, err, http.StatusBadRequest)
	_, err = s.CreateWithID(rw, "Patient", "bad id!", []byte(patientValid))
	wantStatus(t, err, http.StatusBadRequest)
	_, err = s.CreateWithID(rw, "NotAType", "x", []byte(patientValid))
	wantStatus(t, err, http.StatusNotFound)

	// Authorized as the REST interactions.
	_, err = s.CreateWithID(as(t.Context(), "patients:read"), "Patient", "PT-3", []byte(patientValid))
	wantStatus(t, err, http.StatusForbidden)
	_, err = s.CreateWithID(t.Context(), "Patient", "PT-3", []byte(patientValid))
	wantStatus(t, err, http.StatusUnauthorized)
	_, err = s.Read(as(t.Context(), "patients:write"), "Patient", "PT-1")
	wantStatus(t, err, http.StatusForbidden)
	_, err = s.SearchAll(as(t.Context(), "patients:write"), "Condition", nil, 10)
	wantStatus(t, err, http.StatusForbidden)

	got, err := s.Read(rw, "Patient", "PT-1")
	if err != nil || string(got.Body) != string(v.Body) {
		t.Fatalf("read: %v %s", err, got.Body)
	}
	_, err = s.Read(rw, "Patient", "PT-404")
	wantStatus(t, err, http.StatusNotFound)

	for i, code := range []string{"a", "b", "a", "a", "c"} {
		body := fmt.Sprintf(`{"resourceType":"Condition","subject":{"reference":"Patient/PT-1"},"code":{"coding":[{"system":"http://snomed.info/sct","code":"%s"}]},"recordedDate":"2024-01-0%d"}`, code, i+1)
		if _, err := s.CreateWithID(rw, "Condition", fmt.Sprintf("c%d", i), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.SearchAll(rw, "Condition", url.Values{"subject": {"Patient/PT-1"}, "_count": {"2"}}, 100)
	if err != nil || len(all) != 5 {
		t.Fatalf("search over pages: %d %v", len(all), err)
	}
	some, err := s.SearchAll(rw, "Condition", url.Values{"patient": {"PT-1"}, "code": {"http://snomed.info/sct|a"}, "_sort": {"-recorded-date"}}, 2)
	if err != nil || len(some) != 2 || some[0].ID != "c3" || some[1].ID != "c2" {
		t.Fatalf("search with a limit: %v %v", some, err)
	}
	_, err = s.SearchAll(rw, "Condition", url.Values{"bogus": {"1"}}, 10)
	wantStatus(t, err, http.StatusBadRequest)
}

// Concurrent creates of one id: exactly one wins, the others get 409.
func TestServiceCreateWithIDRace(t *testing.T) {
	s := newService(t)
	ctx := as(t.Context(), "patients:write")
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.CreateWithID(ctx, "Patient", "PT-7", []byte(patientValid)) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		if oe, ok := outcome.As(err); !ok || oe.Status != http.StatusConflict {
			t.Errorf("loser: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d creates won", won)
	}
}
