package fhirserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
)

// denyType refuses every interaction on one resource type.
type denyType string

func (d denyType) Authorize(_ context.Context, a fhirserver.Access) error {
	if a.Type == string(d) {
		return outcome.New(http.StatusForbidden, "forbidden", "no access to "+a.Type)
	}
	return nil
}

// Search passes every type it touches through the Authorizer: a chain into
// a forbidden type is refused, and includes of a forbidden type are left
// out of the page; a transaction touching it is refused as a whole.
func TestSearchAuthorization(t *testing.T) {
	h := newHarness(t, func(c *fhirserver.Config) { c.Authorizer = denyType("Organization") })
	tx := `{"resourceType":"Bundle","type":"transaction","entry":[
		{"fullUrl":"urn:uuid:00000000-0000-4000-8000-000000000001","resource":{"resourceType":"Organization","name":"Acme"},"request":{"method":"POST","url":"Organization"}},
		{"resource":{"resourceType":"Patient","managingOrganization":{"reference":"urn:uuid:00000000-0000-4000-8000-000000000001"}},"request":{"method":"POST","url":"Patient"}}]}`
	if hasTransactions(t, h) {
		expectOutcome(t, h.do("POST", "", []byte(tx)), http.StatusForbidden, "Organization")
	} else {
		mongotest.NotRun("HTTP "+t.Name()+" (the transaction part)", "the store has no multi-document transactions (FerretDB)")
	}

	// The Organization exists, written behind the API's back.
	if err := h.store.Put(t.Context(), store.Write{Type: "Organization", ID: "o1", Version: 1, LastUpdated: time.Now().UTC(),
		Method: store.MethodCreate, Body: []byte(`{"resourceType":"Organization","id":"o1","name":"Acme"}`)}); err != nil {
		t.Fatal(err)
	}
	if r := h.do("PUT", "/Patient/p1", []byte(`{"resourceType":"Patient","id":"p1","managingOrganization":{"reference":"Organization/o1"}}`)); r.status != http.StatusCreated {
		t.Fatalf("seed: %d %s", r.status, r.body)
	}
	expectOutcome(t, h.do("GET", "/Patient?organization.name=acme", nil), http.StatusForbidden, "Organization")
	expectOutcome(t, h.do("GET", "/Patient?_include=Patient:organization:Organization", nil), http.StatusForbidden, "Organization")
	// Includes that only may reach the type are served without it.
	for _, q := range []string{"/Patient?_include=*", "/Patient?_include=Patient:organization"} {
		r := h.do("GET", q, nil)
		if r.status != http.StatusOK || strings.Contains(string(r.body), `"mode":"include"`) {
			t.Errorf("%s with a forbidden target: %d %s", q, r.status, r.body)
		}
	}
}
