// Package indexversion records which definition of the search index rows
// built a store's rows (the string fold's version), so that a server
// refuses to serve a store whose string searches would miss resources
// until it is reindexed.
package indexversion

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Current is the version of the definition of the index rows this code
// writes and queries: the string fold's (search.FoldVersion). A store
// whose rows were built by an older one must be reindexed before its
// string searches can be trusted.
const Current = search.FoldVersion

// The record that says which index version built a store's index rows.
const (
	indexRecordKind = "search-index"
	indexRecordID   = "version"
)

// indexStore is what reading and recording the index version needs.
type indexStore interface {
	store.Searcher
	store.Records
}

// Stored is the index version that built st's index rows: the
// recorded one; without a record, 1 (the version before versions were
// recorded) if st holds any resource, else 0 (a new store, no rows yet).
func Stored(ctx context.Context, st indexStore) (int, error) {
	rec, err := st.GetRecord(ctx, indexRecordKind, indexRecordID)
	switch {
	case err == nil:
		v, err := strconv.Atoi(string(rec.Value))
		if err != nil || v < 1 {
			return 0, fmt.Errorf("the search index version record holds %q, not a version", rec.Value)
		}
		return v, nil
	case !errors.Is(err, store.ErrNotFound):
		return 0, fmt.Errorf("reading the search index version: %w", err)
	}
	page, err := st.Search(ctx, &search.Query{Count: 1})
	if err != nil {
		return 0, fmt.Errorf("looking for resources: %w", err)
	}
	if len(page.Matches) > 0 {
		return 1, nil
	}
	return 0, nil
}

// Record records that v built st's index rows.
func Record(ctx context.Context, st store.Records, v int) error {
	for range 3 { // a conflict is another instance recording too
		var next int64 = 1
		rec, err := st.GetRecord(ctx, indexRecordKind, indexRecordID)
		switch {
		case err == nil:
			if cur, err := strconv.Atoi(string(rec.Value)); err == nil && cur == v {
				return nil
			}
			next = rec.Version + 1
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("reading the search index version: %w", err)
		}
		err = st.PutRecord(ctx, store.Record{Kind: indexRecordKind, ID: indexRecordID, Version: next, Value: []byte(strconv.Itoa(v))})
		if !errors.Is(err, store.ErrConflict) {
			if err != nil {
				return fmt.Errorf("recording the search index version: %w", err)
			}
			return nil
		}
	}
	return errors.New("recording the search index version: conflicting writers")
}

// MarkNew records Current on a store that has no version record
// and no resource yet, so that the rows written from now on are known to
// be current. A store with resources but no record keeps reading as
// version 1.
func MarkNew(ctx context.Context, st indexStore) error {
	v, err := Stored(ctx, st)
	if err != nil || v != 0 {
		return err
	}
	return Record(ctx, st, Current)
}

// StaleError is the refusal to serve a store whose index rows were
// built by another index version.
type StaleError struct{ Stored, Current int }

func (e *StaleError) Error() string {
	if e.Stored > e.Current {
		return fmt.Sprintf("the search index of this store was built by a newer kiln (index version %d; this one knows %d): run that version, or reindex with this one (kiln admin reindex)", e.Stored, e.Current)
	}
	return fmt.Sprintf("the search index of this store was built by an older kiln (index version %d, this one is %d: strings are folded differently, so searches would miss resources); run kiln admin reindex on this store, which prints progress and records the new version, then start again", e.Stored, e.Current)
}

// Check reports a *StaleError unless st's index rows were
// built by Current (or st is new).
func Check(ctx context.Context, st indexStore) error {
	v, err := Stored(ctx, st)
	if err != nil {
		return err
	}
	if v != 0 && v != Current {
		return &StaleError{Stored: v, Current: Current}
	}
	return nil
}
