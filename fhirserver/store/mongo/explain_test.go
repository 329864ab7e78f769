package mongo_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
)

// explainQueries are the searches of the load scenarios (kiln admin load)
// and their usual companions: each must be answered through an index.
var explainQueries = []struct{ typ, query string }{
	{"Observation", "subject=Patient/pat-1&code=http://loinc.org|8867-4"},
	{"Observation", "subject=Patient/pat-1&_sort=-date"},
	{"Patient", "family=okafor&birthdate=ge1975-04-12"},
	{"Patient", "identifier=https://kiln.example/mrn|12-3"},
	{"Patient", "_id=pat-1"},
	{"Observation", "date=ge2026-03-01&date=lt2026-03-02&code=8867-4"},
	{"Observation", "value-quantity=gt100"},
}

// TestQueriesUseIndexes explains, on a real MongoDB, every find the search
// compiler emits for explainQueries and fails on a collection scan.
// FerretDB answers everything by scanning, so it is reported as not run.
func TestQueriesUseIndexes(t *testing.T) {
	s := mongotest.Open(t)
	defer s.Close()
	if s.Server().FerretDB {
		mongotest.NotRun("TestQueriesUseIndexes (explain: IXSCAN, no COLLSCAN)", "FerretDB scans for every query; the check needs a real MongoDB")
		t.Skip("FerretDB: every query is a scan")
	}
	reg, err := search.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, eq := range explainQueries {
		params, _ := url.ParseQuery(eq.query)
		p, err := reg.Parse([]string{eq.typ}, params, search.ParseOptions{})
		if err != nil {
			t.Fatalf("%s?%s: %v", eq.typ, eq.query, err)
		}
		parts, err := mongo.ExplainStages(ctx, s, p.Query)
		if err != nil {
			t.Fatalf("explain %s?%s: %v", eq.typ, eq.query, err)
		}
		for part, stages := range parts {
			if stages["COLLSCAN"] || !stages["IXSCAN"] && !stages["IDHACK"] && !stages["EXPRESS_IXSCAN"] {
				t.Errorf("%s?%s (partition %d): stages %v, want an index scan and no COLLSCAN", eq.typ, eq.query, part, stages)
			}
		}
	}
}
