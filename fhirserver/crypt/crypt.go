// Package crypt is Kiln's encryption at rest: envelope AES-256-GCM under
// versioned master keys (DESIGN.md "Security").
//
// Every Seal draws a fresh random 32-byte data key, encrypts the plaintext
// with it (AES-256-GCM, random nonce, the caller's additional data bound)
// and wraps the data key with the current master key (AES-256-GCM, random
// nonce). Rotation adds a master key with a higher id: it seals from then
// on, the older ones still open, and Rewrap moves a sealed value to the
// current key by re-wrapping its data key alone, so a background job can
// rotate without the values' additional data and without re-encrypting
// them.
//
// # Sealed format (version 1)
//
//	offset  size  field
//	0       1     format version, 1
//	1       4     master key id, big endian
//	5       12    wrap nonce
//	17      48    wrapped data key (32-byte key + 16-byte GCM tag)
//	65      12    data nonce
//	77      ≥16   ciphertext of the plaintext + 16-byte GCM tag
//
// The key wrap authenticates bytes 0..4 (version and key id), so a value
// cannot be moved to another key id; the data encryption authenticates the
// format version and the caller's additional data. A master key is never
// used directly: the wrapping key is derived from it with HKDF-SHA256.
//
// # Master keys
//
// A master key is 32 random bytes with an id (1 … 2³²-1). LoadKeyring
// reads them from the KILN_MASTER_KEY environment variable or from the
// file <data>/master.key, which it creates on first start. Both hold
// entries "id:base64" (the environment also accepts one bare base64 key,
// id 1); the highest id is the current key.
package crypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// KeySize is the size of a master key and of a data key.
const KeySize = 32

const (
	formatV1  = 1
	nonceSize = 12 // the GCM standard nonce
	tagSize   = 16

	headerSize     = 1 + 4
	wrappedKeySize = KeySize + tagSize
	dataNonceAt    = headerSize + nonceSize + wrappedKeySize // 65
	ciphertextAt   = dataNonceAt + nonceSize                 // 77
	// Overhead is how many bytes Seal adds to a plaintext.
	Overhead = ciphertextAt + tagSize
)

// Domain separation: the HKDF info of the wrapping key, and the prefix of
// the additional data of each encryption.
const (
	wrapKeyInfo  = "kiln/crypt v1: data key wrapping"
	wrapADPrefix = "kiln/crypt v1: wrap\x00"
	dataADPrefix = "kiln/crypt v1: data\x00"
)

// Errors of Open and Rewrap, matched with errors.Is. Messages never hold
// key material or plaintext.
var (
	// ErrMalformed: not a sealed value of a known format (or truncated).
	ErrMalformed = errors.New("crypt: malformed sealed value")
	// ErrUnknownKey: sealed under a master key id the keyring lacks.
	ErrUnknownKey = errors.New("crypt: unknown master key id")
	// ErrOpen: authentication failed: the value was altered, the
	// additional data differs, or the key with that id is another key.
	ErrOpen = errors.New("crypt: cannot open sealed value (tampered, wrong key or wrong additional data)")
)

// Keyring holds the master keys; the current one seals (the highest id,
// unless NewKeyringWithCurrent named another), all open. It is immutable
// and safe for concurrent use.
type Keyring struct {
	wrap    map[uint32]cipher.AEAD // id → AEAD of the derived wrapping key
	current uint32
}

// NewKeyring builds a keyring from master keys by id (ids ≥ 1, keys of
// KeySize bytes). The keys are copied.
func NewKeyring(keys map[uint32][]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("crypt: a keyring needs at least one master key")
	}
	k := &Keyring{wrap: make(map[uint32]cipher.AEAD, len(keys))}
	for id, key := range keys {
		if id == 0 {
			return nil, errors.New("crypt: master key id 0 is reserved; ids start at 1")
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("crypt: master key %d is %d bytes, want %d", id, len(key), KeySize)
		}
		wk, err := hkdf.Key(sha256.New, key, nil, wrapKeyInfo, KeySize)
		if err != nil {
			return nil, fmt.Errorf("crypt: derive the wrapping key of master key %d: %w", id, err)
		}
		aead, err := newAEAD(wk)
		clear(wk)
		if err != nil {
			return nil, err
		}
		k.wrap[id] = aead
		k.current = max(k.current, id)
	}
	return k, nil
}

// NewKeyringWithCurrent is NewKeyring with the key that seals named:
// current must be one of keys' ids, and keys with higher ids open but do
// not seal. A rotation stages a new key this way, so that every reader
// knows it before anything is sealed under it.
func NewKeyringWithCurrent(keys map[uint32][]byte, current uint32) (*Keyring, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("crypt: the current master key id %d is not in the keyring", current)
	}
	k, err := NewKeyring(keys)
	if err != nil {
		return nil, err
	}
	k.current = current
	return k, nil
}

// CurrentID is the id of the master key that seals.
func (k *Keyring) CurrentID() uint32 { return k.current }

