package search

import "testing"

func TestParseReference(t *testing.T) {
	tests := []struct{ ref, typ, id, ver, url string }{
		{"Patient/1", "Patient", "1", "", ""},
		{"Patient/1/_history/2", "Patient", "1", "2", ""},
		{"http://x/fhir/Patient/1", "Patient", "1", "", "http://x/fhir/Patient/1"},
		{"http://x/fhir/Patient/1/_history/2", "Patient", "1", "2", "http://x/fhir/Patient/1"},
		{"urn:uuid:abc", "", "", "", "urn:uuid:abc"},
		{"urn:oid:1.2.3", "", "", "", "urn:oid:1.2.3"},
		{"Foo/1", "", "", "", ""},
		{"Patient/", "", "", "", ""},
		{"Patient/a b", "", "", "", ""},
		{"1", "", "", "", ""},
		{"", "", "", "", ""},
	}
	for _, tt := range tests {
		typ, id, ver, url := parseReference(tt.ref)
		if typ != tt.typ || id != tt.id || ver != tt.ver || url != tt.url {
			t.Errorf("parseReference(%q) = %q %q %q %q", tt.ref, typ, id, ver, url)
		}
	}
}
