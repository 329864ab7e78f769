package reference

import "testing"

// TestRESTBase checks which fullUrls give a base that relative references
// resolve against: only a RESTful URL of a known type and a valid id.
func TestRESTBase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://x/fhir/Patient/1", "https://x/fhir"},
		{"http://x/Patient/1", "http://x"},
		{"https://x/fhir/Patient/1/_history/2", "https://x/fhir"},
		{"https://x/fhir/Nonsense/1", ""},
		{"https://x/fhir/Patient/bad$id", ""},
		{"urn:uuid:9e1c7d20-1111-4a6b-8c3d-4d5e6f7a8b01", ""},
		{"Patient/1", ""},
		{"", ""},
	} {
		if got := RESTBase(c.in); got != c.want {
			t.Errorf("RESTBase(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestFullURLsLink checks how a link resolves to an entry: by its full
// fullUrl, relative to the base, with a version kept; else it is left.
func TestFullURLsLink(t *testing.T) {
	m := FullURLs{
		"urn:uuid:p":                   "Patient/p1",
		"https://x/fhir/Patient/old":   "Patient/new",
		"https://x/fhir/Observation/o": "Observation/o2",
	}
	for _, c := range []struct{ in, base, want string }{
		{"urn:uuid:p", "", "Patient/p1"},
		{"https://x/fhir/Patient/old", "https://y", "Patient/new"},
		{"Patient/old", "https://x/fhir", "Patient/new"},
		{"Patient/old", "https://y/fhir", ""},
		{"Patient/old/_history/3", "https://x/fhir", "Patient/new/_history/3"},
		{"https://x/fhir/Observation/o/_history/1", "", "Observation/o2/_history/1"},
		{"Patient/missing/_history/1", "https://x/fhir", ""},
		{"Nonsense/old", "https://x/fhir", ""},
		{"urn:uuid:unknown", "", ""},
	} {
		if got := m.Link(c.in, c.base); got != c.want {
			t.Errorf("Link(%q, %q) = %q, want %q", c.in, c.base, got, c.want)
		}
	}
}
