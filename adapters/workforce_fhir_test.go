package adapters

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Opaque ids as the workforce partition chooses them: never derived from
// the EMP id.
const (
	wfPatientID = "k7QpZ2xR9vLm"
	wfOrgID     = "b3NvYW1hcGx5"
)

var wfRecorded = time.Date(2026, 2, 28, 10, 15, 30, 123000000, time.UTC)

func wfScreeningIDs(n int) ScreeningIDs {
	ids := ScreeningIDs{Observation: "Xo4mQ1sT8uVw"}
	for i := range n {
		ids.Certifications = append(ids.Certifications, fmt.Sprintf("d%02dJf6hK2pNq", i))
	}
	return ids
}

func wfRequirements(t testing.TB) *Requirements {
	return DefaultRequirements().WithCertificationTypes(certTypes(t))
}

// POST /workforce body → Patient and Organization (golden), and back.
func TestWorkerBothWays(t *testing.T) {
	for _, c := range cases(t, "workforce", ".request.json") {
		if !strings.HasPrefix(filepath.Base(c), "worker-") {
			continue
		}
		t.Run(filepath.Base(c), func(t *testing.T) {
			var in NewWorker
			readJSON(t, c+".request.json", &in)
			golden(t, c+".patient.json", indent(t, pack.WorkerPatient(in, wfPatientID, wfOrgID)))
			golden(t, c+".organization.json", indent(t, pack.OrganizationResource(in.Company, wfOrgID)))

			var pt, org map[string]any
			readJSON(t, c+".patient.json", &pt)
			readJSON(t, c+".organization.json", &org)
			want := in
			want.Name = strings.Join(strings.Fields(in.Name), " ")
			if back := pack.NewWorkerOf(pt, org); back != want {
				t.Errorf("resources → body: %+v, want %+v", back, want)
			}
			if b := pack.NewWorkerOf(pt, nil); b.Company != want.Company {
				t.Errorf("company from the employer extension alone: %q", b.Company)
			}
			if strings.Contains(string(pack.WorkerPatient(in, wfPatientID, wfOrgID)), `"id":"`+in.EmployeeID) {
				t.Error("the EMP id is used as a resource id")
			}
		})
	}
}

// POST /workforce/{id}/screening body → Observation and DocumentReferences
// (golden), and back; the screening answer (golden).
func TestScreeningBothWays(t *testing.T) {
	req := wfRequirements(t)
	for _, c := range cases(t, "workforce", ".request.json") {
		if !strings.HasPrefix(filepath.Base(c), "screening-") {
			continue
		}
		t.Run(filepath.Base(c), func(t *testing.T) {
			var in NewScreening
			readJSON(t, c+".request.json", &in)
			obs, certs, err := pack.ScreeningResources(req, in, wfPatientID, wfScreeningIDs(len(in.Certifications)), wfRecorded)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c+".observation.json", indent(t, obs))
			raw := make([]json.RawMessage, len(certs))
			for i, b := range certs {
				raw[i] = b
			}
			golden(t, c+".certifications.json", indent(t, raw))

			var o map[string]any
			var docs []map[string]any
			readJSON(t, c+".observation.json", &o)
			readJSON(t, c+".certifications.json", &docs)
			back := pack.NewScreeningOf(o, docs)
			if jsonString(t, back) != jsonString(t, in) {
				t.Errorf("resources → body:\n%s\nwant\n%s", jsonString(t, back), jsonString(t, in))
			}
			golden(t, c+".answer.json", indent(t, pack.ScreeningRecordedOf(o, "EMP-55721")))
		})
	}
}

func TestScreeningResourcesRefuses(t *testing.T) {
	req := wfRequirements(t)
	s := NewScreening{MedicalStatus: "fit", ScreeningDate: "2026-01-01", ExpiryDate: "2027-01-01", Certifications: []string{"H2S"}}
	if _, _, err := pack.ScreeningResources(req, s, "p", ScreeningIDs{Observation: "o"}, wfRecorded); err == nil {
		t.Error("no id for the certification: no error")
	}
	s.MedicalStatus = "well"
	if _, _, err := pack.ScreeningResources(req, s, "p", wfScreeningIDs(1), wfRecorded); err == nil {
		t.Error("an unknown medical_status: no error")
	}
}

