package fhirserver_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
)

// Batch and transaction Bundles (https://hl7.org/fhir/R4/http.html#transaction):
// a batch-response or transaction-response has one entry per request
// entry, in the same order, each with response.status (starting with the
// 3-digit HTTP code), and response.location / response.etag for writes.
// A transaction is all or nothing and processes DELETE, then POST, then
// PUT and PATCH, then GET, whatever the order of the entries; references
// to the fullUrl of an entry, and conditional references, are resolved to
// the Type/id the server assigned or found.

// entryResponse is one entry of a batch-response or transaction-response.
type entryResponse struct {
	status   int
	location string
	etag     string
	resource map[string]any
	outcome  map[string]any
}

// responseEntries checks that r is a Bundle of bundleType and returns its
// entries' responses.
func responseEntries(t *testing.T, r response, bundleType string) []entryResponse {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("bundle: status %d, want 200; %s", r.status, r.body)
	}
	m := r.json(t)
	if m["resourceType"] != "Bundle" || m["type"] != bundleType {
		t.Fatalf("response is not a %s Bundle: %.500s", bundleType, r.body)
	}
	var out []entryResponse
	for i, e := range bundleEntries(t, r) {
		resp, ok := e["response"].(map[string]any)
		if !ok {
			t.Fatalf("entry %d has no response: %v", i, e)
		}
		st, _ := resp["status"].(string)
		if len(st) < 3 {
			t.Fatalf("entry %d: response.status %q does not start with a 3-digit code", i, st)
		}
		code, err := strconv.Atoi(st[:3])
		if err != nil {
			t.Fatalf("entry %d: response.status %q does not start with a 3-digit code", i, st)
		}
		er := entryResponse{status: code}
		er.location, _ = resp["location"].(string)
		er.etag, _ = resp["etag"].(string)
		er.resource, _ = e["resource"].(map[string]any)
		er.outcome, _ = resp["outcome"].(map[string]any)
		out = append(out, er)
	}
	return out
}

var locationRE = regexp.MustCompile(`(?:^|/)([A-Z][A-Za-z]+)/([A-Za-z0-9.\-]{1,64})/_history/([0-9]+)$`)

// located parses a response.location (absolute, or relative to the base)
// into type, id and version.
func located(t *testing.T, loc string) (typ, id, version string) {
	t.Helper()
	m := locationRE.FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("response.location %q is not [base/]Type/id/_history/version", loc)
	}
	return m[1], m[2], m[3]
}

// expectStatuses compares the entries' statuses with want; each want is a
// list of acceptable codes.
func expectStatuses(t *testing.T, got []entryResponse, want ...[]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d response entries, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Contains(want[i], got[i].status) {
			t.Errorf("entry %d: status %d, want %v (outcome %v)", i, got[i].status, want[i], got[i].outcome)
		}
	}
}

// historyCount is the number of versions the server holds, of every type:
// equal before and after means nothing was written.
func (h *harness) historyCount(t *testing.T) int {
	t.Helper()
	r := h.do("GET", "/_history?_count=1000", nil)
	if r.status != http.StatusOK {
		t.Fatalf("system history: %d %s", r.status, r.body)
	}
	return len(bundleEntries(t, r))
}

// dig walks decoded JSON by object keys and array indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// readJSON reads Type/id and decodes it.
func (h *harness) readJSON(t *testing.T, typ, id string) (map[string]any, []byte) {
	t.Helper()
	r := h.do("GET", "/"+typ+"/"+id, nil)
	if r.status != http.StatusOK {
		t.Fatalf("read %s/%s: %d %s", typ, id, r.status, r.body)
	}
	return r.json(t), r.body
}

func ints(codes ...int) []int { return codes }

