package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
)

// An encrypted partition's own keys live in its store, as one record
// (kind partitionKeysKind, id the partition's name) whose value is sealed
// under the master key: every server sharing the store uses the same
// keys, and a copy of the store without the master key opens nothing.
// docs/format/partition-keys.md describes the record.
const partitionKeysKind = "partition-keys"

// partitionKeysFormat is the version of the keys record this build
// writes. Version 1 had no "v" field and no current ids (the highest id
// of each ring was current); it is still read.
const partitionKeysFormat = 2

// The bounds of a key change (see Config.KeyViewTTL and KeyWriteTTL).
const (
	defaultKeyViewTTL = 15 * time.Second
	// defaultKeyWriteTTL is the HTTP request timeout (internal/httpserver,
	// 2 minutes), which bounds every write a server makes, plus a margin.
	defaultKeyWriteTTL = 2*time.Minute + 10*time.Second
)

// partitionKeys are an encrypted partition's keys, each ring by id. A
// key newer than its ring's current one is staged: it opens values and
// is looked up in the index, but seals and tags nothing yet.
type partitionKeys struct {
	// Format is partitionKeysFormat (0: version 1).
	Format int `json:"v,omitempty"`
	// Data is the ring that seals bodies and record values; DataCurrent
	// the id that seals (0: the highest).
	Data        map[uint32][]byte `json:"data"`
	DataCurrent uint32            `json:"data_current,omitempty"`
	// Blind is the ring of the blind index's tags, other keys than
	// Data's; BlindCurrent the id that tags (0: the highest).
	Blind        map[uint32][]byte `json:"blind"`
	BlindCurrent uint32            `json:"blind_current,omitempty"`
	// Claim keys the tags that name the platform's claim records (an EMP
	// id is never stored in the clear); it is never rotated, as the
	// claims are found by it.
	Claim []byte `json:"claim"`
	// ViewTTLMillis: a server's copy of this record seals, tags and looks
	// up tags for at most this long after it was read (0: the default).
	ViewTTLMillis int64 `json:"view_ttl_ms,omitempty"`
	// WriteTTLMillis: the longest a server's write takes from sealing to
	// commit (0: the default).
	WriteTTLMillis int64 `json:"write_ttl_ms,omitempty"`
}

// String, GoString and LogValue keep the keys out of any message.
func (k *partitionKeys) String() string {
	return fmt.Sprintf("partition keys (data %v current %d, blind %v current %d; redacted)",
		ringIDs(k.Data), k.dataCurrent(), ringIDs(k.Blind), k.blindCurrent())
}

func (k *partitionKeys) GoString() string     { return k.String() }
func (k *partitionKeys) LogValue() slog.Value { return slog.StringValue(k.String()) }

func ringIDs(ring map[uint32][]byte) []uint32 { return slices.Sorted(maps.Keys(ring)) }

func newestID(ring map[uint32][]byte) uint32 {
	var top uint32
	for id := range ring {
		top = max(top, id)
	}
	return top
}

func (k *partitionKeys) dataCurrent() uint32 {
	if k.DataCurrent != 0 {
		return k.DataCurrent
	}
	return newestID(k.Data)
}

func (k *partitionKeys) blindCurrent() uint32 {
	if k.BlindCurrent != 0 {
		return k.BlindCurrent
	}
	return newestID(k.Blind)
}

func (k *partitionKeys) viewTTL() time.Duration {
	if k.ViewTTLMillis > 0 {
		return time.Duration(k.ViewTTLMillis) * time.Millisecond
	}
	return defaultKeyViewTTL
}

func (k *partitionKeys) writeTTL() time.Duration {
	if k.WriteTTLMillis > 0 {
		return time.Duration(k.WriteTTLMillis) * time.Millisecond
	}
	return defaultKeyWriteTTL
}

// rings are the keys as the sealed store uses them.
func (k *partitionKeys) rings() (sealed.Rings, error) {
	data, err := crypt.NewKeyringWithCurrent(k.Data, k.dataCurrent())
	if err != nil {
		return sealed.Rings{}, err
	}
	blind, err := sealed.NewBlindKeysWithCurrent(k.Blind, k.blindCurrent())
	if err != nil {
		return sealed.Rings{}, err
	}
	return sealed.Rings{Data: data, Blind: blind, MaxAge: k.viewTTL()}, nil
}

// wipe clears the key bytes.
func (k *partitionKeys) wipe() {
	for _, ring := range []map[uint32][]byte{k.Data, k.Blind} {
		for _, key := range ring {
			clear(key)
		}
	}
	clear(k.Claim)
}

// keysAD binds the record's sealed value to its partition.
func keysAD(partition string) []byte { return []byte("kiln partition keys\x00" + partition) }

