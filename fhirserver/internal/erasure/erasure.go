// Package erasure erases a patient for the right to erasure: every
// version of the Patient anonymized, and every resource of its compartment
// scrubbed of identifying copies, in one store transaction where the
// store has them. The policy (what identifies someone) comes from the
// caller; this package is the mechanism over the store. What a new
// version is (its meta, its index rows) is the FHIR service's to say, so
// it is handed in (Eraser.Next).
package erasure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Policy is how a patient is erased: which elements identify someone.
type Policy struct {
	// Anonymize returns the erased form of one version of the Patient.
	// It must keep id and meta, and be idempotent: a version is erased
	// when anonymizing it changes nothing.
	Anonymize func(res map[string]any) map[string]any
	// Scrub returns a resource that references the patient (ref is
	// "Patient/<id>") without its identifying copies, and whether it
	// changed anything.
	Scrub func(res map[string]any, ref string) (map[string]any, bool)
}

// Result is what an erasure did.
type Result struct {
	At      time.Time // when the patient was erased
	Already bool      // the current version was already erased
}

// Eraser erases patients from one store, through what the FHIR service
// says a write is.
type Eraser struct {
	Store store.Store
	// Transact runs fn in a store transaction, or in the one ctx already
	// runs in (InTx).
	Transact func(ctx context.Context, fn func(store.Tx) error) error
	// InTx reports whether ctx runs in a caller's transaction.
	InTx func(ctx context.Context) bool
	// Next is the version after cur with body: stamped (versionId,
	// lastUpdated) and with its index rows.
	Next func(ctx context.Context, cur *store.Version, body []byte) (store.Write, error)
	// Compartment is the resource types of the Patient compartment of id
	// other than Patient, and the membership test of each.
	Compartment func(id string) (types []string, members []search.Match)
	Logger      *slog.Logger
}

// erasePage bounds the referencing resources read at once.
const erasePage = 200

// Patient erases Patient/id for the right to erasure, in one store
// transaction where the store has them (otherwise step by step, the
// identifying current version first):
//   - a new version of the Patient, anonymized, with its index rows (so a
//     search by the old name, phone or email finds nothing);
//   - every earlier version of it rewritten anonymized in place, so that
//     history holds no identifying data;
//   - every resource of the Patient compartment that references it (and
//     each of their earlier versions) scrubbed of identifying copies, its
//     clinical content kept.
//
// A patient already erased (anonymizing the current version changes
// nothing) keeps its erasure time, and the history and references are
// checked again, which finishes an erasure cut short on a store without
// transactions; only what still identifies the patient is rewritten.
// A deleted Patient's history is erased too; its time is the deletion's.
//
// The writes are not checked against profiles: an anonymized Patient no
// longer has what the national profile requires. It is authorized by the
// caller (the platform endpoint's policy), not as a FHIR interaction.
// Unknown: a 404 outcome.
func (er *Eraser) Patient(ctx context.Context, id string, p Policy) (Result, error) {
	var out Result
	err := er.Transact(ctx, func(tx store.Tx) error {
		out = Result{}
		return er.erase(ctx, tx, id, p, &out)
	})
	if errors.Is(err, store.ErrTransactionsUnsupported) {
		err = er.erase(ctx, er.Store, id, p, &out)
	}
	if err == nil {
		err = er.forget(ctx)
	}
	return out, err
}

// forget has the store remove, from its own files, the copies of what the
// erasure replaced (store.Forgetter: the SQLite WAL's frames), before the
// erasure is reported done. Inside a caller's transaction that is the
// caller's to do after its commit. A failure is a 503: the erasure is
// committed, and repeating it (which finds nothing left to anonymize)
// runs forget again.
func (er *Eraser) forget(ctx context.Context) error {
	f, ok := er.Store.(store.Forgetter)
	if !ok || er.InTx(ctx) {
		return nil
	}
	if err := f.Forget(ctx); err != nil {
		er.Logger.ErrorContext(ctx, "erasure: the store kept copies of the erased data", "err", err)
		return outcome.New(http.StatusServiceUnavailable, "transient",
			"the patient was anonymized, but the database files could not yet be cleared of the old copies; repeat the erasure")
	}
	return nil
}

// rewriterOf is the store's in-place rewrite where tx offers it.
func rewriterOf(tx store.Tx) (store.Rewriter, error) {
	rw, ok := tx.(store.Rewriter)
	if !ok {
		return nil, outcome.New(http.StatusNotImplemented, "not-supported", "this store cannot rewrite history, which erasure needs")
	}
	return rw, nil
}