func TestBatchEntriesAreIndependent(t *testing.T) {
	h := newHarness(t)
	res := responseEntries(t, h.do("POST", "", fixture(t, "bundles/batch-mixed.json")), "batch-response")
	expectStatuses(t, res,
		ints(201),      // POST Patient
		ints(404),      // GET of an unknown Patient
		ints(400),      // PUT whose body id differs from the URL's
		ints(400),      // POST of an Observation to /Patient
		ints(201),      // PUT creating Patient/batch-put2
		ints(200),      // search
		ints(200, 204), // DELETE of nothing
	)
	for _, i := range []int{1, 2, 3} {
		if res[i].outcome["resourceType"] != "OperationOutcome" {
			t.Errorf("failed entry %d carries no OperationOutcome in response.outcome", i)
		}
	}
	typ, id, v := located(t, res[0].location)
	if typ != "Patient" || v != "1" || res[0].etag != `W/"1"` {
		t.Errorf("entry 0: location %q etag %q", res[0].location, res[0].etag)
	}
	if m, _ := h.readJSON(t, "Patient", id); dig(m, "identifier", 0, "value") != "batch-1" {
		t.Errorf("the created Patient/%s is not the posted one: %v", id, m)
	}
	if _, id, _ := located(t, res[4].location); id != "batch-put2" {
		t.Errorf("entry 4 location %q", res[4].location)
	}
	h.readJSON(t, "Patient", "batch-put2")
	for _, id := range []string{"batch-put", "batch-other"} {
		if r := h.do("GET", "/Patient/"+id, nil); r.status != http.StatusNotFound {
			t.Errorf("the failed entry wrote Patient/%s: %d", id, r.status)
		}
	}
	if res[5].resource["type"] != "searchset" {
		t.Errorf("entry 5 resource is not a searchset: %v", res[5].resource)
	}
}

func TestTransactionIsAllOrNothing(t *testing.T) {
	seed := func(t *testing.T, h *harness) {
		needsTransactions(t, h)
		for _, id := range []string{"tx-seed-1", "tx-seed-2"} {
			if r := h.do("PUT", "/Patient/"+id, withID(patientWith(id, "Seed"), id)); r.status != http.StatusCreated {
				t.Fatalf("seed %s: %d %s", id, r.status, r.body)
			}
		}
	}
	invalid := []byte(`{"resourceType":"Bundle","type":"transaction","entry":[
		{"fullUrl":"urn:uuid:3a9d2c1b-0000-4000-8000-000000000001","resource":` + string(patientWith("tx-rb-3", "Valid")) + `,"request":{"method":"POST","url":"Patient"}},
		{"fullUrl":"urn:uuid:3a9d2c1b-0000-4000-8000-000000000002","resource":{"resourceType":"Patient","gender":42},"request":{"method":"POST","url":"Patient"}}]}`)
	tests := []struct {
		name   string
		bundle []byte
		status []int
		absent []string // identifier values nothing may carry afterwards
	}{
		{"update with mismatched id", fixture(t, "bundles/transaction-rollback-id-mismatch.json"), ints(400), []string{"tx-rb-1", "tx-rb-put"}},
		{"failing If-Match", fixture(t, "bundles/transaction-rollback-if-match.json"), ints(400, 409, 412), []string{"tx-rb-2"}},
		{"invalid resource", invalid, ints(400, 422), []string{"tx-rb-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			seed(t, h)
			before := h.historyCount(t)
			r := h.do("POST", "", tc.bundle)
			if !slices.Contains(tc.status, r.status) {
				t.Fatalf("status %d, want one of %v; %s", r.status, tc.status, r.body)
			}
			expectOutcome(t, r, r.status, "")
			if after := h.historyCount(t); after != before {
				t.Errorf("the failed transaction wrote %d versions", after-before)
			}
			for _, v := range tc.absent {
				if got := h.matchIDs(t, "Patient", identQuery(v)); len(got) != 0 {
					t.Errorf("the failed transaction left Patient %v with identifier %s", got, v)
				}
			}
			if got := h.matchIDs(t, "Observation", "code=29463-7"); len(got) != 0 {
				t.Errorf("the failed transaction left Observations %v", got)
			}
			for _, id := range []string{"tx-seed-1", "tx-seed-2"} {
				if r := h.do("GET", "/Patient/"+id, nil); r.status != http.StatusOK || r.header.Get("ETag") != `W/"1"` {
					t.Errorf("seed Patient/%s after the failed transaction: %d %s", id, r.status, r.header.Get("ETag"))
				}
			}
			for _, id := range []string{"tx-rb-put", "tx-rb-other"} {
				if r := h.do("GET", "/Patient/"+id, nil); r.status != http.StatusNotFound {
					t.Errorf("Patient/%s after the failed transaction: %d", id, r.status)
				}
			}
		})
	}
}

