package fhirserver_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
)

// The conditional entries of a transaction (If-None-Exist creates,
// conditional updates and references) resolve the same way whatever the
// order of the entries, and a transaction that would leave two resources
// matching one entry's criteria fails: those criteria exist to prevent
// exactly that duplicate.

func urnOf(n int) string { return fmt.Sprintf("urn:uuid:%08x-0000-4000-8000-%012x", n, n) }

// condCreate is a POST entry with fullUrl urnOf(n) and If-None-Exist cond.
func condCreate(n int, res []byte, cond string) string {
	return fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"POST","url":"Patient","ifNoneExist":%q}}`, urnOf(n), res, cond)
}

// condUpdate is a PUT entry with fullUrl urnOf(n) and criteria query.
func condUpdate(n int, res []byte, query string) string {
	return fmt.Sprintf(`{"fullUrl":%q,"resource":%s,"request":{"method":"PUT","url":"Patient?%s"}}`, urnOf(n), res, query)
}

func TestTransactionConditionalEntriesResolveAlike(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		// statuses of the entries; the Observations (the last two
		// entries) must both refer to the one Patient with identifier
		// "alike".
		want [][]int
	}{
		{"two creates with the same criteria create one resource", []string{
			condCreate(1, patientWith("alike", "Same"), "identifier=urn:kiln:test|alike"),
			condCreate(2, patientWith("alike", "Same"), "identifier=urn:kiln:test|alike"),
			postEntry(3, "Observation", observationOf(urnOf(1))),
			postEntry(4, "Observation", observationOf(urnOf(2))),
		}, [][]int{ints(201), ints(200), ints(201), ints(201)}},
		{"the same criteria in another order", []string{
			condCreate(1, patientWith("alike", "Same"), "identifier=urn:kiln:test|alike&family=Same"),
			condCreate(2, patientWith("alike", "Same"), "family=Same&identifier=urn:kiln:test%7Calike"),
			postEntry(3, "Observation", observationOf(urnOf(1))),
			postEntry(4, "Observation", observationOf(urnOf(2))),
		}, [][]int{ints(201), ints(200), ints(201), ints(201)}},
		{"repeats of a parameter in another order", []string{
			condCreate(1, patientWith("alike", "Same"), "identifier=urn:kiln:test|alike&family=Same&family=Sa"),
			condCreate(2, patientWith("alike", "Same"), "family=Sa&identifier=urn:kiln:test|alike&family=Same"),
			postEntry(3, "Observation", observationOf(urnOf(1))),
			postEntry(4, "Observation", observationOf(urnOf(2))),
		}, [][]int{ints(201), ints(200), ints(201), ints(201)}},
		{"a conditional reference before the create it names", []string{
			postEntry(3, "Observation", observationOf("Patient?identifier=urn:kiln:test|alike")),
			condCreate(1, patientWith("alike", "Later"), "identifier=urn:kiln:test|alike"),
			postEntry(4, "Observation", observationOf(urnOf(1))),
		}, [][]int{ints(201), ints(201), ints(201)}},
		{"a conditional reference to a conditional update that creates", []string{
			postEntry(3, "Observation", observationOf("Patient?identifier=urn:kiln:test|alike")),
			condUpdate(1, patientWith("alike", "Put"), "identifier=urn:kiln:test|alike"),
			postEntry(4, "Observation", observationOf(urnOf(1))),
		}, [][]int{ints(201), ints(201), ints(201)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			needsTransactions(t, h)
			res := responseEntries(t, h.do("POST", "", bundleOf("transaction", tc.entries...)), "transaction-response")
			expectStatuses(t, res, tc.want...)
			patients := h.matchIDs(t, "Patient", identQuery("alike"))
			if len(patients) != 1 {
				t.Fatalf("identifier alike matches %v, want one Patient", patients)
			}
			for _, i := range []int{len(res) - 2, len(res) - 1} {
				if res[i].location == "" {
					continue
				}
				typ, id, _ := located(t, res[i].location)
				if typ != "Observation" {
					continue
				}
				m, _ := h.readJSON(t, typ, id)
				if got := dig(m, "subject", "reference"); got != "Patient/"+patients[0] {
					t.Errorf("entry %d: Observation.subject %v, want Patient/%s", i, got, patients[0])
				}
			}
			for i, e := range res {
				if e.location == "" {
					continue
				}
				if typ, id, _ := located(t, e.location); typ == "Patient" && id != patients[0] {
					t.Errorf("entry %d names Patient/%s, which is not the one resource created", i, id)
				}
			}
		})
	}
}

func TestTransactionConditionalConflictsFail(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
	}{
		{"two creates whose different criteria both match what each creates", []string{
			condCreate(1, patientWith("twice", "Solo"), "identifier=urn:kiln:test|twice"),
			condCreate(2, patientWith("twice", "Solo"), "family=Solo"),
		}},
		{"a plain create of a resource a conditional create's criteria match", []string{
			postEntry(1, "Patient", patientWith("twice", "Plain")),
			condCreate(2, patientWith("twice", "Conditional"), "identifier=urn:kiln:test|twice"),
		}},
		{"a conditional create and a conditional update with the same criteria", []string{
			condCreate(1, patientWith("twice", "Created"), "identifier=urn:kiln:test|twice"),
			condUpdate(2, patientWith("twice", "Updated"), "identifier=urn:kiln:test|twice"),
		}},
		{"two creates with the same criteria and different resources", []string{
			condCreate(1, patientWith("twice", "First"), "identifier=urn:kiln:test|twice"),
			condCreate(2, patientWith("twice", "Second"), "identifier=urn:kiln:test|twice"),
		}},
		{"two conditional updates with the same criteria", []string{
			condUpdate(1, patientWith("twice", "First"), "identifier=urn:kiln:test|twice"),
			condUpdate(2, patientWith("twice", "Second"), "identifier=urn:kiln:test|twice"),
		}},
		{"a conditional update that other entries make ambiguous", []string{
			postEntry(1, "Patient", patientWith("seeded", "Plain")),
			condUpdate(2, patientWith("seeded", "Updated"), "identifier=urn:kiln:test|seeded"),
		}},
		{"a conditional update matching what a create before it made", []string{
			postEntry(1, "Patient", patientWith("twice", "Plain")),
			condUpdate(2, patientWith("twice", "Updated"), "identifier=urn:kiln:test|twice"),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			needsTransactions(t, h)
			h.create(t, "Patient", patientWith("seeded", "Seed"))
			before := h.historyCount(t)
			r := h.do("POST", "", bundleOf("transaction", tc.entries...))
			expectOutcome(t, r, http.StatusBadRequest, "")
			if after := h.historyCount(t); after != before {
				t.Errorf("the failed transaction wrote %d versions", after-before)
			}
		})
	}
}

// Deletes are applied first: a conditional entry after them no longer
// finds what they delete, and creates a new resource.
func TestTransactionDeleteThenConditionalCreate(t *testing.T) {
	for _, entry := range []string{
		condCreate(1, patientWith("replaced", "New"), "identifier=urn:kiln:test|replaced"),
		condUpdate(1, patientWith("replaced", "New"), "identifier=urn:kiln:test|replaced"),
	} {
		h := newHarness(t)
		needsTransactions(t, h)
		old := h.create(t, "Patient", patientWith("replaced", "Old"))
		res := responseEntries(t, h.do("POST", "", bundleOf("transaction",
			entry, `{"request":{"method":"DELETE","url":"Patient/`+old+`"}}`)), "transaction-response")
		expectStatuses(t, res, ints(201), ints(200, 204))
		if got := h.matchIDs(t, "Patient", identQuery("replaced")); len(got) != 1 || got[0] == old {
			t.Errorf("identifier replaced matches %v, want one new Patient (not the deleted %s)", got, old)
		}
	}
}

// response.lastModified is the resource's meta.lastUpdated, to the
// millisecond, not the HTTP Last-Modified header's whole second.
func TestTransactionResponseLastModifiedIsExact(t *testing.T) {
	clock := &tickingClock{t: time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC), step: 1500 * time.Millisecond}
	h := newHarness(t, func(c *fhirserver.Config) { c.Now = clock.now })
	needsTransactions(t, h)
	for _, typ := range []string{"transaction", "batch"} {
		r := h.do("POST", "", bundleOf(typ, postEntry(1, "Patient", patientWith("exact-"+typ, "Exact"))))
		m := r.json(t)
		lm, _ := dig(m, "entry", 0, "response", "lastModified").(string)
		loc, _ := dig(m, "entry", 0, "response", "location").(string)
		_, id, _ := located(t, loc)
		stored, _ := h.readJSON(t, "Patient", id)
		if want, _ := dig(stored, "meta", "lastUpdated").(string); lm != want || !slices.Contains([]int{23, 24, 29}, len(lm)) {
			t.Errorf("%s: response.lastModified %q, want the stored meta.lastUpdated %q", typ, lm, want)
		}
	}
}

// The outcome of a transaction does not depend on the order of its
// entries: each case is sent in both orders, on a fresh server.
func TestTransactionConditionalOutcomeIgnoresOrder(t *testing.T) {
	amb := "Patient?identifier=urn:kiln:test|amb"
	tests := []struct {
		name   string
		seed   []byte // a Patient written before the transaction, if set
		a, b   string
		status int
	}{
		{"a conditional reference to what a plain create makes is not resolved by it",
			nil, postEntry(3, "Observation", observationOf("Patient?identifier=urn:kiln:test|b1")), postEntry(1, "Patient", patientWith("b1", "Plain")),
			http.StatusPreconditionFailed},
		{"a conditional reference that the transaction makes ambiguous",
			patientWith("amb", "Seed"), postEntry(3, "Observation", observationOf(amb)), condCreate(1, patientWith("amb", "New"), "identifier=urn:kiln:test|amb&family=New"),
			http.StatusBadRequest},
		{"a conditional create of a resource its criteria do not match",
			nil, condCreate(1, patientWith("b3-other", "X"), "identifier=urn:kiln:test|b3"), postEntry(2, "Patient", patientWith("b3", "Y")),
			http.StatusBadRequest},
		{"a conditional update that takes its resource out of a conditional reference's criteria",
			patientWith("amb", "Seed"), condUpdate(1, patientWith("amb-moved", "Seed"), "identifier=urn:kiln:test|amb"), postEntry(3, "Observation", observationOf(amb)),
			http.StatusBadRequest},
		{"a delete by id and a conditional delete of one resource",
			patientWith("amb", "Seed"), `{"request":{"method":"DELETE","url":"Patient?identifier=urn:kiln:test|amb"}}`, `{"request":{"method":"DELETE","url":"Patient/seed-1"}}`,
			http.StatusBadRequest},
		{"a conditional update and an update by id creating another match",
			patientWith("amb", "Seed"), condUpdate(1, patientWith("amb", "Updated"), "identifier=urn:kiln:test|amb"),
			`{"resource":` + string(withID(patientWith("amb", "ByID"), "byid-1")) + `,"request":{"method":"PUT","url":"Patient/byid-1"}}`,
			http.StatusBadRequest},
		{"a conditional patch and an update by id creating another match",
			patientWith("amb", "Seed"),
			`{"resource":{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"replace"},` +
				`{"name":"path","valueString":"Patient.gender"},{"name":"value","valueCode":"female"}]}]},"request":{"method":"PATCH","url":"Patient?identifier=urn:kiln:test|amb"}}`,
			`{"resource":` + string(withID(patientWith("amb", "ByID"), "byid-2")) + `,"request":{"method":"PUT","url":"Patient/byid-2"}}`,
			http.StatusBadRequest},
		{"a conditional reference resolved before the transaction",
			patientWith("amb", "Seed"), postEntry(3, "Observation", observationOf(amb)), postEntry(1, "Patient", patientWith("other", "Other")),
			http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]string{{tc.a, tc.b}, {tc.b, tc.a}} {
				h := newHarness(t)
				needsTransactions(t, h)
				if tc.seed != nil {
					if r := h.do("PUT", "/Patient/seed-1", withID(tc.seed, "seed-1")); r.status != http.StatusCreated {
						t.Fatalf("seed: %d %s", r.status, r.body)
					}
				}
				before := h.historyCount(t)
				r := h.do("POST", "", bundleOf("transaction", order...))
				if r.status != tc.status {
					t.Fatalf("status %d, want %d; %.500s", r.status, tc.status, r.body)
				}
				if r.status != http.StatusOK {
					expectOutcome(t, r, tc.status, "")
					if after := h.historyCount(t); after != before {
						t.Errorf("the failed transaction wrote %d versions", after-before)
					}
				}
			}
		})
	}
}
