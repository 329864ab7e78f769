package fhirserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// noTx is a store as a deployment without multi-document transactions
// (a standalone MongoDB) presents itself.
type noTx struct{ store.Store }

func (noTx) Transact(context.Context, func(store.Tx) error) error {
	return store.ErrTransactionsUnsupported
}

// TestTransactionRefusedWithoutStoreTransactions proves what a store
// without transactions still serves: a transaction Bundle is refused as a
// whole with a clear outcome and nothing written, the CapabilityStatement
// does not claim transactions, and batches and conditional interactions
// (each write a compare-and-swap) work.
func TestTransactionRefusedWithoutStoreTransactions(t *testing.T) {
	h := newHarnessOn(t, noTx{testStore(t)})

	tx := `{"resourceType":"Bundle","type":"transaction","entry":[
		{"resource":` + string(patientWith("ntx-1", "Tx")) + `,"request":{"method":"POST","url":"Patient"}}]}`
	expectOutcome(t, h.do("POST", "", []byte(tx)), http.StatusNotImplemented, "transaction")
	if ids := h.matchIDs(t, "Patient", identQuery("ntx-1")); len(ids) != 0 {
		t.Errorf("the refused transaction wrote %v", ids)
	}

	if c := h.do("GET", "/metadata", nil); c.status != http.StatusOK || strings.Contains(string(c.body), `"code":"transaction"`) {
		t.Errorf("metadata: %d, claims transaction: %v", c.status, strings.Contains(string(c.body), `"code":"transaction"`))
	}

	batch := `{"resourceType":"Bundle","type":"batch","entry":[
		{"resource":` + string(patientWith("ntx-2", "Batch")) + `,"request":{"method":"POST","url":"Patient"}}]}`
	if r := h.do("POST", "", []byte(batch)); r.status != http.StatusOK {
		t.Errorf("batch: %d %s", r.status, r.body)
	}

	crit := identQuery("ntx-3")
	if r := h.do("POST", "/Patient", patientWith("ntx-3", "Once"), "If-None-Exist", crit); r.status != http.StatusCreated {
		t.Fatalf("conditional create: %d %s", r.status, r.body)
	}
	if r := h.do("POST", "/Patient", patientWith("ntx-3", "Twice"), "If-None-Exist", crit); r.status != http.StatusOK {
		t.Errorf("conditional create with a match: %d, want 200; %s", r.status, r.body)
	}
	if r := h.do("PUT", "/Patient?"+crit, patientWith("ntx-3", "Updated")); r.status != http.StatusOK {
		t.Errorf("conditional update: %d %s", r.status, r.body)
	}
	if r := h.do("DELETE", "/Patient?"+crit, nil); r.status != http.StatusNoContent {
		t.Errorf("conditional delete: %d %s", r.status, r.body)
	}
	if ids := h.matchIDs(t, "Patient", crit); len(ids) != 0 {
		t.Errorf("after the conditional delete: %v", ids)
	}
}
