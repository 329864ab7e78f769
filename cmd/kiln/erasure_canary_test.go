package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/internal/canarytest"
	"github.com/kiln-fhir/kiln/internal/securitytest"
)

// A canary patient: identifying values that occur nowhere else, so that
// any copy of one left after the erasure is found by a byte search.
type canaryPatient struct {
	First, Last, Phone, Phone2, Email, Line string
}

func (c canaryPatient) values() canarytest.Values {
	return canarytest.Values{
		"first name": c.First, "last name": c.Last, "phone": c.Phone, "updated phone": c.Phone2,
		"e-mail": c.Email, "address line": c.Line,
		// The index keeps phones as written, but a digits-only copy
		// (a normalized token) would be as identifying.
		"phone digits": digitsOf(c.Phone), "updated phone digits": digitsOf(c.Phone2),
	}
}

func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

func randomLetters(t testing.TB, n int) string {
	t.Helper()
	const letters = "bcdfghjklmnpqrstvwxz" // no vowels: no real word by chance
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = letters[k.Int64()]
	}
	return string(b)
}

func randomDigits(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(10))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = byte('0' + k.Int64())
	}
	return string(b)
}

func newCanary(t testing.TB) canaryPatient {
	capital := func(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
	tail := randomLetters(t, 8)
	return canaryPatient{
		First:  capital(randomLetters(t, 9)),
		Last:   capital(randomLetters(t, 10)),
		Phone:  "+47 " + randomDigits(t, 3) + " " + randomDigits(t, 5),
		Phone2: "+47 " + randomDigits(t, 4) + " " + randomDigits(t, 4),
		Email:  "kx" + tail + "@example.org",
		Line:   randomDigits(t, 3) + " " + capital(randomLetters(t, 9)) + " Street",
	}
}

// canaryFlow is what the erasure must undo, through the platform API and
// FHIR: a patient with canary values is created, read, updated and
// searched every way its values can be searched (FHIR GET and POST
// _search, a chained search, a sorted search paged through its next link,
// the /patients summary), referenced from Observations and Conditions that
// copy its name into reference displays, then erased with DELETE
// /patients/{id}, which must answer 200.
func canaryFlow(t *testing.T, client *http.Client, base, token string, c canaryPatient) string {
	t.Helper()
	req := func(method, path, ctype string, body []byte, wantStatus int) map[string]any {
		t.Helper()
		status, m, _ := send(t, client, method, base+path, token, ctype, body)
		if status != wantStatus {
			t.Fatalf("%s %s: %d %v, want %d", method, path, status, m, wantStatus)
		}
		return m
	}
	// An Idempotency-Key: its record is kept in the store.
	body, _ := json.Marshal(map[string]string{
		"first_name": c.First, "last_name": c.Last, "phone": c.Phone, "email": c.Email,
		"date_of_birth": "1984-02-29", "address": c.Line + ", 4006 Stavanger",
	})
	r, _ := http.NewRequest(http.MethodPost, base+"/patients", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Idempotency-Key", "canary-"+c.Last)
	resp, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	var created map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	id, _ := created["patient_id"].(string)
	if resp.StatusCode != http.StatusCreated || id == "" {
		t.Fatalf("POST /patients: %d %v", resp.StatusCode, created)
	}
	req("GET", "/patients/"+id, "", nil, http.StatusOK)

	// An update through FHIR: a second phone and the name in the
	// narrative, so that the history holds two identifying versions.
	p := req("GET", "/fhir/Patient/"+id, "", nil, http.StatusOK)
	p["telecom"] = append(p["telecom"].([]any), map[string]any{"system": "phone", "value": c.Phone2, "use": "mobile"})
	p["text"] = map[string]any{"status": "generated", "div": `<div xmlns="http://www.w3.org/1999/xhtml">` + c.First + " " + c.Last + `</div>`}
	delete(p, "meta")
	upd, _ := json.Marshal(p)
	req("PUT", "/fhir/Patient/"+id, "application/fhir+json", upd, http.StatusOK)

	for _, q := range []string{
		"family=" + url.QueryEscape(c.Last), "name=" + url.QueryEscape(c.First), "given=" + url.QueryEscape(c.First),
		"phone=" + url.QueryEscape(c.Phone), "phone=" + url.QueryEscape(c.Phone2), "telecom=" + url.QueryEscape(c.Phone),
		"email=" + url.QueryEscape(c.Email), "address=" + url.QueryEscape(c.Line),
		"family:exact=" + url.QueryEscape(c.Last) + "&given=" + url.QueryEscape(c.First),
	} {
		m := req("GET", "/fhir/Patient?"+q, "", nil, http.StatusOK)
		if n := len(entries(m)); n != 1 {
			t.Fatalf("GET /fhir/Patient?%s: %d entries, want 1", q, n)
		}
	}
	form := url.Values{"family": {c.Last}, "email": {c.Email}}.Encode()
	if m := req("POST", "/fhir/Patient/_search", "application/x-www-form-urlencoded", []byte(form), http.StatusOK); len(entries(m)) != 1 {
		t.Fatalf("POST /fhir/Patient/_search: %v", m)
	}

	display := c.First + " " + c.Last
	for i := range 3 {
		obs := fmt.Sprintf(`{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],`+
			`"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body weight"}]},"subject":{"reference":"Patient/%s","display":%q},`+
			`"effectiveDateTime":"2026-03-0%dT09:10:00+01:00","valueQuantity":{"value":6%d.5,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`, id, display, i+1, i)
		req("POST", "/fhir/Observation", "application/fhir+json", []byte(obs), http.StatusCreated)
		cond := fmt.Sprintf(`{"resourceType":"Condition","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},`+
			`"code":{"coding":[{"system":"http://snomed.info/sct","code":"195967001","display":"Asthma"}]},`+
			`"subject":{"reference":"Patient/%s","display":%q},"onsetDateTime":"199%d-03-10"}`, id, display, i)
		req("POST", "/fhir/Condition", "application/fhir+json", []byte(cond), http.StatusCreated)
	}
	// A chained search, and a sorted one paged through its next link (a
	// cursor may carry the sort key's value).
	if m := req("GET", "/fhir/Observation?subject:Patient.family="+url.QueryEscape(c.Last), "", nil, http.StatusOK); len(entries(m)) != 3 {
		t.Fatalf("chained search: %d entries", len(entries(m)))
	}
	m := req("GET", "/fhir/Patient?_sort=family&_count=1&family="+url.QueryEscape(c.Last[:4]), "", nil, http.StatusOK)
	for range 3 {
		next := ""
		links, _ := m["link"].([]any)
		for _, l := range links {
			if l, _ := l.(map[string]any); l["relation"] == "next" {
				next, _ = l["url"].(string)
			}
		}
		if next == "" {
			break
		}
		u, err := url.Parse(next)
		if err != nil {
			t.Fatal(err)
		}
		m = req("GET", u.RequestURI(), "", nil, http.StatusOK)
	}
	req("GET", "/patients/"+id, "", nil, http.StatusOK)

	erased := req("DELETE", "/patients/"+id, "", nil, http.StatusOK)
	if erased["status"] != "anonymized" {
		t.Fatalf("DELETE /patients/%s: %v", id, erased)
	}
	// The erasure must not have cost the clinical content.
	if m := req("GET", "/fhir/Observation?subject=Patient/"+id, "", nil, http.StatusOK); len(entries(m)) != 3 {
		t.Fatalf("the Observations were not kept: %v", m)
	}
	return id
}

// TestSecurityErasureLeavesNoCanaryOnDisk is issue 22's definition of
// erased: after DELETE /patients/{id} answers, no byte of any file in the
// data folder (database, WAL, shared memory, audit log, keys, TLS files)
// and no line the server logged (at debug level) holds a canary value in
// any of its forms; and again after a clean stop, and after a restart.
func TestSecurityErasureLeavesNoCanaryOnDisk(t *testing.T) {
	securitytest.Slow(t)
	data := t.TempDir()
	addr, client, out, stop := startServe(t, "--data", data, "--log-level", "debug")
	base := "https://" + addr
	token := adminLogin(t, client, base, out.String())
	c := newCanary(t)
	canaryFlow(t, client, base, token, c)

	report := func(when string, hits []string) {
		t.Helper()
		for _, h := range hits {
			t.Errorf("%s: %s", when, h)
		}
	}
	report("right after the DELETE answered", canarytest.SweepFolder(t, data, c.values()))
	report("in the server's log", canarytest.Hits("log", []byte(out.String()), c.values()))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	report("after a clean stop", canarytest.SweepFolder(t, data, c.values()))

	_, client2, out2, stop2 := startServe(t, "--data", data, "--log-level", "debug")
	client2.CloseIdleConnections()
	report("after a restart", canarytest.SweepFolder(t, data, c.values()))
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	report("after the restart's stop", canarytest.SweepFolder(t, data, c.values()))
	report("in the restarted server's log", canarytest.Hits("log", []byte(out2.String()), c.values()))
}

// TestSecurityErasureOnMongoDB runs the canary flow against the MongoDB
// store (MONGODB_URI, make test-mongo with KILN_TEST_SECURITY=1) and
// searches what the store wrote: every document of every collection of
// the clinical and audit databases, as BSON, and the server's log. The
// WiredTiger files and the oplog are the server's own: docs/erasure.md
// says what they keep and what an operator does about it.
func TestSecurityErasureOnMongoDB(t *testing.T) {
	securitytest.Slow(t)
	m := serveOnMongo(t, "--log-level", "debug")
	uri, prefix, data, client, out, stop, base, token := m.uri, m.prefix, m.data, m.client, m.out, m.stop, m.base, m.token
	c := newCanary(t)
	canaryFlow(t, client, base, token, c)
	// The audit queue is written behind the answers: a clean stop flushes it.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, h := range canarytest.SweepMongo(t, uri, c.values(), 10, prefix+"_clinical", prefix+"_audit") {
		t.Error(h)
	}
	for _, h := range append(canarytest.Hits("log", []byte(out.String()), c.values()), canarytest.SweepFolder(t, data, c.values())...) {
		t.Error(h)
	}
}