// From the golden resources to the registration and compliance answers:
// the worker of worker-full screened by screening-restricted (earlier)
// then screening-fit, at a fixed clock.
func TestWorkforceAnswers(t *testing.T) {
	dir := filepath.Join("testdata", "workforce")
	var pt map[string]any
	readJSON(t, filepath.Join(dir, "worker-full.patient.json"), &pt)
	pt["meta"].(map[string]any)["lastUpdated"] = "2026-02-27T08:00:00.000Z" // as the store writes it
	golden(t, filepath.Join(dir, "answers.registered.json"), indent(t, pack.WorkerRegisteredOf(pt)))

	var observations, docs []map[string]any
	for i, name := range []string{"screening-restricted", "screening-fit"} {
		var o map[string]any
		var d []map[string]any
		readJSON(t, filepath.Join(dir, name+".observation.json"), &o)
		readJSON(t, filepath.Join(dir, name+".certifications.json"), &d)
		// two screenings of one worker have distinct ids
		id := fmt.Sprintf("obs%d", i)
		o["id"] = id
		for _, x := range d {
			x["context"].(map[string]any)["related"] = []any{map[string]any{"reference": "Observation/" + id}}
		}
		observations, docs = append(observations, o), append(docs, d...)
	}
	req := wfRequirements(t)
	answers := map[string]ComplianceAnswer{}
	for _, now := range []string{"2026-03-01T12:00:00Z", "2027-01-05T00:00:00Z", "2028-02-28T23:59:59Z", "2028-02-29T00:00:00Z"} {
		at, _ := time.Parse(time.RFC3339, now)
		answers[now] = pack.ComplianceAnswerOf(req, pt, observations, docs, at)
	}
	golden(t, filepath.Join(dir, "answers.compliance.json"), indent(t, answers))

	// The answer goes through ScreeningsOf: the same as the formula on
	// the bodies.
	got := answers["2026-03-01T12:00:00Z"]
	if got.Status != WorkerFitToWork || !got.CertificationsValid || got.ComplianceScore != 100 {
		t.Errorf("fit with OEUK Medical, BOSIET and H2S: %+v", got)
	}
}

// ScreeningsOf skips what is not a usable fitness-for-work conclusion and
// certifications that are no longer current.
func TestScreeningsOfSkips(t *testing.T) {
	req := wfRequirements(t)
	s := NewScreening{MedicalStatus: "fit", ScreeningDate: "2026-01-01", ExpiryDate: "2027-01-01", Certifications: []string{"H2S"}, ProviderName: "P"}
	obsB, certs, _ := pack.ScreeningResources(req, s, "p", wfScreeningIDs(1), wfRecorded)
	var obs, doc map[string]any
	_ = json.Unmarshal(obsB, &obs)
	_ = json.Unmarshal(certs[0], &doc)
	if got := pack.ScreeningsOf([]map[string]any{obs}, []map[string]any{doc}); len(got) != 1 || len(got[0].Certifications) != 1 || !got[0].RecordedAt.Equal(wfRecorded) {
		t.Fatalf("%+v", got)
	}
	doc["status"] = "superseded"
	if got := pack.ScreeningsOf([]map[string]any{obs}, []map[string]any{doc}); len(got[0].Certifications) != 0 {
		t.Errorf("a superseded certification counts: %+v", got)
	}
	obs["status"] = "entered-in-error"
	if got := pack.ScreeningsOf([]map[string]any{obs}, nil); len(got) != 0 {
		t.Errorf("an entered-in-error screening counts: %+v", got)
	}
	obs["status"] = "final"
	delete(obs, "issued")
	obs["meta"].(map[string]any)["lastUpdated"] = "2026-01-02T03:04:05Z"
	if got := pack.ScreeningsOf([]map[string]any{obs}, nil); got[0].RecordedAt.Format(time.RFC3339) != "2026-01-02T03:04:05Z" {
		t.Errorf("recorded time without issued: %v", got[0].RecordedAt)
	}
}