func TestTransactionProcessingOrder(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	old := h.create(t, "Patient", patientWith("order-old", "Old"))
	res := responseEntries(t, h.do("POST", "", fixture(t, "bundles/transaction-order.json")), "transaction-response")
	// The response follows the order of the request entries.
	expectStatuses(t, res, ints(200), ints(201), ints(201), ints(200, 204))
	typ, newID, _ := located(t, res[1].location)
	if typ != "Patient" || newID == old || res[1].etag != `W/"1"` {
		t.Fatalf("entry 1: location %q etag %q (old Patient/%s)", res[1].location, res[1].etag, old)
	}
	if _, id, _ := located(t, res[2].location); id != "order-put" {
		t.Errorf("entry 2 location %q", res[2].location)
	}
	// The conditional DELETE listed last ran first: it matched only the
	// old Patient (after the POST it would have matched two and failed),
	// and the GET listed first ran last: it sees the new Patient only.
	expectOutcome(t, h.do("GET", "/Patient/"+old, nil), http.StatusGone, "")
	search := res[0].resource
	if search["type"] != "searchset" {
		t.Fatalf("entry 0 resource is not a searchset: %v", search)
	}
	var found []string
	entries, _ := search["entry"].([]any)
	for _, e := range entries {
		if id, ok := dig(e, "resource", "id").(string); ok {
			found = append(found, id)
		}
	}
	if len(found) != 1 || found[0] != newID {
		t.Errorf("the GET entry found %v, want only the new Patient/%s", found, newID)
	}
	if got := h.matchIDs(t, "Patient", identQuery("order-old")); len(got) != 1 || got[0] != newID {
		t.Errorf("after the transaction %v match, want [%s]", got, newID)
	}
	// The PUT's reference to the POST's urn:uuid was rewritten.
	put, _ := h.readJSON(t, "Patient", "order-put")
	if got := dig(put, "link", 0, "other", "reference"); got != "Patient/"+newID {
		t.Errorf("Patient/order-put link %v, want Patient/%s", got, newID)
	}
}

func TestTransactionResolvesReferences(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	for _, s := range []struct{ path, body string }{
		{"/Practitioner/prac-cond-seed", `{"resourceType":"Practitioner","id":"prac-cond-seed","identifier":[{"system":"urn:kiln:test","value":"prac-cond"}],"name":[{"family":"Conditional"}]}`},
		{"/Patient/existing-seed", string(withID(patientWith("existing-1", "Existing"), "existing-seed"))},
	} {
		if r := h.do("PUT", s.path, []byte(s.body)); r.status != http.StatusCreated {
			t.Fatalf("seed %s: %d %s", s.path, r.status, r.body)
		}
	}
	res := responseEntries(t, h.do("POST", "", fixture(t, "bundles/transaction-references.json")), "transaction-response")
	expectStatuses(t, res, ints(201), ints(201), ints(201), ints(201), ints(200), ints(201))
	ids := make([]string, len(res))
	for i, want := range []string{"Patient", "Organization", "Practitioner", "Observation", "", "Observation"} {
		if want == "" {
			continue
		}
		typ, id, v := located(t, res[i].location)
		if typ != want || v != "1" || res[i].etag != `W/"1"` {
			t.Errorf("entry %d: location %q etag %q, want a new %s", i, res[i].location, res[i].etag, want)
		}
		ids[i] = id
	}
	// The conditional create matched: it names the existing resource, which
	// is left as it was.
	if res[4].location != "" {
		if typ, id, _ := located(t, res[4].location); typ != "Patient" || id != "existing-seed" {
			t.Errorf("entry 4 location %q, want Patient/existing-seed", res[4].location)
		}
	}
	if got := h.matchIDs(t, "Patient", identQuery("existing-1")); len(got) != 1 || got[0] != "existing-seed" {
		t.Errorf("identifier existing-1 matches %v, want only existing-seed", got)
	}
	if r := h.do("GET", "/Patient/existing-seed", nil); r.header.Get("ETag") != `W/"1"` || bytes.Contains(r.body, []byte("Duplicate")) {
		t.Errorf("the matched conditional create changed Patient/existing-seed: %s %s", r.header.Get("ETag"), r.body)
	}

	patient, org, prac, obs, obs2 := ids[0], ids[1], ids[2], ids[3], ids[5]
	pm, pb := h.readJSON(t, "Patient", patient)
	om, ob := h.readJSON(t, "Observation", obs)
	o2m, o2b := h.readJSON(t, "Observation", obs2)
	checks := []struct {
		what string
		got  any
		want string
	}{
		{"Patient.managingOrganization", dig(pm, "managingOrganization", "reference"), "Organization/" + org},
		{"Patient extension valueReference", dig(pm, "extension", 0, "valueReference", "reference"), "Practitioner/" + prac},
		{"Patient.generalPractitioner (conditional)", dig(pm, "generalPractitioner", 0, "reference"), "Practitioner/prac-cond-seed"},
		{"Observation.subject", dig(om, "subject", "reference"), "Patient/" + patient},
		{"Observation.performer[0]", dig(om, "performer", 0, "reference"), "Practitioner/" + prac},
		{"Observation.performer[1] (conditional)", dig(om, "performer", 1, "reference"), "Practitioner/prac-cond-seed"},
		{"Observation extension valueReference", dig(om, "extension", 0, "valueReference", "reference"), "Organization/" + org},
		{"Observation nested extension valueReference", dig(om, "extension", 1, "extension", 0, "valueReference", "reference"), "Patient/" + patient},
		{"contained Specimen.subject", dig(om, "contained", 0, "subject", "reference"), "Patient/" + patient},
		{"contained Specimen.collection.collector", dig(om, "contained", 0, "collection", "collector", "reference"), "Practitioner/" + prac},
		{"Observation.specimen (local reference, kept)", dig(om, "specimen", "reference"), "#spec1"},
		{"Observation.subject to the matched conditional create", dig(o2m, "subject", "reference"), "Patient/existing-seed"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %s", c.what, c.got, c.want)
		}
	}
	// Rewriting changed only the reference values: the client's member
	// order is kept.
	if s, c := bytes.Index(ob, []byte(`"status"`)), bytes.Index(ob, []byte(`"code"`)); !bytes.HasPrefix(ob, []byte(`{"resourceType":`)) || s < 0 || c < s {
		t.Errorf("the stored Observation lost the client's member order: %s", ob)
	}
	for _, b := range [][]byte{pb, ob, o2b} {
		if bytes.Contains(b, []byte("urn:uuid:")) || bytes.Contains(b, []byte("?identifier=")) {
			t.Errorf("an unresolved reference was stored: %s", b)
		}
	}
	// The rewritten references are indexed for search.
	if got := h.matchIDs(t, "Observation", "subject=Patient/"+patient); len(got) != 1 || got[0] != obs {
		t.Errorf("Observation?subject=Patient/%s finds %v, want [%s]", patient, got, obs)
	}
	if got := h.matchIDs(t, "Observation", "subject=Patient/existing-seed"); len(got) != 1 || got[0] != obs2 {
		t.Errorf("Observation?subject=Patient/existing-seed finds %v, want [%s]", got, obs2)
	}
}

