package fhirserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
)

// Conditional create, update and delete as FHIR R4 defines them
// (https://hl7.org/fhir/R4/http.html#ccreate, #cond-update, #cdelete).

// testSystem is the identifier system of the Patients these tests write.
const testSystem = "urn:kiln:test"

// identQuery is the search criteria "identifier=system|value", escaped for
// a URL query or an If-None-Exist header.
func identQuery(value string) string {
	return "identifier=" + url.QueryEscape(testSystem+"|"+value)
}

// patientWith is a valid R4 Patient with one identifier in testSystem.
func patientWith(value, family string) []byte {
	return fmt.Appendf(nil, `{"resourceType":"Patient","identifier":[{"system":%q,"value":%q}],"active":true,"name":[{"family":%q,"given":["Test"]}],"gender":"unknown"}`,
		testSystem, value, family)
}

// matchIDs searches typ with query and returns the ids of the matches.
func (h *harness) matchIDs(t *testing.T, typ, query string) []string {
	t.Helper()
	r := h.do("GET", "/"+typ+"?"+query+"&_count=500", nil)
	if r.status != http.StatusOK {
		t.Fatalf("search %s?%s: %d %s", typ, query, r.status, r.body)
	}
	var ids []string
	for _, e := range bundleEntries(t, r) {
		if s, ok := e["search"].(map[string]any); ok && s["mode"] != nil && s["mode"] != "match" {
			continue
		}
		res, _ := e["resource"].(map[string]any)
		if res["resourceType"] == typ {
			ids = append(ids, res["id"].(string))
		}
	}
	return ids
}

// etagVersion is the version of a weak ETag W/"n".
func etagVersion(etag string) string {
	return strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
}

func TestConditionalCreate(t *testing.T) {
	h := newHarness(t)
	crit := identQuery("cc-1")

	// No match: the create goes ahead.
	first := h.do("POST", "/Patient", patientWith("cc-1", "First"), "If-None-Exist", crit)
	if first.status != http.StatusCreated {
		t.Fatalf("no match: %d, want 201; %s", first.status, first.body)
	}
	id := first.json(t)["id"].(string)
	if first.header.Get("ETag") != `W/"1"` || !strings.Contains(first.header.Get("Location"), "/Patient/"+id+"/_history/1") {
		t.Errorf("no match: ETag %q Location %q", first.header.Get("ETag"), first.header.Get("Location"))
	}

	// One match: 200, the existing resource, and nothing is created.
	again := h.do("POST", "/Patient", patientWith("cc-1", "Second"), "If-None-Exist", crit)
	if again.status != http.StatusOK {
		t.Fatalf("one match: %d, want 200; %s", again.status, again.body)
	}
	m := again.json(t)
	if m["resourceType"] != "Patient" || m["id"] != id {
		t.Errorf("one match returned %v/%v, want the existing Patient/%s", m["resourceType"], m["id"], id)
	}
	if bytes.Contains(again.body, []byte("Second")) {
		t.Errorf("one match: the response carries the posted resource, not the existing one: %s", again.body)
	}
	if got := h.matchIDs(t, "Patient", crit); len(got) != 1 || got[0] != id {
		t.Errorf("after the matched create, %s finds %v; want only %s", crit, got, id)
	}
	if r := h.do("GET", "/Patient/"+id, nil); r.header.Get("ETag") != `W/"1"` || bytes.Contains(r.body, []byte("Second")) {
		t.Errorf("the existing resource was changed: %s %s", r.header.Get("ETag"), r.body)
	}

	// Two matches: 412, nothing created.
	h.create(t, "Patient", patientWith("cc-2", "A"))
	h.create(t, "Patient", patientWith("cc-2", "B"))
	expectOutcome(t, h.do("POST", "/Patient", patientWith("cc-2", "C"), "If-None-Exist", identQuery("cc-2")), http.StatusPreconditionFailed, "")
	if got := h.matchIDs(t, "Patient", identQuery("cc-2")); len(got) != 2 {
		t.Errorf("after the refused create there are %d matches, want 2", len(got))
	}
	// A create ignores the id in the body, conditional or not.
	r := h.do("POST", "/Patient", withID(patientWith("cc-4", "Chosen"), "chosen-by-client"), "If-None-Exist", identQuery("cc-4"))
	if r.status != http.StatusCreated || r.json(t)["id"] == "chosen-by-client" {
		t.Errorf("conditional create with a body id: %d %s; want 201 with an id of the server's", r.status, r.body)
	}
	// The criteria of If-None-Exist are those of a search: other
	// parameters than identifier work too.
	r = h.do("POST", "/Patient", patientWith("cc-3", "Zubairu"), "If-None-Exist", "family=Zubairu")
	if r.status != http.StatusCreated {
		t.Errorf("family criteria, no match: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/Patient", patientWith("cc-5", "Zubairu"), "If-None-Exist", "family=Zubairu"); r.status != http.StatusOK {
		t.Errorf("family criteria, one match: %d %s", r.status, r.body)
	}
}

// postRaw posts body as a create with If-None-Exist from a goroutine other
// than the test's: it reports instead of failing.
func postRaw(h *harness, body []byte, ifNoneExist string) (int, string, error) {
	req, err := http.NewRequest("POST", h.base+"/Patient", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/fhir+json")
	req.Header.Set("If-None-Exist", ifNoneExist)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", err
	}
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &m)
	if m.ID == "" {
		return resp.StatusCode, "", fmt.Errorf("no id in %s", b)
	}
	return resp.StatusCode, m.ID, nil
}