// edited applies edit to a decoded copy of body and reports whether it
// changed anything, and the new body.
func edited(body []byte, edit func(map[string]any) map[string]any) ([]byte, bool, error) {
	before, err := decodeResource(body)
	if err != nil {
		return nil, false, err
	}
	res, err := decodeResource(body)
	if err != nil {
		return nil, false, err
	}
	after := edit(res)
	if reflect.DeepEqual(before, after) {
		return nil, false, nil
	}
	out, err := json.Marshal(after)
	return out, true, err
}

func (er *Eraser) erase(ctx context.Context, tx store.Tx, id string, e Policy, out *Result) error {
	rw, err := rewriterOf(tx)
	if err != nil {
		return err
	}
	cur, err := tx.Read(ctx, "Patient", id)
	if errors.Is(err, store.ErrNotFound) {
		return outcome.New(http.StatusNotFound, "not-found", "Patient/"+id+" is not known")
	}
	if err != nil {
		return err
	}
	out.At = cur.LastUpdated
	if !cur.Deleted {
		// The current version first: once it is written, searches no
		// longer find the patient by what identified them.
		anon, changed, err := edited(cur.Body, e.Anonymize)
		if err != nil {
			return err
		}
		out.Already = !changed
		if changed {
			w, err := er.Next(ctx, cur, anon)
			if err != nil {
				return err
			}
			if err := tx.Put(ctx, w); err != nil {
				return err
			}
			out.At = w.LastUpdated
		}
	}
	if err := er.rewriteHistory(ctx, tx, rw, "Patient", id, e.Anonymize); err != nil {
		return err
	}
	ref := "Patient/" + id
	return er.scrubReferences(ctx, tx, rw, id, func(res map[string]any) map[string]any {
		res, _ = e.Scrub(res, ref)
		return res
	})
}

// rewriteHistory rewrites in place every earlier (non-current) version of
// typ/id that edit changes. The current version is left to the caller.
func (er *Eraser) rewriteHistory(ctx context.Context, tx store.Tx, rw store.Rewriter, typ, id string, edit func(map[string]any) map[string]any) error {
	q := store.HistoryQuery{Type: typ, ID: id, Count: erasePage}
	first := true
	for {
		page, err := tx.History(ctx, q)
		if err != nil {
			return err
		}
		for i, v := range page.Versions {
			if (first && i == 0) || v.Deleted { // newest first: the current version
				continue
			}
			body, changed, err := edited(v.Body, edit)
			if err != nil {
				return err
			}
			if !changed {
				continue
			}
			if err := rw.Rewrite(ctx, store.Write{Type: typ, ID: id, Version: v.Version, LastUpdated: v.LastUpdated, Method: v.Method, Body: body}); err != nil {
				return fmt.Errorf("erase: rewrite %s/%s/_history/%d: %w", typ, id, v.Version, err)
			}
		}
		first = false
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
}

// scrubReferences edits every resource of the patient's compartment (other
// than the Patient): a new version when the current one changes, and its
// earlier versions rewritten in place. Resources that referenced the
// patient only in earlier versions, or that are deleted, are not found.
func (er *Eraser) scrubReferences(ctx context.Context, tx store.Tx, rw store.Rewriter, id string, edit func(map[string]any) map[string]any) error {
	types, members := er.Compartment(id)
	// Collect first: the writes below change what the search would page
	// through.
	var found []*store.Version
	q := &search.Query{Types: types, Count: erasePage, Where: []search.Clause{{Param: "_compartment", Any: members}}}
	for {
		page, err := tx.Search(ctx, q)
		if err != nil {
			return err
		}
		found = append(found, page.Matches...)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	for _, cur := range found {
		body, changed, err := edited(cur.Body, edit)
		if err != nil {
			return err
		}
		if changed {
			w, err := er.Next(ctx, cur, body)
			if err != nil {
				return err
			}
			if err := tx.Put(ctx, w); err != nil {
				return err
			}
		}
		if err := er.rewriteHistory(ctx, tx, rw, cur.Type, cur.ID, edit); err != nil {
			return err
		}
	}
	return nil
}

// decodeResource decodes a stored body as the service does.
func decodeResource(body []byte) (map[string]any, error) {
	res, err := fhirjson.Decode(body)
	if err != nil {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "the resource is not a JSON object: "+err.Error())
	}
	return res, nil
}
