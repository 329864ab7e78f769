package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
)

// A PATCH answers with the resource, and a JSON Patch test operation is a
// yes/no oracle on its values: PATCH needs read as well as update. A patch
// that changes nothing makes no version.
func TestScopePatchNeedsRead(t *testing.T) {
	h := newAuthHarness(t, nil)
	admin := h.admin()
	pid := h.create(admin, "Patient", string(fixture(t, "patient.json")))
	patches := map[string]string{
		"empty":     `[]`,
		"test only": `[{"op":"test","path":"/id","value":"` + pid + `"}]`,
	}
	for _, tc := range []struct {
		role, scope string
		allowed     bool
	}{
		{auth.RoleProvider, "system/Patient.u", false},
		{auth.RoleProvider, "patients:write", false},
		{auth.RoleProvider, "user/Patient.r", false},
		{auth.RoleProvider, "system/Patient.ru", true},
		{auth.RoleProvider, "patients:read patients:write", true},
	} {
		tok := h.issue(tc.role, tc.scope)
		for name, body := range patches {
			r := h.do(http.MethodPatch, "/fhir/Patient/"+pid, tok, []byte(body), "Content-Type", "application/json-patch+json")
			switch {
			case !tc.allowed && r.status != http.StatusForbidden:
				t.Errorf("%s patch with %q: %d, want 403; %.200s", name, tc.scope, r.status, r.body)
			case tc.allowed && r.status != http.StatusOK:
				t.Errorf("%s patch with %q: %d, want 200; %.200s", name, tc.scope, r.status, r.body)
			}
		}
	}
	// None of the patches above changed anything: still version 1.
	r := h.do(http.MethodGet, "/fhir/Patient/"+pid, admin, nil)
	if r.header.Get("ETag") != `W/"1"` {
		t.Errorf("no-op patches made versions: ETag %s", r.header.Get("ETag"))
	}
	r = h.do(http.MethodPatch, "/fhir/Patient/"+pid, admin, []byte(`[{"op":"test","path":"/id","value":"`+pid+`"}]`), "Content-Type", "application/json-patch+json")
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"1"` || !strings.Contains(string(r.body), `"versionId":"1"`) {
		t.Errorf("a no-op patch answers the current version: %d %s %.200s", r.status, r.header.Get("ETag"), r.body)
	}
	// A patch that changes something still makes one.
	r = h.do(http.MethodPatch, "/fhir/Patient/"+pid, admin, []byte(`[{"op":"replace","path":"/gender","value":"other"}]`), "Content-Type", "application/json-patch+json")
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"2"` {
		t.Errorf("a real patch: %d %s %.200s", r.status, r.header.Get("ETag"), r.body)
	}
}

// A compartment search reads the compartment's Patient as well as
// searching the type: a grant without read on Patient is refused.
func TestScopeCompartmentSearchNeedsPatientRead(t *testing.T) {
	h := newAuthHarness(t, nil)
	admin := h.admin()
	pid := h.create(admin, "Patient", string(fixture(t, "patient.json")))
	for _, tc := range []struct {
		scope, path string
		allowed     bool
	}{
		{"consultations:read", "/Encounter", false},
		{"user/Observation.rs", "/Observation", false},
		{"user/Patient.r user/Observation.rs", "/Observation", true},
		{"patients:read", "/Encounter", true},
	} {
		r := h.do(http.MethodGet, "/fhir/Patient/"+pid+tc.path, h.issue(auth.RoleProvider, tc.scope), nil)
		if (r.status == http.StatusOK) != tc.allowed || !tc.allowed && r.status != http.StatusForbidden {
			t.Errorf("%s with %q: %d; %.200s", tc.path, tc.scope, r.status, r.body)
		}
	}
}
