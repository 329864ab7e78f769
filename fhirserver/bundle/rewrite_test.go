package bundle

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// TestRewriterRewrite checks the rewriter's use of the scanner: fullUrls
// are replaced and an unknown urn:uuid fails with an outcome.
func TestRewriterRewrite(t *testing.T) {
	rw := &rewriter{e: &Engine{}, fullURLs: map[string]string{"urn:uuid:p": "Patient/p1"}}
	in := []byte(`{"resourceType":"Observation","status":"final","subject":{"reference":"urn:uuid:p"},"code":{}}`)
	out, err := rw.rewrite(context.Background(), in, "")
	if err != nil || string(out) != `{"resourceType":"Observation","status":"final","subject":{"reference":"Patient/p1"},"code":{}}` {
		t.Fatalf("rewrite: %s %v", out, err)
	}
	_, err = rw.rewrite(context.Background(), []byte(`{"subject":{"reference":"urn:uuid:missing"}}`), "")
	var oe *outcome.Error
	if !errors.As(err, &oe) {
		t.Fatalf("unknown urn:uuid: error %v (%T), want an outcome", err, err)
	}
}