// bundleOf builds a Bundle of typ from entry JSON texts.
func bundleOf(typ string, entries ...string) []byte {
	return []byte(`{"resourceType":"Bundle","type":"` + typ + `","entry":[` + strings.Join(entries, ",") + `]}`)
}

// postEntry is a POST entry creating res, with the fullUrl urn:uuid
// numbered n.
func postEntry(n int, typ string, res []byte) string {
	return fmt.Sprintf(`{"fullUrl":"urn:uuid:%08x-0000-4000-8000-%012x","resource":%s,"request":{"method":"POST","url":%q}}`, n, n, res, typ)
}

func observationOf(subject string) []byte {
	return fmt.Appendf(nil, `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"subject":{"reference":%q},"valueQuantity":{"value":70,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`, subject)
}

// A conditional reference that matches nothing, or more than one resource,
// fails the transaction.
func TestTransactionConditionalReferenceMustMatchOne(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	h.create(t, "Patient", patientWith("ref-dup", "A"))
	h.create(t, "Patient", patientWith("ref-dup", "B"))
	for _, ref := range []string{"Patient?identifier=urn:kiln:test|ref-none", "Patient?identifier=urn:kiln:test|ref-dup"} {
		before := h.historyCount(t)
		b := bundleOf("transaction", postEntry(1, "Patient", patientWith("ref-new", "New")), postEntry(2, "Observation", observationOf(ref)))
		r := h.do("POST", "", b)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("reference %s: status %d, want a 4xx; %s", ref, r.status, r.body)
			continue
		}
		expectOutcome(t, r, r.status, "")
		if after := h.historyCount(t); after != before {
			t.Errorf("reference %s: the failed transaction wrote %d versions", ref, after-before)
		}
	}
}

