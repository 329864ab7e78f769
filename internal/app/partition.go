package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
)

// An encrypted partition's own keys live in its store, as one record
// (kind partitionKeysKind, id the partition's name) whose value is sealed
// under the master key: every server sharing the store uses the same
// keys, and a copy of the store without the master key opens nothing.
const partitionKeysKind = "partition-keys"

// partitionKeys are an encrypted partition's keys, each ring by id (the
// highest seals or tags).
type partitionKeys struct {
	// Data is the ring that seals bodies and record values.
	Data map[uint32][]byte `json:"data"`
	// Blind is the ring of the blind index's tags: other keys than Data's.
	Blind map[uint32][]byte `json:"blind"`
	// Claim keys the tags that name the platform's claim records (an EMP
	// id is never stored in the clear); it is never rotated, as the
	// claims are found by it.
	Claim []byte `json:"claim"`
}

// keysAD binds the record's sealed value to its partition.
func keysAD(partition string) []byte { return []byte("kiln partition keys\x00" + partition) }

func randomKey() []byte {
	k := make([]byte, crypt.KeySize)
	rand.Read(k) // never fails (crypto/rand, Go ≥ 1.24)
	return k
}

// loadPartitionKeys reads the partition's keys from rec, creating them at
// the first start (a compare-and-swap: servers starting together agree on
// one set). It returns the record's version, for rotations.
func loadPartitionKeys(ctx context.Context, rec store.Records, master *crypt.Keyring, partition string) (*partitionKeys, int64, error) {
	for range 3 {
		r, err := rec.GetRecord(ctx, partitionKeysKind, partition)
		if errors.Is(err, store.ErrNotFound) {
			keys := &partitionKeys{Data: map[uint32][]byte{1: randomKey()}, Blind: map[uint32][]byte{1: randomKey()}, Claim: randomKey()}
			err = putPartitionKeys(ctx, rec, master, partition, keys, 1)
			if errors.Is(err, store.ErrConflict) {
				continue // another server created them first
			}
			return keys, 1, err
		}
		if err != nil {
			return nil, 0, err
		}
		plain, err := master.Open(r.Value, keysAD(partition))
		if err != nil {
			return nil, 0, fmt.Errorf("the %s partition's keys do not open with the master key: %w", partition, err)
		}
		var keys partitionKeys
		if err := json.Unmarshal(plain, &keys); err != nil {
			return nil, 0, fmt.Errorf("the %s partition's keys: %w", partition, err)
		}
		clear(plain)
		return &keys, r.Version, nil
	}
	return nil, 0, fmt.Errorf("the %s partition's keys: concurrent changes; retry", partition)
}

// putPartitionKeys stores keys as version of the record.
func putPartitionKeys(ctx context.Context, rec store.Records, master *crypt.Keyring, partition string, keys *partitionKeys, version int64) error {
	plain, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	value, err := master.Seal(plain, keysAD(partition))
	clear(plain)
	if err != nil {
		return err
	}
	return rec.PutRecord(ctx, store.Record{Kind: partitionKeysKind, ID: partition, Version: version, Value: value})
}

// sealStore wraps a partition's store in sealed: bodies and record values
// encrypted under the partition's data keys, the index blinded, and
// only server-assigned ids accepted (an id is stored in the clear).
func sealStore(st Store, partition string, keys *partitionKeys) (Store, error) {
	ring, err := crypt.NewKeyring(keys.Data)
	if err != nil {
		return nil, err
	}
	blind, err := sealed.NewBlindKeys(keys.Blind)
	if err != nil {
		return nil, err
	}
	s, err := sealed.New(st, sealed.Config{Partition: partition, Keyring: ring, Blind: blind, OnlyOpaqueIDs: true})
	if err != nil {
		return nil, err
	}
	out, ok := s.(Store)
	if !ok {
		return nil, fmt.Errorf("the sealed %s store lacks a capability the server needs", partition)
	}
	return out, nil
}