func randomKey() []byte {
	k := make([]byte, crypt.KeySize)
	rand.Read(k) // never fails (crypto/rand, Go ≥ 1.24)
	return k
}

// keyTimings are the bounds a new keys record is written with.
type keyTimings struct{ view, write time.Duration }

// loadPartitionKeys reads the partition's keys from rec, creating them at
// the first start (a compare-and-swap: servers starting together agree on
// one set). It returns the record's version, for rotations.
func loadPartitionKeys(ctx context.Context, rec store.Records, master *crypt.Keyring, partition string, t keyTimings) (*partitionKeys, int64, error) {
	for range 3 {
		keys, version, err := readPartitionKeys(ctx, rec, master, partition)
		if errors.Is(err, store.ErrNotFound) {
			keys = &partitionKeys{Format: partitionKeysFormat, Data: map[uint32][]byte{1: randomKey()}, DataCurrent: 1,
				Blind: map[uint32][]byte{1: randomKey()}, BlindCurrent: 1, Claim: randomKey(),
				ViewTTLMillis: t.view.Milliseconds(), WriteTTLMillis: t.write.Milliseconds()}
			err = putPartitionKeys(ctx, rec, master, partition, keys, 1)
			if errors.Is(err, store.ErrConflict) {
				continue // another server created them first
			}
			return keys, 1, err
		}
		return keys, version, err
	}
	return nil, 0, fmt.Errorf("the %s partition's keys: concurrent changes; retry", partition)
}

// readPartitionKeys reads the partition's keys record (store.ErrNotFound
// when there is none yet) and its version.
func readPartitionKeys(ctx context.Context, rec store.Records, master *crypt.Keyring, partition string) (*partitionKeys, int64, error) {
	r, err := rec.GetRecord(ctx, partitionKeysKind, partition)
	if err != nil {
		return nil, 0, err
	}
	plain, err := master.Open(r.Value, keysAD(partition))
	if err != nil {
		return nil, 0, fmt.Errorf("the %s partition's keys do not open with the master key: %w", partition, err)
	}
	defer clear(plain)
	var keys partitionKeys
	if err := json.Unmarshal(plain, &keys); err != nil {
		// json's errors quote no input bytes of a syntax error, but a
		// type error may name a value: say only where it failed.
		return nil, 0, fmt.Errorf("the %s partition's keys record (version %d) is not valid JSON", partition, r.Version)
	}
	if keys.Format > partitionKeysFormat {
		keys.wipe()
		return nil, 0, fmt.Errorf("the %s partition's keys record has format %d, newer than this build reads (%d): upgrade every server first", partition, keys.Format, partitionKeysFormat)
	}
	return &keys, r.Version, nil
}

// putPartitionKeys stores keys as version of the record.
func putPartitionKeys(ctx context.Context, rec store.Records, master *crypt.Keyring, partition string, keys *partitionKeys, version int64) error {
	keys.Format = partitionKeysFormat
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

// updatePartitionKeys applies change to the keys record, a
// compare-and-swap retried when another writer got there first; change
// may be called more than once, on the keys as they are then. It returns
// the keys as stored.
func updatePartitionKeys(ctx context.Context, rec store.Records, master *crypt.Keyring, partition string, change func(*partitionKeys) error) (*partitionKeys, error) {
	for range 5 {
		keys, version, err := readPartitionKeys(ctx, rec, master, partition)
		if err != nil {
			return nil, err
		}
		if err := change(keys); err != nil {
			return nil, err
		}
		err = putPartitionKeys(ctx, rec, master, partition, keys, version+1)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return keys, nil
	}
	return nil, fmt.Errorf("the %s partition's keys changed under every attempt to update them; retry", partition)
}

// partitionKeySource loads the sealed store's rings from the keys record,
// as the store asks (sealed.LoadKeys).
func partitionKeySource(rec store.Records, master *crypt.Keyring, partition string) func(context.Context) (sealed.Rings, error) {
	return func(ctx context.Context) (sealed.Rings, error) {
		keys, _, err := readPartitionKeys(ctx, rec, master, partition)
		if err != nil {
			return sealed.Rings{}, err
		}
		defer keys.wipe() // the rings keep their own copies
		return keys.rings()
	}
}

// sealStore wraps a partition's store in sealed: bodies and record values
// encrypted under the partition's data keys, the index blinded, and
// only server-assigned ids accepted (an id is stored in the clear).
func sealStore(st Store, partition string, keys *sealed.Keys) (Store, error) {
	s, err := sealed.New(st, sealed.Config{Partition: partition, Keys: keys, OnlyOpaqueIDs: true})
	if err != nil {
		return nil, err
	}
	out, ok := s.(Store)
	if !ok {
		return nil, fmt.Errorf("the sealed %s store lacks a capability the server needs", partition)
	}
	return out, nil
}