func TestTransactionPatchEntries(t *testing.T) {
	for _, typ := range []string{"transaction", "batch"} {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t)
			if typ == "transaction" {
				needsTransactions(t, h)
			}
			for _, id := range []string{"patch-1", "patch-2"} {
				if r := h.do("PUT", "/Patient/"+id, withID(fixture(t, "patient.json"), id)); r.status != http.StatusCreated {
					t.Fatalf("seed: %d %s", r.status, r.body)
				}
			}
			b := bytes.Replace(fixture(t, "bundles/transaction-patch.json"), []byte(`"type": "transaction"`), []byte(`"type": "`+typ+`"`), 1)
			res := responseEntries(t, h.do("POST", "", b), typ+"-response")
			expectStatuses(t, res, ints(200), ints(200))
			p1, _ := h.readJSON(t, "Patient", "patch-1")
			if v, _ := meta(t, p1); v != "2" || p1["gender"] != "male" || dig(p1, "name", 0, "given", 2) != "Chidi" {
				t.Errorf("JSON Patch in a Binary: version %s, %v", v, p1)
			}
			p2, _ := h.readJSON(t, "Patient", "patch-2")
			if v, _ := meta(t, p2); v != "2" || p2["birthDate"] != "1990-01-01" {
				t.Errorf("FHIRPath Patch: version %s, %v", v, p2)
			}
		})
	}
}

func TestBundleEntryLimit(t *testing.T) {
	h := newHarness(t, func(c *fhirserver.Config) { c.MaxBundleEntries = 5 })
	needsTransactions(t, h)
	entries := func(n int, prefix string) []string {
		var out []string
		for i := range n {
			out = append(out, postEntry(i+1, "Patient", patientWith(fmt.Sprint(prefix, i), "Limit")))
		}
		return out
	}
	for _, typ := range []string{"transaction", "batch"} {
		expectOutcome(t, h.do("POST", "", bundleOf(typ, entries(6, typ+"-six-")...)), http.StatusRequestEntityTooLarge, "")
		if got := h.matchIDs(t, "Patient", identQuery(typ+"-six-0")); len(got) != 0 {
			t.Errorf("the refused %s wrote %v", typ, got)
		}
		res := responseEntries(t, h.do("POST", "", bundleOf(typ, entries(5, typ+"-five-")...)), typ+"-response")
		expectStatuses(t, res, ints(201), ints(201), ints(201), ints(201), ints(201))
	}
}

func TestBundleTypeMustBeBatchOrTransaction(t *testing.T) {
	h := newHarness(t)
	for _, typ := range []string{"collection", "searchset", "document", "message", "history", "batch-response", "transaction-response"} {
		b := bytes.Replace(fixture(t, "bundles/collection.json"), []byte(`"type": "collection"`), []byte(`"type": "`+typ+`"`), 1)
		expectOutcome(t, h.do("POST", "", b), http.StatusBadRequest, "")
	}
	// Not a Bundle at all.
	expectOutcome(t, h.do("POST", "", fixture(t, "patient.json")), http.StatusBadRequest, "")
	if got := h.matchIDs(t, "Patient", identQuery("collection-1")); len(got) != 0 {
		t.Errorf("a refused Bundle wrote %v", got)
	}
}

// A transaction of 100 resources, Observations referring to Patients by
// urn:uuid (each listed before its Patient), commits as a whole.
func TestLargeTransaction(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	const n = 50
	var entries []string
	for i := range n {
		patientURN := fmt.Sprintf("urn:uuid:%08x-0000-4000-8000-%012x", 2*i+2, 2*i+2)
		entries = append(entries,
			postEntry(2*i+1, "Observation", observationOf(patientURN)),
			postEntry(2*i+2, "Patient", patientWith(fmt.Sprint("bulk-", i), "Bulk")))
	}
	res := responseEntries(t, h.do("POST", "", bundleOf("transaction", entries...)), "transaction-response")
	if len(res) != 2*n {
		t.Fatalf("%d response entries, want %d", len(res), 2*n)
	}
	for i := range n {
		o, p := res[2*i], res[2*i+1]
		if o.status != http.StatusCreated || p.status != http.StatusCreated {
			t.Fatalf("pair %d: statuses %d %d", i, o.status, p.status)
		}
		ot, obs, _ := located(t, o.location)
		pt, patient, _ := located(t, p.location)
		if ot != "Observation" || pt != "Patient" {
			t.Fatalf("pair %d: locations %q %q", i, o.location, p.location)
		}
		if got := h.matchIDs(t, "Observation", "subject=Patient/"+patient); len(got) != 1 || got[0] != obs {
			t.Errorf("Observation?subject=Patient/%s finds %v, want [%s]", patient, got, obs)
		}
		if got := h.matchIDs(t, "Patient", identQuery(fmt.Sprint("bulk-", i))); len(got) != 1 || got[0] != patient {
			t.Errorf("Patient bulk-%d: %v, want [%s]", i, got, patient)
		}
	}
}

