package fhirserver_test

import (
	"net/http"
	"testing"
)

// If-Match and If-None-Match follow RFC 9110 §13.1.1-2: "*" and lists of
// entity tags, on updates, deletes and reads.
func TestPreconditionHeaders(t *testing.T) {
	h := newHarness(t)
	body := withID(fixture(t, "patient.json"), "p1")
	steps := []struct {
		name    string
		method  string
		headers []string
		status  int
		etag    string
	}{
		{"If-Match * refuses to create", "PUT", []string{"If-Match", "*"}, 412, ""},
		{"If-None-Match * creates", "PUT", []string{"If-None-Match", "*"}, 201, `W/"1"`},
		{"If-None-Match * refuses to overwrite", "PUT", []string{"If-None-Match", "*"}, 412, ""},
		{"If-Match * updates what exists", "PUT", []string{"If-Match", "*"}, 200, `W/"2"`},
		{"If-Match list containing the current version", "PUT", []string{"If-Match", `W/"1", W/"2"`}, 200, `W/"3"`},
		{"If-Match list without it", "PUT", []string{"If-Match", `W/"1", W/"2"`}, 412, ""},
		{"If-None-Match naming the current version", "PUT", []string{"If-None-Match", `W/"3"`}, 412, ""},
		{"malformed If-None-Match", "PUT", []string{"If-None-Match", "three"}, 400, ""},
		{"If-Match * deletes what exists", "DELETE", []string{"If-Match", "*"}, 204, `W/"4"`},
		{"If-Match * does not match a deleted resource", "DELETE", []string{"If-Match", "*"}, 412, ""},
	}
	for _, st := range steps {
		var b []byte
		if st.method == "PUT" {
			b = body
		}
		r := h.do(st.method, "/Patient/p1", b, st.headers...)
		if r.status != st.status || (st.etag != "" && r.header.Get("ETag") != st.etag) {
			t.Fatalf("%s: %d %s, want %d %s; %s", st.name, r.status, r.header.Get("ETag"), st.status, st.etag, r.body)
		}
		if st.status >= 400 {
			expectOutcome(t, r, st.status, "")
		}
	}
	h.do("PUT", "/Patient/p2", withID(body, "p2"))
	if r := h.do("GET", "/Patient/p2", nil, "If-None-Match", `W/"7", W/"1"`); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match list with the current version: %d", r.status)
	}
	if r := h.do("GET", "/Patient/p2", nil, "If-None-Match", "*"); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match * on an existing resource: %d", r.status)
	}
}

// A '+' sent unescaped in a query string arrives as a space; FHIR clients
// do this with _format and with time-zone offsets.
func TestUnescapedPlusInQueries(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", fixture(t, "patient.json"))
	if r := h.do("GET", "/Patient/"+id+"?_format=application/fhir+json", nil); r.status != http.StatusOK {
		t.Errorf("_format=application/fhir+json: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/Patient/"+id+"/_history?_since=2000-01-01T00:00:00+01:00", nil); r.status != http.StatusOK || len(entryVersions(t, r)) != 1 {
		t.Errorf("_since with +01:00: %d %s", r.status, r.body)
	}
}

// Paths are not cleaned or redirected: a FHIR client gets an answer for the
// URL it sent.
func TestPathsAreNotRedirected(t *testing.T) {
	h := newHarness(t)
	h.do("PUT", "/Patient/abc", withID(fixture(t, "patient.json"), "abc"))
	for _, p := range []string{"/Patient//abc", "/Patient/../Patient/abc", "/./Patient/abc"} {
		r := h.do("GET", p, nil)
		if r.status == http.StatusMovedPermanently || r.status == http.StatusOK {
			t.Errorf("GET %s: %d (Location %q)", p, r.status, r.header.Get("Location"))
		}
	}
}

// Every type-level interaction the CapabilityStatement claims works on
// several resource types, and the statement itself is valid R4.
func TestClaimedInteractionsWork(t *testing.T) {
	h := newHarness(t)
	transaction := http.StatusOK
	if !hasTransactions(t, h) {
		transaction = http.StatusNotImplemented // and not claimed: TestCapabilityStatementClaimsOnlyWhatWorks
	}
	meta := h.do("GET", "/metadata", nil)
	// The statement passes the server's own structural R4 check.
	if r := h.do("PUT", "/CapabilityStatement/self", withID(meta.body, "self")); r.status != http.StatusCreated {
		t.Errorf("the CapabilityStatement is not valid R4: %d %s", r.status, r.body)
	}
	for _, typ := range []string{"Patient", "Organization", "Practitioner", "Location"} {
		body := []byte(`{"resourceType":"` + typ + `","active":true}`)
		if typ == "Location" {
			body = []byte(`{"resourceType":"Location","status":"active"}`)
		}
		id := h.create(t, typ, body) // create
		for _, step := range []struct {
			interaction, method, path string
			body                      []byte
			status                    int
		}{
			{"read", "GET", "/" + typ + "/" + id, nil, 200},
			{"update", "PUT", "/" + typ + "/" + id, withID(body, id), 200},
			{"vread", "GET", "/" + typ + "/" + id + "/_history/2", nil, 200},
			{"history-instance", "GET", "/" + typ + "/" + id + "/_history", nil, 200},
			{"history-type", "GET", "/" + typ + "/_history", nil, 200},
			{"search-type", "GET", "/" + typ + "?_id=" + id, nil, 200},
			{"patch", "PATCH", "/" + typ + "/" + id, []byte(`[{"op":"test","path":"/id","value":"` + id + `"}]`), 200},
			{"delete", "DELETE", "/" + typ + "/" + id, nil, 204},
			{"history-system", "GET", "/_history", nil, 200},
			{"search-system", "GET", "?_type=" + typ, nil, 200},
			{"batch", "POST", "", []byte(`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"` + typ + `/` + id + `"}}]}`), 200},
			{"transaction", "POST", "", []byte(`{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"GET","url":"` + typ + `?_id=` + id + `"}}]}`), transaction},
		} {
			var headers []string
			if step.method == "PATCH" {
				headers = []string{"Content-Type", "application/json-patch+json"}
			}
			if r := h.do(step.method, step.path, step.body, headers...); r.status != step.status {
				t.Errorf("%s %s: %d %s", typ, step.interaction, r.status, r.body)
			}
		}
	}
}
