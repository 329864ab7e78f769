package fhirserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// IndexVersion is the version of the definition of the index rows this
// code writes and queries: the string fold's (search.FoldVersion). A
// store whose rows were built by an older one must be reindexed before
// its string searches can be trusted.
const IndexVersion = search.FoldVersion

// The record that says which IndexVersion built a store's index rows.
const (
	indexRecordKind = "search-index"
	indexRecordID   = "version"
)

// indexStore is what reading and recording the index version needs.
type indexStore interface {
	store.Searcher
	store.Records
}

// StoredIndexVersion is the IndexVersion that built st's index rows: the
// recorded one; without a record, 1 (the version before versions were
// recorded) if st holds any resource, else 0 (a new store, no rows yet).
func StoredIndexVersion(ctx context.Context, st indexStore) (int, error) {
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

// RecordIndexVersion records that v built st's index rows.
func RecordIndexVersion(ctx context.Context, st store.Records, v int) error {
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

// MarkNewIndex records IndexVersion on a store that has no version record
// and no resource yet, so that the rows written from now on are known to
// be current. A store with resources but no record keeps reading as
// version 1.
func MarkNewIndex(ctx context.Context, st indexStore) error {
	v, err := StoredIndexVersion(ctx, st)
	if err != nil || v != 0 {
		return err
	}
	return RecordIndexVersion(ctx, st, IndexVersion)
}

// StaleIndexError is the refusal to serve a store whose index rows were
// built by another IndexVersion.
type StaleIndexError struct{ Stored, Current int }

func (e *StaleIndexError) Error() string {
	if e.Stored > e.Current {
		return fmt.Sprintf("the search index of this store was built by a newer kiln (index version %d; this one knows %d): run that version, or reindex with this one (kiln admin reindex)", e.Stored, e.Current)
	}
	return fmt.Sprintf("the search index of this store was built by an older kiln (index version %d, this one is %d: strings are folded differently, so searches would miss resources); run kiln admin reindex on this store, which prints progress and records the new version, then start again", e.Stored, e.Current)
}

// CheckIndexVersion reports a *StaleIndexError unless st's index rows were
// built by this IndexVersion (or st is new).
func CheckIndexVersion(ctx context.Context, st indexStore) error {
	v, err := StoredIndexVersion(ctx, st)
	if err != nil {
		return err
	}
	if v != 0 && v != IndexVersion {
		return &StaleIndexError{Stored: v, Current: IndexVersion}
	}
	return nil
}
