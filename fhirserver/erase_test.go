package fhirserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// testErasure is a minimal erasure policy: the mechanism is under test.
var testErasure = fhirserver.Erasure{
	Anonymize: func(res map[string]any) map[string]any {
		delete(res, "name")
		delete(res, "telecom")
		res["meta"].(map[string]any)["security"] = []any{map[string]any{"code": "ANONYED"}}
		return res
	},
	Scrub: func(res map[string]any, ref string) (map[string]any, bool) {
		subj, _ := res["subject"].(map[string]any)
		if subj["reference"] != ref || subj["display"] == nil {
			return res, false
		}
		delete(subj, "display")
		return res, true
	},
}

// Erasure leaves no identifying data in the Patient's current version,
// its history, the search index, or the resources that reference it,
// whose clinical content stays.
func TestErasePatient(t *testing.T) {
	h := newHarness(t)
	must := func(r response, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
		}
	}
	must(h.do("PUT", "/Patient/e1", []byte(`{"resourceType":"Patient","id":"e1","name":[{"family":"Müller"}],"telecom":[{"system":"phone","value":"0803 555 0199"}]}`)), 201)
	must(h.do("PUT", "/Patient/e1", []byte(`{"resourceType":"Patient","id":"e1","name":[{"family":"Müller","given":["Anna"]}],"telecom":[{"system":"phone","value":"0803 555 0199"}]}`)), 200)
	cond := func(display string) []byte {
		return []byte(`{"resourceType":"Condition","id":"c1","code":{"text":"Asthma"},"subject":{"reference":"Patient/e1","display":"` + display + `"}}`)
	}
	must(h.do("PUT", "/Condition/c1", cond("A. Müller")), 201)
	must(h.do("PUT", "/Condition/c1", cond("Anna Müller")), 200)
	must(h.do("PUT", "/Patient/other", []byte(`{"resourceType":"Patient","id":"other","name":[{"family":"Müller"}]}`)), 201)

	srv, err := fhirserver.New(h.cfg, h.store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := srv.ErasePatient(ctx, "e1", testErasure)
	if err != nil || got.Already || got.At.IsZero() {
		t.Fatalf("ErasePatient: %+v, %v", got, err)
	}

	for _, path := range []string{"/Patient?name=muller", "/Patient?phone=0803%20555%200199"} {
		if body := string(h.do("GET", path, nil).body); strings.Contains(body, "Patient/e1") {
			t.Errorf("%s still finds the patient: %s", path, body)
		}
	}
	for _, path := range []string{"/Patient/e1/_history", "/Condition/c1/_history", "/Patient/e1", "/Condition/c1"} {
		body := string(h.do("GET", path, nil).body)
		if strings.Contains(body, "Müller") || strings.Contains(body, "0803") {
			t.Errorf("%s still identifies the patient: %s", path, body)
		}
	}
	if body := string(h.do("GET", "/Patient?name=muller", nil).body); !strings.Contains(body, "Patient/other") {
		t.Errorf("another patient of the same name is gone too: %s", body)
	}
	if body := string(h.do("GET", "/Condition?subject=Patient/e1", nil).body); !strings.Contains(body, "Asthma") {
		t.Errorf("the Condition lost its clinical content or its link: %s", body)
	}
	if body := string(h.do("GET", "/Patient/e1/_history", nil).body); strings.Count(body, `"fullUrl"`) != 3 {
		t.Errorf("history should keep its 3 versions, anonymized: %s", body)
	}

	again, err := srv.ErasePatient(ctx, "e1", testErasure)
	if err != nil || !again.Already || !again.At.Equal(got.At) {
		t.Errorf("a second erasure: %+v, %v; want the first one's time", again, err)
	}
	// A security label alone does not make a patient erased: what counts
	// is whether anonymizing still changes something.
	must(h.do("PUT", "/Patient/e2", []byte(`{"resourceType":"Patient","id":"e2","meta":{"security":[{"code":"ANONYED"}]},"name":[{"family":"Okafor"}]}`)), 201)
	if got, err := srv.ErasePatient(ctx, "e2", testErasure); err != nil || got.Already {
		t.Errorf("a labelled but identifying patient: %+v, %v", got, err)
	}
	if body := string(h.do("GET", "/Patient/e2", nil).body); strings.Contains(body, "Okafor") {
		t.Errorf("the labelled patient kept its name: %s", body)
	}
	// A deleted patient's history is erased; the answer keeps the
	// deletion's time.
	must(h.do("PUT", "/Patient/e3", []byte(`{"resourceType":"Patient","id":"e3","name":[{"family":"Adeyemi"}]}`)), 201)
	must(h.do("DELETE", "/Patient/e3", nil), 204)
	first, err := srv.ErasePatient(ctx, "e3", testErasure)
	second, err2 := srv.ErasePatient(ctx, "e3", testErasure)
	if err != nil || err2 != nil || !first.At.Equal(second.At) {
		t.Errorf("erasing a deleted patient twice: %+v %v, %+v %v", first, err, second, err2)
	}
	if body := string(h.do("GET", "/Patient/e3/_history", nil).body); strings.Contains(body, "Adeyemi") {
		t.Errorf("the deleted patient's history still names them: %s", body)
	}

	_, err = srv.ErasePatient(ctx, "nobody", testErasure)
	var oe *outcome.Error
	if !errors.As(err, &oe) || oe.Status != http.StatusNotFound {
		t.Errorf("an unknown patient: %v", err)
	}
}
