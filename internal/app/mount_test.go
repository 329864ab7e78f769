package app_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/internal/app"
)

// TestTwoFHIRServices mounts two FHIR services on two partitions' stores
// and proves them apart: a resource written through one is not in the
// other, each CapabilityStatement names its own base, and the bearer
// check, the public paths and the SMART configuration hold on both.
func TestTwoFHIRServices(t *testing.T) {
	other := app.Mount{Partition: "other", Base: "/other-fhir", Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionClinical}}
	h := newAuthHarness(t, nil, app.Clinical(), other)
	if _, err := os.Stat(filepath.Join(h.app.Config().Storage.DataDir, "other.db")); err != nil {
		t.Fatalf("the second partition has no store of its own: %v", err)
	}
	admin := h.admin()
	patient := string(fixture(t, "patient.json"))
	onFHIR := h.create(admin, "Patient", patient)
	r := h.do(http.MethodPost, "/other-fhir/Patient", admin, []byte(patient))
	if r.status != http.StatusCreated {
		t.Fatalf("create on /other-fhir: %d %s", r.status, r.body)
	}
	onOther, _ := r.json(t)["id"].(string)

	for _, c := range []struct {
		name, path string
		status     int
	}{
		{"written to /fhir, read on /fhir", "/fhir/Patient/" + onFHIR, http.StatusOK},
		{"written to /fhir, read on /other-fhir", "/other-fhir/Patient/" + onFHIR, http.StatusNotFound},
		{"written to /other-fhir, read on /other-fhir", "/other-fhir/Patient/" + onOther, http.StatusOK},
		{"written to /other-fhir, read on /fhir", "/fhir/Patient/" + onOther, http.StatusNotFound},
	} {
		if r := h.do(http.MethodGet, c.path, admin, nil); r.status != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
	}
	for _, base := range []string{"/fhir", "/other-fhir"} {
		// Each search sees its own partition's one Patient.
		r := h.do(http.MethodGet, base+"/Patient?_total=accurate", admin, nil)
		if r.status != http.StatusOK || r.json(t)["total"] != 1.0 {
			t.Errorf("search on %s: %d, want 200 and total 1: %s", base, r.status, r.body)
		}
		// The CapabilityStatement, public, names its own base.
		r = h.do(http.MethodGet, base+"/metadata", "", nil)
		impl, _ := r.json(t)["implementation"].(map[string]any)
		if r.status != http.StatusOK || impl["url"] != h.base+base {
			t.Errorf("%s/metadata: %d, implementation %v; want 200 and url %s", base, r.status, impl, h.base+base)
		}
		if r := h.do(http.MethodGet, base+"/.well-known/smart-configuration", "", nil); r.status != http.StatusOK {
			t.Errorf("%s SMART configuration: %d %s", base, r.status, r.body)
		}
		// No token: a 401 OperationOutcome with the bearer challenge.
		r = h.do(http.MethodGet, base+"/Patient", "", nil)
		expectOutcome(t, r, http.StatusUnauthorized, "bearer token")
		expectBearerChallenge(t, r)
		// A token without the scope: 403.
		nurse := h.issue("", "patient/Observation.read")
		if r := h.do(http.MethodGet, base+"/Patient", nurse, nil); r.status != http.StatusForbidden {
			t.Errorf("%s without the Patient scope: %d, want 403: %s", base, r.status, r.body)
		}
	}
}
