package sealed

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/canarytest"
)

// The canaries: values of a worker's record that must never reach the
// disk readable. Each is distinctive enough that a hit is no accident.
const (
	canaryFamily     = "Quillfeatherson"
	canaryGiven      = "Zephyrinia"
	canaryAccented   = "Ærøskøbingsdóttir"
	canaryEMP        = "EMP-73019468"
	canaryPhone      = "0412 998 314"
	canaryPhoneNew   = "0499 271 605"
	canaryCompany    = "Brackwater Drilling Canary"
	canaryCompanyNew = "Brackwater Offshore Canary"
	canaryCert       = "Fulmarsurvival BOSIET Canary"
	canaryProvider   = "Oystercatcher Clinic Canary"
	canaryRole       = "Derrickhand Canaryrole"
	canaryDept       = "Mudlogging Canarydept"
)

var canaries = []string{canaryFamily, canaryGiven, canaryAccented, canaryEMP, canaryPhone, canaryPhoneNew,
	canaryCompany, canaryCompanyNew, canaryCert, canaryProvider, canaryRole, canaryDept}

// The ids of the canary resources: opaque, as the partition's are.
const (
	orgID     = "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a01"
	workerID  = "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a02"
	certID    = "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a03"
	screenID  = "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a04"
	empSystem = "https://example.org/sid/employee-id"
)

func meta(version int64, lu time.Time) string {
	return fmt.Sprintf(`"meta":{"versionId":"%d","lastUpdated":%q}`, version, lu.Format(time.RFC3339Nano))
}

func organization(version int64, lu time.Time, name string) string {
	return fmt.Sprintf(`{"resourceType":"Organization","id":%q,%s,
		"identifier":[{"system":"https://example.org/sid/company","value":%q}],"name":%q}`,
		orgID, meta(version, lu), name+" Ltd", name)
}

func worker(version int64, lu time.Time, phone string) string {
	return fmt.Sprintf(`{"resourceType":"Patient","id":%q,%s,
		"extension":[{"url":"https://example.org/StructureDefinition/job-role","valueString":%q},
			{"url":"https://example.org/StructureDefinition/department","valueString":%q}],
		"identifier":[{"system":%q,"value":%q}],
		"name":[{"family":%q,"given":[%q,%q]}],
		"telecom":[{"system":"phone","value":%q,"use":"work"}],
		"birthDate":"1979-02-28",
		"managingOrganization":{"reference":"Organization/%s"}}`,
		workerID, meta(version, lu), canaryRole, canaryDept, empSystem, canaryEMP,
		canaryFamily, canaryGiven, canaryAccented, phone, orgID)
}

func certification(lu time.Time) string {
	data := base64.StdEncoding.EncodeToString([]byte("certificate: " + canaryCert + " for " + canaryEMP))
	return fmt.Sprintf(`{"resourceType":"DocumentReference","id":%q,%s,"status":"current",
		"type":{"coding":[{"system":"https://example.org/CodeSystem/certification-type","code":"bosiet","display":%q}],"text":%q},
		"subject":{"reference":"Patient/%s"},"description":%q,
		"content":[{"attachment":{"contentType":"text/plain","title":%q,"data":%q}}],
		"context":{"period":{"start":"2024-03-01","end":"2028-02-29"}}}`,
		certID, meta(1, lu), canaryCert, canaryCert, workerID, canaryCert, canaryCert, data)
}

func screening(lu time.Time) string {
	return fmt.Sprintf(`{"resourceType":"Observation","id":%q,%s,"status":"final",
		"code":{"coding":[{"system":"https://example.org/CodeSystem/screening","code":"fitness-for-work"}]},
		"subject":{"reference":"Patient/%s"},"effectiveDateTime":"2024-03-01",
		"performer":[{"display":%q}],
		"valueCodeableConcept":{"coding":[{"system":"https://example.org/CodeSystem/fitness","code":"fit"}]},
		"component":[{"code":{"text":"valid until"},"valueDateTime":"2026-03-01"}]}`,
		screenID, meta(1, lu), workerID, canaryProvider)
}

