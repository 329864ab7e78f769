// Package authtest holds what the tests of the auth packages share: an
// in-memory store.Records and a key ring under a fresh random master key.
package authtest

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Records is an in-memory store.Records (expiry ignored: the tests'
// clocks stand still).
type Records struct {
	mu sync.Mutex
	m  map[string]store.Record
}

func (r *Records) GetRecord(_ context.Context, kind, id string) (*store.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.m[kind+"\x1f"+id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return &rec, nil
}

func (r *Records) PutRecord(_ context.Context, rec store.Record) error {
	if err := rec.Check(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.m[rec.Kind+"\x1f"+rec.ID]
	if (!ok && rec.Version != 1) || (ok && cur.Version != rec.Version-1) {
		return store.ErrConflict
	}
	r.m[rec.Kind+"\x1f"+rec.ID] = rec
	return nil
}

func (r *Records) ListRecords(_ context.Context, kind string) ([]*store.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*store.Record
	for _, rec := range r.m {
		if rec.Kind == kind {
			out = append(out, &rec)
		}
	}
	return out, nil
}

func (r *Records) DeleteRecord(_ context.Context, kind, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, kind+"\x1f"+id)
	return nil
}

// NewRecords returns empty records.
func NewRecords() *Records { return &Records{m: map[string]store.Record{}} }

// Keyring is a key ring of one fresh random master key.
func Keyring(tb testing.TB) *crypt.Keyring {
	tb.Helper()
	master := make([]byte, crypt.KeySize)
	if _, err := rand.Read(master); err != nil {
		tb.Fatal(err)
	}
	keyring, err := crypt.NewKeyring(map[uint32][]byte{1: master})
	if err != nil {
		tb.Fatal(err)
	}
	return keyring
}
