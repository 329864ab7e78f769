package storetest_test

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// store.BodyRewriter on the memStore, from the contract alone.

var _ store.BodyRewriter = (*memStore)(nil)

func checkAll(rs []store.Replacement) error {
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) RewriteBodies(ctx context.Context, rs []store.Replacement) (int, error) {
	if err := checkAll(rs); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := slices.Clone(s.versions) // snapshots share the old array
	applied := 0
	for _, r := range rs {
		for i := range vs {
			v := &vs[i]
			if v.Type == r.Type && v.ID == r.ID && v.Version.Version == r.Version && !v.Deleted && bytes.Equal(v.Body, r.Old) {
				v.Body = bytes.Clone(r.New)
				applied++
			}
		}
	}
	s.versions = vs
	return applied, nil
}

func (s *memStore) RewriteRecordValues(ctx context.Context, rs []store.Replacement) (int, error) {
	if err := checkAll(rs); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	applied := 0
	for _, r := range rs {
		k := [2]string{r.Type, r.ID}
		cur, ok := s.records[k]
		if ok && cur.Version == r.Version && bytes.Equal(cur.Value, r.Old) && recordLive(cur, time.Now()) {
			cur.Value = bytes.Clone(r.New)
			s.records[k] = cur
			applied++
		}
	}
	return applied, nil
}

func (s *memStore) RecordKinds(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	var kinds []string
	for k := range s.records {
		kinds = append(kinds, k[0])
	}
	slices.Sort(kinds)
	return slices.Compact(kinds), nil
}

func (s *memStore) CountVersions(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return int64(len(s.snapshot())), nil
}