// Concurrent conditional creates with the same criteria create exactly one
// resource: a server that searched and then wrote without isolation would
// create several. Run with -race.
func TestConditionalCreateRace(t *testing.T) {
	h := newHarness(t)
	const writers, rounds = 20, 4
	for round := range rounds {
		value := fmt.Sprintf("race-%d", round)
		crit := identQuery(value)
		statuses := make([]int, writers)
		ids := make([]string, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				statuses[i], ids[i], errs[i] = postRaw(h, patientWith(value, fmt.Sprintf("Writer%d", i)), crit)
			})
		}
		close(start)
		wg.Wait()
		created := 0
		distinct := map[string]bool{}
		for i := range writers {
			if errs[i] != nil {
				t.Errorf("round %d writer %d: status %d: %v", round, i, statuses[i], errs[i])
				continue
			}
			switch statuses[i] {
			case http.StatusCreated:
				created++
			case http.StatusOK:
			default:
				t.Errorf("round %d writer %d: status %d, want 201 or 200", round, i, statuses[i])
			}
			distinct[ids[i]] = true
		}
		if created != 1 {
			t.Errorf("round %d: %d creates answered 201, want exactly 1", round, created)
		}
		if len(distinct) != 1 {
			t.Errorf("round %d: the writers were answered with %d different Patients, want all the same one", round, len(distinct))
		}
		if got := h.matchIDs(t, "Patient", crit); len(got) != 1 {
			t.Errorf("round %d: %s finds %d Patients %v, want 1", round, crit, len(got), got)
		}
	}
}