// Entries resolved in a transaction by conditional update, and conditional
// creates that match nothing, take part in reference rewriting: references
// to their fullUrl become the matched or assigned Type/id.
func TestTransactionConditionalEntriesResolveReferences(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	seeded := h.create(t, "Patient", patientWith("cu-tx-1", "Seeded"))
	urn := func(n int) string { return fmt.Sprintf("urn:uuid:%08x-0000-4000-8000-%012x", n, n) }
	b := bundleOf("transaction",
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"PUT","url":"Patient?identifier=urn:kiln:test|cu-tx-1"}}`, urn(1), patientWith("cu-tx-1", "Updated")),
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"PUT","url":"Patient?identifier=urn:kiln:test|cu-tx-new"}}`, urn(2), patientWith("cu-tx-new", "New")),
		fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"Patient","ifNoneExist":"identifier=urn:kiln:test|cc-tx-new"}}`, urn(3), patientWith("cc-tx-new", "Created")),
		postEntry(4, "Observation", observationOf(urn(1))),
		postEntry(5, "Observation", observationOf(urn(2))),
		postEntry(6, "Observation", observationOf(urn(3))),
	)
	res := responseEntries(t, h.do("POST", "", b), "transaction-response")
	expectStatuses(t, res, ints(200), ints(201), ints(201), ints(201), ints(201), ints(201))
	if r := h.do("GET", "/Patient/"+seeded, nil); r.header.Get("ETag") != `W/"2"` || !bytes.Contains(r.body, []byte("Updated")) {
		t.Errorf("the conditional update did not update Patient/%s: %s %s", seeded, r.header.Get("ETag"), r.body)
	}
	_, newPut, _ := located(t, res[1].location)
	_, newPost, _ := located(t, res[2].location)
	for i, want := range []string{seeded, newPut, newPost} {
		_, obs, _ := located(t, res[3+i].location)
		m, _ := h.readJSON(t, "Observation", obs)
		if got := dig(m, "subject", "reference"); got != "Patient/"+want {
			t.Errorf("Observation %d subject %v, want Patient/%s", i, got, want)
		}
	}
	for _, v := range []string{"cu-tx-1", "cu-tx-new", "cc-tx-new"} {
		if got := h.matchIDs(t, "Patient", identQuery(v)); len(got) != 1 {
			t.Errorf("identifier %s matches %v, want one Patient", v, got)
		}
	}
}

// The R4 transaction rules: "If any resource identities (including resolved
// identities from conditional update/delete) overlap in steps 1-3, then the
// transaction SHALL fail"; and fullUrl must be unique in a Bundle (bdl-7).
func TestTransactionOverlappingEntriesFail(t *testing.T) {
	put := func(id, family string) string {
		return fmt.Sprintf(`{"resource":%s,"request":{"method":"PUT","url":"Patient/%s"}}`, withID(patientWith(id, family), id), id)
	}
	tests := []struct {
		name    string
		entries []string
	}{
		{"delete and update of one resource", []string{
			`{"request":{"method":"DELETE","url":"Patient/ov-seed"}}`,
			put("ov-seed", "Updated"),
		}},
		{"two updates of one resource", []string{put("ov-new", "First"), put("ov-new", "Second")}},
		{"conditional update resolving to an updated resource", []string{
			fmt.Sprintf(`{"resource":%s,"request":{"method":"PUT","url":"Patient?identifier=urn:kiln:test|ov-seed"}}`, patientWith("ov-seed", "Conditional")),
			put("ov-seed", "Direct"),
		}},
		{"conditional delete resolving to an updated resource", []string{
			`{"request":{"method":"DELETE","url":"Patient?identifier=urn:kiln:test|ov-seed"}}`,
			put("ov-seed", "Updated"),
		}},
		{"version-specific fullUrl (bdl: fullUrl SHALL NOT be version specific)", []string{
			`{"fullUrl":"http://example.org/fhir/Patient/v1/_history/1","resource":` + string(patientWith("ov-ver", "V")) + `,"request":{"method":"POST","url":"Patient"}}`,
		}},
		{"duplicate fullUrl", []string{
			postEntry(7, "Patient", patientWith("ov-dup-a", "A")),
			postEntry(7, "Patient", patientWith("ov-dup-b", "B")),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			needsTransactions(t, h)
			if r := h.do("PUT", "/Patient/ov-seed", withID(patientWith("ov-seed", "Seed"), "ov-seed")); r.status != http.StatusCreated {
				t.Fatalf("seed: %d %s", r.status, r.body)
			}
			before := h.historyCount(t)
			r := h.do("POST", "", bundleOf("transaction", tc.entries...))
			if r.status < 400 || r.status >= 500 {
				t.Fatalf("status %d, want a 4xx; %.600s", r.status, r.body)
			}
			expectOutcome(t, r, r.status, "")
			if after := h.historyCount(t); after != before {
				t.Errorf("the failed transaction wrote %d versions", after-before)
			}
		})
	}
}

// Concurrent transactions whose conditional create entries have the same
// criteria create one resource, and every transaction's references to the
// entry resolve to it. Run with -race.
func TestTransactionConditionalCreateRace(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	const writers = 12
	b := bundleOf("transaction",
		fmt.Sprintf(`{"fullUrl":"urn:uuid:00000001-0000-4000-8000-000000000001","resource":%s,"request":{"method":"POST","url":"Patient","ifNoneExist":"identifier=urn:kiln:test|tx-race"}}`, patientWith("tx-race", "Racer")),
		postEntry(2, "Observation", observationOf("urn:uuid:00000001-0000-4000-8000-000000000001")),
	)
	statuses := make([]int, writers)
	bodies := make([][]byte, writers)
	errs := make([]error, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest("POST", h.base, bytes.NewReader(b))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/fhir+json")
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			statuses[i] = resp.StatusCode
			bodies[i], errs[i] = io.ReadAll(resp.Body)
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range writers {
		if errs[i] != nil || statuses[i] != http.StatusOK {
			t.Errorf("transaction %d: %d %v %.300s", i, statuses[i], errs[i], bodies[i])
			continue
		}
		res := responseEntries(t, response{status: statuses[i], body: bodies[i]}, "transaction-response")
		if len(res) == 2 && res[0].status == http.StatusCreated {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d conditional creates answered 201, want exactly 1", created)
	}
	patients := h.matchIDs(t, "Patient", identQuery("tx-race"))
	if len(patients) != 1 {
		t.Fatalf("identifier tx-race matches %d Patients %v, want 1", len(patients), patients)
	}
	if got := h.matchIDs(t, "Observation", "subject=Patient/"+patients[0]); len(got) != writers {
		t.Errorf("%d Observations refer to Patient/%s, want %d", len(got), patients[0], writers)
	}
}

// In a batch, a resource that is not valid R4 fails only its own entry:
// the Bundle is checked as a whole only for what makes it unreadable.
func TestBatchInvalidResourceFailsOnlyItsEntry(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "", []byte(`{"resourceType":"Bundle","type":"batch","entry":[`+
		`{"resource":{"resourceType":"Patient","gender":42},"request":{"method":"POST","url":"Patient"}},`+
		`{"resource":{"resourceType":"Patient","gender":"female"},"request":{"method":"POST","url":"Patient"}}]}`))
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	entries := r.json(t)["entry"].([]any)
	status := func(i int) string {
		return entries[i].(map[string]any)["response"].(map[string]any)["status"].(string)
	}
	if !strings.HasPrefix(status(0), "400") || !strings.HasPrefix(status(1), "201") {
		t.Errorf("statuses %q, %q; want 400 and 201", status(0), status(1))
	}
}

// Operations that write in steps of their own cannot run inside a
// transaction (they would wait for its writer): the entry is refused at
// once, and the transaction with it. A history entry reads through the
// transaction and sees what earlier entries wrote.
func TestTransactionEntriesThatCannotJoin(t *testing.T) {
	h := newHarness(t)
	needsTransactions(t, h)
	r := h.do("POST", "", []byte(`{"resourceType":"Bundle","type":"transaction","entry":[`+
		`{"resource":{"resourceType":"Parameters","id":"x"},"request":{"method":"POST","url":"Patient/$reindex"}}]}`))
	expectOutcome(t, r, http.StatusBadRequest, "$reindex")
	r = h.do("POST", "", []byte(`{"resourceType":"Bundle","type":"transaction","entry":[`+
		`{"resource":{"resourceType":"Patient","id":"hx"},"request":{"method":"PUT","url":"Patient/hx"}},`+
		`{"request":{"method":"GET","url":"Patient/hx/_history"}}]}`))
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"type":"history"`) || !strings.Contains(string(r.body), `Patient/hx/_history/1`) {
		t.Errorf("history inside a transaction: %d %s", r.status, r.body)
	}
}