// IDs lists the ids of the keyring's master keys, ascending.
func (k *Keyring) IDs() []uint32 {
	ids := make([]uint32, 0, len(k.wrap))
	for id := range k.wrap {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("crypt: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("crypt: %w", err)
	}
	return aead, nil
}

// Seal encrypts plaintext under a fresh data key wrapped with the current
// master key, binding aad (which Open must be given again; it is not
// stored). The result is Overhead bytes longer than plaintext.
func (k *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	dataKey := make([]byte, KeySize)
	defer clear(dataKey)
	rand.Read(dataKey) // never fails (crypto/rand, Go ≥ 1.24)
	out := make([]byte, ciphertextAt, Overhead+len(plaintext))
	out[0] = formatV1
	binary.BigEndian.PutUint32(out[1:headerSize], k.current)
	if err := k.wrapInto(out, dataKey); err != nil {
		return nil, err
	}
	rand.Read(out[dataNonceAt:ciphertextAt])
	data, err := newAEAD(dataKey)
	if err != nil {
		return nil, err
	}
	return data.Seal(out, out[dataNonceAt:ciphertextAt], plaintext, dataAD(aad)), nil
}

// wrapInto fills sealed[5:65] (wrap nonce, wrapped key) with dataKey
// wrapped under the master key whose id sealed[1:5] holds.
func (k *Keyring) wrapInto(sealed, dataKey []byte) error {
	id := binary.BigEndian.Uint32(sealed[1:headerSize])
	aead, ok := k.wrap[id]
	if !ok {
		return fmt.Errorf("crypt: master key %d: %w", id, ErrUnknownKey)
	}
	nonce := sealed[headerSize : headerSize+nonceSize]
	rand.Read(nonce)
	wrapped := aead.Seal(nil, nonce, dataKey, wrapAD(sealed[:headerSize]))
	copy(sealed[headerSize+nonceSize:dataNonceAt], wrapped)
	return nil
}

// Open authenticates and decrypts a value Seal returned, given the same
// aad. A value altered in any way, sealed with other additional data or
// under a key the keyring lacks is an error (ErrMalformed, ErrUnknownKey
// or ErrOpen).
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	dataKey, err := k.unwrap(sealed)
	if err != nil {
		return nil, err
	}
	defer clear(dataKey)
	data, err := newAEAD(dataKey)
	if err != nil {
		return nil, err
	}
	plain, err := data.Open(nil, sealed[dataNonceAt:ciphertextAt], sealed[ciphertextAt:], dataAD(aad))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// unwrap checks the format and returns the data key of sealed.
func (k *Keyring) unwrap(sealed []byte) ([]byte, error) {
	id, err := SealedKeyID(sealed)
	if err != nil {
		return nil, err
	}
	aead, ok := k.wrap[id]
	if !ok {
		return nil, fmt.Errorf("crypt: master key %d: %w", id, ErrUnknownKey)
	}
	dataKey, err := aead.Open(nil, sealed[headerSize:headerSize+nonceSize], sealed[headerSize+nonceSize:dataNonceAt], wrapAD(sealed[:headerSize]))
	if err != nil {
		return nil, ErrOpen
	}
	return dataKey, nil
}

// Rewrap returns sealed with its data key wrapped under the current master
// key; the data nonce and ciphertext are unchanged, so the caller needs
// neither the plaintext nor the additional data. A value already under the
// current key comes back as an identical copy. Rewrap authenticates the
// wrapped key but not the ciphertext (that needs the additional data):
// Open still detects any alteration of the latter.
func (k *Keyring) Rewrap(sealed []byte) ([]byte, error) {
	dataKey, err := k.unwrap(sealed)
	if err != nil {
		return nil, err
	}
	defer clear(dataKey)
	out := slices.Clone(sealed)
	if binary.BigEndian.Uint32(out[1:headerSize]) == k.current {
		return out, nil
	}
	binary.BigEndian.PutUint32(out[1:headerSize], k.current)
	if err := k.wrapInto(out, dataKey); err != nil {
		return nil, err
	}
	return out, nil
}

// SealedKeyID reports the id of the master key a sealed value is wrapped
// under (without authenticating it), so a rotation job can pick the values
// that need Rewrap.
func SealedKeyID(sealed []byte) (uint32, error) {
	if len(sealed) < Overhead {
		return 0, fmt.Errorf("%w: %d bytes, the minimum is %d", ErrMalformed, len(sealed), Overhead)
	}
	if sealed[0] != formatV1 {
		return 0, fmt.Errorf("%w: unknown format version %d", ErrMalformed, sealed[0])
	}
	return binary.BigEndian.Uint32(sealed[1:headerSize]), nil
}

func wrapAD(header []byte) []byte {
	return append([]byte(wrapADPrefix), header...)
}

func dataAD(aad []byte) []byte {
	ad := make([]byte, 0, len(dataADPrefix)+1+len(aad))
	ad = append(ad, dataADPrefix...)
	ad = append(ad, formatV1)
	return append(ad, aad...)
}