func TestConditionalUpdate(t *testing.T) {
	h := newHarness(t)

	// No match, no id in the body: created with an id of the server's.
	r := h.do("PUT", "/Patient?"+identQuery("cu-new"), patientWith("cu-new", "New"))
	if r.status != http.StatusCreated || r.header.Get("ETag") != `W/"1"` {
		t.Fatalf("no match, no id: %d %s; want 201 W/\"1\"; %s", r.status, r.header.Get("ETag"), r.body)
	}
	serverID, _ := r.json(t)["id"].(string)
	if serverID == "" || !strings.Contains(r.header.Get("Location"), "/Patient/"+serverID) {
		t.Errorf("no match, no id: id %q Location %q", serverID, r.header.Get("Location"))
	}

	// No match, id in the body: update as create with that id.
	r = h.do("PUT", "/Patient?"+identQuery("cu-client"), withID(patientWith("cu-client", "Client"), "cu-client-id"))
	if r.status != http.StatusCreated || r.json(t)["id"] != "cu-client-id" {
		t.Fatalf("no match, body id: %d %s; want 201 Patient/cu-client-id", r.status, r.body)
	}
	if got := h.do("GET", "/Patient/cu-client-id", nil); got.status != http.StatusOK {
		t.Errorf("read of the created cu-client-id: %d", got.status)
	}

	// One match, no id in the body: that resource is updated.
	r = h.do("PUT", "/Patient?"+identQuery("cu-new"), patientWith("cu-new", "Renamed"))
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"2"` {
		t.Fatalf("one match: %d %s; want 200 W/\"2\"; %s", r.status, r.header.Get("ETag"), r.body)
	}
	if m := r.json(t); m["id"] != serverID {
		t.Errorf("one match updated Patient/%v, want Patient/%s", m["id"], serverID)
	}
	read := h.do("GET", "/Patient/"+serverID, nil)
	if vid, _ := meta(t, read.json(t)); vid != "2" || !bytes.Contains(read.body, []byte("Renamed")) {
		t.Errorf("after the conditional update: version %s, body %s", vid, read.body)
	}

	// One match, the body's id is the match's: updated.
	r = h.do("PUT", "/Patient?"+identQuery("cu-new"), withID(patientWith("cu-new", "Again"), serverID))
	if r.status != http.StatusOK || r.header.Get("ETag") != `W/"3"` {
		t.Fatalf("one match, same id: %d %s; %s", r.status, r.header.Get("ETag"), r.body)
	}

	// One match, with If-Match naming a stale version: 412.
	expectOutcome(t, h.do("PUT", "/Patient?"+identQuery("cu-new"), patientWith("cu-new", "Stale"), "If-Match", `W/"1"`), http.StatusPreconditionFailed, "")

	// One match, a different id in the body: 400, nothing written.
	expectOutcome(t, h.do("PUT", "/Patient?"+identQuery("cu-new"), withID(patientWith("cu-new", "Wrong"), "someone-else")), http.StatusBadRequest, "")
	if r := h.do("GET", "/Patient/"+serverID, nil); r.header.Get("ETag") != `W/"3"` {
		t.Errorf("the refused update changed the resource: ETag %s", r.header.Get("ETag"))
	}
	if r := h.do("GET", "/Patient/someone-else", nil); r.status != http.StatusNotFound {
		t.Errorf("the refused update created Patient/someone-else: %d", r.status)
	}

	// Multiple matches: 412.
	h.create(t, "Patient", patientWith("cu-dup", "A"))
	h.create(t, "Patient", patientWith("cu-dup", "B"))
	expectOutcome(t, h.do("PUT", "/Patient?"+identQuery("cu-dup"), patientWith("cu-dup", "C")), http.StatusPreconditionFailed, "")
	if got := h.matchIDs(t, "Patient", identQuery("cu-dup")); len(got) != 2 {
		t.Errorf("after the refused update %d Patients match, want 2", len(got))
	}

	// No criteria: 400 (PUT needs an id or criteria).
	expectOutcome(t, h.do("PUT", "/Patient", patientWith("cu-none", "X")), http.StatusBadRequest, "")
	expectOutcome(t, h.do("PUT", "/Patient?_format=json", patientWith("cu-none", "X")), http.StatusBadRequest, "")
	if got := h.matchIDs(t, "Patient", identQuery("cu-none")); len(got) != 0 {
		t.Errorf("a PUT without criteria wrote %v", got)
	}
}

func TestConditionalDelete(t *testing.T) {
	h := newHarness(t)

	// One match: deleted; a read then answers 410.
	id := h.create(t, "Patient", patientWith("cd-1", "One"))
	r := h.do("DELETE", "/Patient?"+identQuery("cd-1"), nil)
	if r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Fatalf("one match: %d %s", r.status, r.body)
	}
	expectOutcome(t, h.do("GET", "/Patient/"+id, nil), http.StatusGone, "")
	if got := h.matchIDs(t, "Patient", identQuery("cd-1")); len(got) != 0 {
		t.Errorf("the deleted Patient is still found: %v", got)
	}

	// No match: an ordinary delete of nothing succeeds.
	if r := h.do("DELETE", "/Patient?"+identQuery("cd-none"), nil); r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Errorf("no match: %d %s, want 204 (or 200)", r.status, r.body)
	}

	// Multiple matches with single deletes only (the default): 412, and
	// nothing is deleted.
	a := h.create(t, "Patient", patientWith("cd-many", "A"))
	b := h.create(t, "Patient", patientWith("cd-many", "B"))
	expectOutcome(t, h.do("DELETE", "/Patient?"+identQuery("cd-many"), nil), http.StatusPreconditionFailed, "")
	for _, id := range []string{a, b} {
		if r := h.do("GET", "/Patient/"+id, nil); r.status != http.StatusOK {
			t.Errorf("Patient/%s after the refused delete: %d", id, r.status)
		}
	}

	// No criteria: 400, not "delete everything".
	expectOutcome(t, h.do("DELETE", "/Patient", nil), http.StatusBadRequest, "")
	if got := h.matchIDs(t, "Patient", identQuery("cd-many")); len(got) != 2 {
		t.Errorf("DELETE /Patient without criteria deleted something: %v remain", got)
	}
}

// Result parameters select nothing: criteria made only of them are no
// criteria (a 400, never a match on every resource of the type), and
// beside filters they change nothing.
func TestConditionalResultParametersAreNotCriteria(t *testing.T) {
	h := newHarness(t, func(c *fhirserver.Config) { c.MaxConditionalDeletes = 10 })
	needsTransactions(t, h)
	a := h.create(t, "Patient", patientWith("crp-1", "A"))
	b := h.create(t, "Patient", patientWith("crp-2", "B"))
	for _, q := range []string{"_count=1", "_sort=_id", "_summary=count", "_elements=id", "_total=accurate", "_include=Patient:general-practitioner", "_revinclude:iterate=Observation:subject", "_count=1&_format=json"} {
		expectOutcome(t, h.do("DELETE", "/Patient?"+q, nil), http.StatusBadRequest, "criteria")
		expectOutcome(t, h.do("PUT", "/Patient?"+q, patientWith("crp-x", "X")), http.StatusBadRequest, "criteria")
		expectOutcome(t, h.do("POST", "/Patient", patientWith("crp-y", "Y"), "If-None-Exist", q), http.StatusBadRequest, "criteria")
	}
	for _, id := range []string{a, b} {
		if r := h.do("GET", "/Patient/"+id, nil); r.status != http.StatusOK {
			t.Errorf("Patient/%s after the refused conditional deletes: %d", id, r.status)
		}
	}
	if got := h.matchIDs(t, "Patient", "identifier="+url.QueryEscape(testSystem+"|crp-x")+","+url.QueryEscape(testSystem+"|crp-y")); len(got) != 0 {
		t.Errorf("refused conditional writes created %v", got)
	}
	// Beside a filter, _count does not make the one match a 412.
	r := h.do("POST", "/Patient", patientWith("crp-1", "Again"), "If-None-Exist", identQuery("crp-1")+"&_count=5")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), a) {
		t.Errorf("If-None-Exist with a filter and _count: %d %.200s, want 200 with Patient/%s", r.status, r.body, a)
	}
}

func TestConditionalDeleteMultiple(t *testing.T) {
	h := newHarness(t, func(c *fhirserver.Config) { c.MaxConditionalDeletes = 10 })
	needsTransactions(t, h)
	var ids []string
	for i := range 3 {
		ids = append(ids, h.create(t, "Patient", patientWith("cdm-3", fmt.Sprint("P", i))))
	}
	keep := h.create(t, "Patient", patientWith("cdm-other", "Keep"))
	r := h.do("DELETE", "/Patient?"+identQuery("cdm-3"), nil)
	if r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Fatalf("delete of 3 matches with MaxConditionalDeletes 10: %d %s", r.status, r.body)
	}
	for _, id := range ids {
		expectOutcome(t, h.do("GET", "/Patient/"+id, nil), http.StatusGone, "")
	}
	if r := h.do("GET", "/Patient/"+keep, nil); r.status != http.StatusOK {
		t.Errorf("a Patient outside the criteria: %d", r.status)
	}

	// More matches than the limit: 412 and nothing deleted.
	for i := range 11 {
		h.create(t, "Patient", patientWith("cdm-11", fmt.Sprint("P", i)))
	}
	expectOutcome(t, h.do("DELETE", "/Patient?"+identQuery("cdm-11"), nil), http.StatusPreconditionFailed, "")
	if got := h.matchIDs(t, "Patient", identQuery("cdm-11")); len(got) != 11 {
		t.Errorf("after the refused delete %d of 11 remain", len(got))
	}
}