// tickingClock moves on by step every time it is read, so that no two
// readings are equal.
type tickingClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *tickingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// A transaction's index rows are extracted before it holds the store's
// writer, but its entries are stamped once it does: the _lastUpdated rows
// follow the stamp, so each resource is found at its meta.lastUpdated and
// at no other instant, and is sorted by it.
func TestTransactionIndexesTheLastUpdatedItIsStampedWith(t *testing.T) {
	c := &tickingClock{t: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC), step: 1500 * time.Millisecond}
	h := newHarness(t, func(cfg *fhirserver.Config) { cfg.Now = c.now })
	needsTransactions(t, h)
	b := bundleOf("transaction", postEntry(1, "Patient", patientWith("stamp-1", "Stamp")),
		postEntry(2, "Observation", observationOf("urn:uuid:00000001-0000-4000-8000-000000000001")))
	res := responseEntries(t, h.do("POST", "", b), "transaction-response")
	expectStatuses(t, res, ints(201), ints(201))
	for _, e := range res {
		typ, id, _ := located(t, e.location)
		m, _ := h.readJSON(t, typ, id)
		lu, _ := dig(m, "meta", "lastUpdated").(string)
		if lu == "" {
			t.Fatalf("%s/%s has no meta.lastUpdated", typ, id)
		}
		for _, q := range []struct {
			query string
			found bool
		}{
			{"_lastUpdated=" + lu, true},
			{"_lastUpdated=ge" + lu + "&_lastUpdated=le" + lu, true},
			{"_lastUpdated=lt" + lu, false},
			{"_lastUpdated=gt" + lu, false},
		} {
			got := h.matchIDs(t, typ, q.query)
			if found := slices.Contains(got, id); found != q.found {
				t.Errorf("%s?%s finds %v; want %s/%s found=%v", typ, q.query, got, typ, id, q.found)
			}
		}
	}
}

