package mongo_test

import (
	"os"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	kmongo "github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	mongotest.Report(os.Stdout)
	os.Exit(code)
}

// ferretGaps are the conformance tests FerretDB cannot show (measured
// against FerretDB v1.24 with the PostgreSQL backend; see issue 5).
var ferretGaps = map[string]string{
	"Concurrency/ReadCASRetryLosesNoUpdate": "FerretDB applies updates read-modify-write without a version check, so concurrent compare-and-swap updates lose writes",
	"Concurrency/RacingSameVersionOneWins":  "FerretDB applies updates read-modify-write without a version check, so two racing updates of one version can both succeed",
}

// txGaps are the parts of the Transact tests a deployment without
// multi-document transactions cannot show; the tests still run and check
// that Transact refuses cleanly and writes nothing.
var txGaps = map[string]string{
	"Transact/CommitsEveryWrite (commit)":                                     "no multi-document transactions on this server: only the clean refusal was checked",
	"Transact/ErrorRollsBackEveryWrite (rollback)":                            "no multi-document transactions on this server: only the clean refusal was checked",
	"Transact/ConflictRollsBackEarlierWrites (rollback)":                      "no multi-document transactions on this server: only the clean refusal was checked",
	"Transact/ReadsSeeOwnWritesOthersDoNot (isolation)":                       "no multi-document transactions on this server: only the clean refusal was checked",
	"Rewrite/InsideTransactRollsBackOrCommits (tx.Rewrite, rollback, commit)": "no multi-document transactions on this server: only the clean refusal was checked",
}

// TestConformance runs the store conformance suite on the server at
// MONGODB_URI, each test on a fresh database.
func TestConformance(t *testing.T) {
	srv := mongotest.Server(t)
	opts := storetest.Options{}
	if srv.FerretDB {
		mongotest.NotRun("store conformance Search/Dates and Search/Numbers ($elemMatch form)",
			"FerretDB does not evaluate $elemMatch with field conditions: date and number matches ran with a looser filter checked in Go; the $elemMatch form runs on MongoDB only")
		opts.NotRun = ferretGaps
		for name, why := range ferretGaps {
			mongotest.NotRun("store conformance "+name, why)
		}
	}
	if !srv.Transactions {
		for name, why := range txGaps {
			mongotest.NotRun("store conformance "+name, why)
		}
	}
	// A second Store on the same database: another Kiln instance, or a
	// restart.
	opts.Reopen = func(t *testing.T, s store.Store) store.Store {
		st, err := kmongo.Open(t.Context(), kmongo.Config{URI: mongotest.URI(t), Database: kmongo.DatabaseName(s.(*kmongo.Store))})
		if err != nil {
			t.Fatalf("open a second store on the database: %v", err)
		}
		return st
	}
	storetest.RunWith(t, func(t *testing.T) store.Store { return mongotest.Open(t) }, opts)
}
