package fhirserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// reindexPage is how many resources one reindex step extracts and writes
// in one store transaction.
const reindexPage = 500

// reindexWritten re-extracts the rows of a version just written, whose rows
// were extracted before a SearchParameter was activated and committed after
// (the store's write is not where extraction happens): a $reindex started
// in between could have passed it already. The store skips it if a newer
// version has been written since.
func (s *Server) reindexWritten(ctx context.Context, w store.Write) error {
	ix, ok := s.store.(store.Indexer)
	if !ok || w.Index == nil {
		return nil
	}
	rows, err := s.indexRows(ctx, w.Type, w.Body)
	if err != nil {
		return err
	}
	_, err = ix.Reindex(ctx, []store.IndexUpdate{{Type: w.Type, ID: w.ID, Version: w.Version, Rows: rows}})
	return err
}

// Reindex re-extracts the index rows of every current resource of the
// given types (all types when none), so that search parameters added since
// they were written find them. progress, when set, is called after each
// step with the number of resources reindexed so far. Resources written
// concurrently are skipped: their new versions carry fresh rows already.
func (s *Server) Reindex(ctx context.Context, types []string, progress func(done int64)) (int64, error) {
	ix, ok := s.store.(store.Indexer)
	if !ok {
		return 0, outcome.New(http.StatusNotImplemented, "not-supported", "this store cannot rebuild its search index")
	}
	if len(types) == 0 {
		types = profiles.ResourceTypes()
	}
	var done int64
	for _, t := range types {
		cursor := ""
		for {
			page, err := s.reindexPage(ctx, ix, t, cursor, reindexPage, time.Time{})
			done += int64(page.Applied)
			if err != nil {
				return done, err
			}
			if progress != nil {
				progress(done)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}
	return done, nil
}

// ReindexStep is what one page of ReindexPage did.
type ReindexStep struct {
	// Next continues with the type's next page ("" after the last).
	Next string
	// Seen counts the resources of the page; Applied those whose rows
	// were replaced (the others were written meanwhile, with fresh rows).
	Seen, Applied int
}

// ReindexPage is one step of Reindex: the rows of up to count current
// resources of typ, from the store's search cursor ("" for the first
// page). A job that must survive a restart keeps Next and carries on
// from it (a blind-index rebuild after a key rotation), with the same
// arguments. With updatedBefore set, only resources last updated before
// it are reindexed: a job whose later writes carry fresh rows need not
// chase them (a store that pages by creation order would otherwise never
// reach the end while creates keep coming).
func (s *Server) ReindexPage(ctx context.Context, typ, cursor string, count int, updatedBefore time.Time) (ReindexStep, error) {
	ix, ok := s.store.(store.Indexer)
	if !ok {
		return ReindexStep{}, outcome.New(http.StatusNotImplemented, "not-supported", "this store cannot rebuild its search index")
	}
	return s.reindexPage(ctx, ix, typ, cursor, count, updatedBefore)
}

func (s *Server) reindexPage(ctx context.Context, ix store.Indexer, typ, cursor string, count int, updatedBefore time.Time) (ReindexStep, error) {
	q := &search.Query{Types: []string{typ}, Count: count, Cursor: cursor}
	if !updatedBefore.IsZero() {
		us := updatedBefore.UnixMicro()
		q.Where = []search.Clause{{Param: "_lastUpdated", Any: []search.Match{{Op: search.OpDate, Param: "_lastUpdated", Cmp: search.CmpLt, Low: us, High: us + 1}}}}
	}
	page, err := s.store.Search(ctx, q)
	if err != nil {
		return ReindexStep{}, err
	}
	updates := make([]store.IndexUpdate, 0, len(page.Matches))
	for _, v := range page.Matches {
		rows, err := s.indexRows(ctx, v.Type, v.Body)
		if err != nil {
			return ReindexStep{}, errors.Join(errors.New("reindex "+v.Type+"/"+v.ID), err)
		}
		updates = append(updates, store.IndexUpdate{Type: v.Type, ID: v.ID, Version: v.Version, Rows: rows})
	}
	n, err := ix.Reindex(ctx, updates)
	if err != nil {
		return ReindexStep{}, err
	}
	return ReindexStep{Next: page.Next, Seen: len(page.Matches), Applied: n}, nil
}

// ReindexOp is POST [base]/$reindex and POST [base]/[type]/$reindex. It
// runs within the request; a large store is better reindexed offline with
// kiln admin reindex, which reports progress.
func (c *Call) ReindexOp() (Response, error) {
	if err := c.Authorize(Access{Interaction: Operation, Operation: "$reindex", Type: c.typ}); err != nil {
		return Response{}, err
	}
	if _, inTx := txFrom(c.ctx); inTx {
		// It writes in steps of its own, which would wait for the
		// transaction's writer until the request times out.
		return Response{}, outcome.New(http.StatusBadRequest, "not-supported", "$reindex cannot be an entry of a transaction Bundle")
	}
	var types []string
	if c.typ != "" {
		types = []string{c.typ}
	}
	n, err := c.s.Reindex(c.ctx, types, nil)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: http.StatusOK, Body: []byte(`{"resourceType":"Parameters","parameter":[{"name":"reindexed","valueInteger":` + strconv.FormatInt(n, 10) + `}]}`)}, nil
}