// A GET entry may be a system search ([base]?_type=…), as a request to the
// base would be.
func TestBatchSystemSearchEntry(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", patientWith("sys-search", "Sys"))
	r := h.do("POST", "", bundleOf("batch", `{"request":{"method":"GET","url":"?_type=Patient&identifier=`+testSystem+`|sys-search"}}`))
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	entry := r.json(t)["entry"].([]any)[0].(map[string]any)
	if status := entry["response"].(map[string]any)["status"].(string); !strings.HasPrefix(status, "200") {
		t.Fatalf("system search entry: %s %s", status, r.body)
	}
	if !strings.Contains(string(r.body), `"id":"`+id+`"`) {
		t.Errorf("the system search did not find Patient/%s: %s", id, r.body)
	}
}

// An entry's request url with a trailing slash means the same as without,
// as on the REST API: in a batch (searches, metadata) and a transaction.
func TestBundleEntryTrailingSlash(t *testing.T) {
	h := newHarness(t)
	id := h.create(t, "Patient", patientWith("slash-entry", "Slash"))
	r := h.do("POST", "", bundleOf("batch",
		`{"request":{"method":"GET","url":"Patient/?identifier=`+testSystem+`|slash-entry"}},`+
			`{"request":{"method":"GET","url":"metadata/"}},`+
			`{"request":{"method":"GET","url":"Patient/`+id+`/"}}`))
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	for i, e := range r.json(t)["entry"].([]any) {
		if status := e.(map[string]any)["response"].(map[string]any)["status"].(string); !strings.HasPrefix(status, "200") {
			t.Errorf("batch entry %d: %s", i, status)
		}
	}
	t.Run("transaction", func(t *testing.T) {
		needsTransactions(t, h)
		r := h.do("POST", "", bundleOf("transaction",
			`{"fullUrl":"urn:uuid:3a9d2c1b-0000-4000-8000-0000000000aa","resource":`+string(patientWith("slash-tx", "Slash"))+`,"request":{"method":"POST","url":"Patient/"}}`))
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"status":"201`) {
			t.Errorf("transaction with Patient/: %d %s", r.status, r.body)
		}
	})
}
