package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The server loads the national pack under the configured profile URL,
// serves it through the FHIR API, refuses writes that break the national
// profile of their type, and answers $validate.
func TestServeValidatesAgainstTheNationalPack(t *testing.T) {
	const profileURL = "https://profiles.test/StructureDefinition"
	addr, client, out, _ := startServe(t, "--profile-url", profileURL)
	base := "https://" + addr
	m := regexp.MustCompile(`email:\s+(\S+)\s+password:\s+(\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no admin credentials printed:\n%s", out.String())
	}
	tok := login(t, client, base, m[1], m[2])

	status, bundle, _ := send(t, client, "GET", base+"/fhir/StructureDefinition?url="+profileURL+"/Patient", tok, "", nil)
	entries, _ := bundle["entry"].([]any)
	if status != http.StatusOK || len(entries) != 1 {
		t.Fatalf("the national Patient profile is not served: %d %v", status, bundle)
	}
	sd := entries[0].(map[string]any)["resource"].(map[string]any)
	if sd["url"] != profileURL+"/Patient" || sd["type"] != "Patient" {
		t.Errorf("served profile: url %v type %v", sd["url"], sd["type"])
	}

	fhirJSON := "application/fhir+json"
	bare := []byte(`{"resourceType":"Patient","name":[{"family":"Okafor"}]}`)
	status, oo, _ := send(t, client, "POST", base+"/fhir/Patient", tok, fhirJSON, bare)
	if status != http.StatusUnprocessableEntity || !strings.Contains(toJSON(oo), profileURL+"/Patient") || !strings.Contains(toJSON(oo), "Patient.birthDate") {
		t.Errorf("a Patient without the national profile's required elements: %d %s", status, toJSON(oo))
	}

	status, oo, _ = send(t, client, "POST", base+"/fhir/Patient/$validate", tok, fhirJSON, bare)
	if status != http.StatusOK || !strings.Contains(toJSON(oo), `"severity":"error"`) {
		t.Errorf("$validate of the same Patient: %d %s", status, toJSON(oo))
	}
	good := []byte(`{"resourceType":"Patient","identifier":[{"system":"https://profiles.test/sid/national-id","value":"NID-1"}],` +
		`"name":[{"family":"Okafor","given":["Chidi"]}],"birthDate":"1990-01-01","telecom":[{"system":"phone","value":"0803 555 0101"}]}`)
	status, oo, _ = send(t, client, "POST", base+"/fhir/Patient/$validate", tok, fhirJSON, good)
	if status != http.StatusOK || strings.Contains(toJSON(oo), `"severity":"error"`) {
		t.Errorf("$validate of a conformant Patient: %d %s", status, toJSON(oo))
	}
	if status, _, _ := send(t, client, "POST", base+"/fhir/Patient", tok, fhirJSON, good); status != http.StatusCreated {
		t.Errorf("a conformant Patient is refused: %d", status)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
