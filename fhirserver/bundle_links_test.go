package fhirserver_test

import (
	"fmt"
	"strings"
	"testing"
)

// A transaction replaces the links to its entries wherever they are
// (https://hl7.org/fhir/R4/http.html#trules): references, uri and url
// elements, and href/src in the narrative; and a relative reference
// resolves against the base of the fullUrl of the entry that holds it, so
// "Patient/p" names the entry whose fullUrl is [base]/Patient/p.
func TestTransactionReplacesLinksToEntries(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	binary := `{"resourceType":"Binary","contentType":"text/plain","data":"aGVsbG8="}`
	doc := fmt.Sprintf(`{"resourceType":"DocumentReference","status":"current",`+
		`"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">For <a href=\"%s\">the patient</a></div>"},`+
		`"subject":{"reference":%q},"content":[{"attachment":{"contentType":"text/plain","url":%q}}]}`, urnOf(2), urnOf(2), urnOf(1))
	relObs := fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"text":"Patient/rel-1"},"subject":{"reference":"Patient/rel-1"},`+
		`"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><a href=\"%s/Patient/rel-1\">p</a></div>"},`+
		`"extension":[{"url":"http://example.org/seen","valueUri":"Patient/rel-1"}],"focus":[{"reference":"Patient/rel-1/_history/1"}]}`, h.base)
	b := bundleOf("transaction",
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"Binary"}}`, urnOf(1), binary),
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"Patient"}}`, urnOf(2), patientWith("links", "Linked")),
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"DocumentReference"}}`, urnOf(3), doc),
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"Patient"}}`, h.base+"/Patient/rel-1", patientWith("rel", "Relative")),
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"Observation"}}`, h.base+"/Observation/rel-2", relObs),
	)
	res := responseEntries(t, h.do("POST", "", b), "transaction-response")
	expectStatuses(t, res, ints(201), ints(201), ints(201), ints(201), ints(201))
	ids := make([]string, len(res))
	for i := range res {
		_, ids[i], _ = located(t, res[i].location)
	}
	dm, raw := h.readJSON(t, "DocumentReference", ids[2])
	if got := dig(dm, "content", 0, "attachment", "url"); got != "Binary/"+ids[0] {
		t.Errorf("attachment.url = %v, want Binary/%s", got, ids[0])
	}
	if got, _ := dig(dm, "text", "div").(string); !strings.Contains(got, `href="Patient/`+ids[1]+`"`) {
		t.Errorf("narrative %q does not link to Patient/%s", got, ids[1])
	}
	if strings.Contains(string(raw), "urn:uuid:") {
		t.Errorf("a urn link was stored: %s", raw)
	}
	if ids[3] == "rel-1" {
		t.Fatalf("the POST kept the id of its fullUrl; the test needs a new one")
	}
	om, _ := h.readJSON(t, "Observation", ids[4])
	for _, c := range []struct {
		what string
		got  any
	}{
		{"Observation.subject", dig(om, "subject", "reference")},
		{"extension valueUri", dig(om, "extension", 0, "valueUri")},
		{"focus (version-specific)", strings.TrimSuffix(fmt.Sprint(dig(om, "focus", 0, "reference")), "/_history/1")},
	} {
		if c.got != "Patient/"+ids[3] {
			t.Errorf("%s = %v, want Patient/%s (the entry whose fullUrl is [base]/Patient/rel-1)", c.what, c.got, ids[3])
		}
	}
	if got, _ := dig(om, "text", "div").(string); !strings.Contains(got, `href="Patient/`+ids[3]+`"`) {
		t.Errorf("narrative %q does not link to Patient/%s", got, ids[3])
	}
	if got := dig(om, "code", "text"); got != "Patient/rel-1" {
		t.Errorf("code.text (free text) = %v, want it kept", got)
	}
}

// A batch's entries are independent: one that refers to another entry by
// its urn fails (400), instead of storing a reference nothing resolves;
// the other entries are processed.
func TestBatchEntryReferringToAnotherFails(t *testing.T) {
	h := newHarness(t)
	doc := fmt.Sprintf(`{"resourceType":"DocumentReference","status":"current","content":[{"attachment":{"contentType":"text/plain","url":%q}}]}`, urnOf(1))
	b := bundleOf("batch",
		postEntry(1, "Patient", patientWith("batch-dep", "Dep")),
		postEntry(2, "Observation", observationOf(urnOf(1))),
		postEntry(3, "DocumentReference", []byte(doc)),
	)
	res := responseEntries(t, h.do("POST", "", b), "batch-response")
	expectStatuses(t, res, ints(201), ints(400), ints(400))
	if !strings.Contains(fmt.Sprint(res[1].outcome), urnOf(1)) {
		t.Errorf("the outcome does not name the reference: %v", res[1].outcome)
	}
	if got := h.matchIDs(t, "Observation", "subject="+urnOf(1)); len(got) != 0 {
		t.Errorf("an Observation with the unresolved reference was stored: %v", got)
	}
}