// writeCanaries writes, updates and searches the canary resources through
// s, as a workforce partition would, and leaves an idempotency record
// holding an answer with the EMP id.
func writeCanaries(t *testing.T, s store.Store, searchable bool) {
	t.Helper()
	ctx := t.Context()
	t0 := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	for _, w := range []store.Write{
		resourceWrite(t, organization(1, at(0), canaryCompany), 1, at(0)),
		resourceWrite(t, worker(1, at(1), canaryPhone), 1, at(1)),
		resourceWrite(t, certification(at(2)), 1, at(2)),
		resourceWrite(t, screening(at(3)), 1, at(3)),
		resourceWrite(t, worker(2, at(4), canaryPhoneNew), 2, at(4)),
		resourceWrite(t, organization(2, at(5), canaryCompanyNew), 2, at(5)),
	} {
		if err := s.Put(ctx, w); err != nil {
			t.Fatalf("Put %s/%s v%d: %v", w.Type, w.ID, w.Version, err)
		}
	}
	answer := fmt.Appendf(nil, `{"state":"done","status":201,"body":{"employee_id":%q,"status":"registered"}}`, canaryEMP)
	if err := s.(store.Records).PutRecord(ctx, store.Record{Kind: "idempotency", ID: "5f1c0e", Version: 1, Value: answer}); err != nil {
		t.Fatalf("PutRecord: %v", err)
	}
	if !searchable {
		return
	}
	for _, c := range []struct {
		types []string
		query string
		want  []string
	}{
		{[]string{"Patient"}, "identifier=" + empSystem + "|" + canaryEMP, []string{"Patient/" + workerID}},
		{[]string{"Patient"}, "identifier=" + canaryEMP, []string{"Patient/" + workerID}},
		{[]string{"Patient"}, "phone=" + canaryPhoneNew, []string{"Patient/" + workerID}},
		{[]string{"Patient"}, "phone=" + canaryPhone, nil},
		{[]string{"Patient"}, "family:exact=" + canaryFamily, []string{"Patient/" + workerID}},
		{[]string{"Patient"}, "given:exact=" + canaryAccented, []string{"Patient/" + workerID}},
		{[]string{"Organization"}, "name:exact=" + canaryCompanyNew, []string{"Organization/" + orgID}},
		{[]string{"Organization"}, "name:exact=" + canaryCompany, nil},
		{[]string{"DocumentReference"}, "type=https://example.org/CodeSystem/certification-type|bosiet", []string{"DocumentReference/" + certID}},
		{[]string{"Observation"}, "subject:Patient.identifier=" + canaryEMP, []string{"Observation/" + screenID}},
	} {
		page, err := s.Search(ctx, parse(t, c.types, c.query))
		if err != nil {
			t.Fatalf("search %s: %v", c.query, err)
		}
		if got := refsOf(page.Matches); !slices.Equal(got, c.want) {
			t.Errorf("search %s: found %v, want %v", c.query, got, c.want)
		}
	}
}

func refsOf(vs []*store.Version) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Type+"/"+v.ID)
	}
	return out
}

// canaryValues are the canaries, each standing for itself.
func canaryValues() canarytest.Values {
	v := canarytest.Values{}
	for _, c := range canaries {
		v[c] = c
	}
	return v
}

// canaryHits lists the canaries found in any file under dir: lines
// "<canary>: <file>: <forms>".
func canaryHits(t *testing.T, dir string) []string {
	t.Helper()
	return canarytest.SweepFolder(t, dir, canaryValues())
}

// TestCanaries: the canary values of a worker, written, updated and
// searched through the sealed store, are in no file of the data folder
// (the database, its -wal and -shm), raw, normalized or base64-encoded,
// neither while the store is open nor after it closed.
func TestCanaries(t *testing.T) {
	dir := t.TempDir()
	s, _ := sealedSQLite(t, dir, newTestKeys(t).config("workforce"))
	writeCanaries(t, s, true)
	if hits := canaryHits(t, dir); len(hits) > 0 {
		t.Errorf("canaries readable while the store is open: %v", hits)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "workforce.db-wal") {
		t.Errorf("files %v: want the WAL to be checked too", names)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if hits := canaryHits(t, dir); len(hits) > 0 {
		t.Errorf("canaries readable after the store closed: %v", hits)
	}
}

// TestCanariesWithoutSealing is the control of TestCanaries: the same
// writes on the bare SQLite store leave every canary readable, so the
// search for them finds what it looks for.
func TestCanariesWithoutSealing(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, filepath.Join(dir, "workforce.db"))
	writeCanaries(t, s, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	hits := canaryHits(t, dir)
	for _, c := range canaries {
		if !slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, c+": ") }) {
			t.Errorf("the bare store hid %q: the canary search is broken (hits %v)", c, hits)
		}
	}
}
