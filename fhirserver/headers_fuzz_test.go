package fhirserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// FuzzRequestHeaders feeds arbitrary Accept, _format, _pretty, Prefer,
// If-Match and If-None-Match values to the parsers: they never panic, and
// every rejection is a 4xx OperationOutcome.
func FuzzRequestHeaders(f *testing.F) {
	f.Add("application/fhir+json;q=0.5", "json", "true", "return=minimal", `W/"1", *`, `"2"`)
	f.Add("*/*;q=0", "application/fhir+xml", "x", "return=OperationOutcome, handling=strict", "", "*")
	f.Fuzz(func(t *testing.T, accept, format, pretty, prefer, ifMatch, ifNoneMatch string) {
		r := httptest.NewRequest("GET", "/fhir/Patient/1?"+url.Values{"_format": {format}, "_pretty": {pretty}}.Encode(), nil)
		for k, v := range map[string]string{"Accept": accept, "Prefer": prefer, "If-Match": ifMatch, "If-None-Match": ifNoneMatch} {
			if v != "" {
				r.Header[k] = []string{v}
			}
		}
		if _, err := negotiate.Negotiate(r); err != nil {
			checkRejection(t, err)
		}
		_ = negotiate.PreferReturn(r)
		pre, err := parsePreconditions(r.Header.Values("If-Match"), r.Header.Values("If-None-Match"))
		if err != nil {
			checkRejection(t, err)
			return
		}
		for _, v := range []*store.Version{nil, {Version: 1}, {Version: 2, Deleted: true}} {
			if err := pre.check("Patient", "1", v); err != nil {
				checkRejection(t, err)
			}
		}
	})
}

func checkRejection(t *testing.T, err error) {
	t.Helper()
	oe, ok := outcome.As(err)
	if !ok || oe.Status < 400 || oe.Status >= 500 || oe.Status == http.StatusInternalServerError {
		t.Fatalf("rejection is not a 4xx OperationOutcome: %v", err)
	}
}
