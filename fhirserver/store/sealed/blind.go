package sealed

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// BlindKeySize is the size of a blind-index key.
const BlindKeySize = 32

// Blind tags: "~" + key id (decimal) + "~" + the first tagBytes of the
// HMAC-SHA256 of blindDomain + the whole plain key, in unpadded base64url.
const (
	blindDomain = "kiln/sealed blind-index v1\x00"
	tagMark     = "~"
	tagBytes    = 16
)

// BlindKeys are the versioned keys of a partition's blind index: the
// current one (the highest id, unless NewBlindKeysWithCurrent named
// another) tags the rows written from now on; queries look for the tags
// of every id, so that a rebuild under a new key can run while the index
// still holds tags of the old one. Immutable and safe for concurrent use.
type BlindKeys struct {
	current uint32
	ids     []uint32 // ascending
	macs    map[uint32]*sync.Pool
}

// NewBlindKeys builds the ring from keys by id (ids ≥ 1, keys of
// BlindKeySize bytes). The keys are copied. They must not be the keys of
// the partition's crypt.Keyring.
func NewBlindKeys(keys map[uint32][]byte) (*BlindKeys, error) {
	if len(keys) == 0 {
		return nil, errors.New("sealed: a blind-index key ring needs at least one key")
	}
	b := &BlindKeys{macs: make(map[uint32]*sync.Pool, len(keys))}
	for id, key := range keys {
		if id == 0 {
			return nil, errors.New("sealed: blind-index key id 0 is reserved; ids start at 1")
		}
		if len(key) != BlindKeySize {
			return nil, fmt.Errorf("sealed: blind-index key %d is %d bytes, want %d", id, len(key), BlindKeySize)
		}
		k := slices.Clone(key)
		b.macs[id] = &sync.Pool{New: func() any { return &tagger{mac: hmac.New(sha256.New, k)} }}
		b.ids = append(b.ids, id)
		b.current = max(b.current, id)
	}
	slices.Sort(b.ids)
	return b, nil
}

// NewBlindKeysWithCurrent is NewBlindKeys with the key that tags named:
// current must be one of keys' ids. A key with a higher id is looked up
// by queries but tags nothing yet: a rotation stages the new key this
// way, so that every server looks for its tags before any row has one.
func NewBlindKeysWithCurrent(keys map[uint32][]byte, current uint32) (*BlindKeys, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("sealed: the current blind-index key id %d is not in the ring", current)
	}
	b, err := NewBlindKeys(keys)
	if err != nil {
		return nil, err
	}
	b.current = current
	return b, nil
}

// CurrentID is the id of the key that tags new rows.
func (b *BlindKeys) CurrentID() uint32 { return b.current }

// IDs lists the ids of the ring's keys, ascending.
func (b *BlindKeys) IDs() []uint32 { return slices.Clone(b.ids) }

// tagger is one HMAC of a blind-index key with its scratch space: the
// message and the sum are built in place (a resource has tens of keys,
// each tagged on every write).
type tagger struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// tag is the blind form of the plain index key k ("param\x1fvalue")
// under key id: "param\x1f~id~tag". The parameter code stays readable (a
// search parameter's name, no data); the tag covers the whole of k, so
// one value under two parameters has two unrelated tags.
func (b *BlindKeys) tag(id uint32, k string) string {
	param, _, _ := strings.Cut(k, keySep)
	pool := b.macs[id]
	tg := pool.Get().(*tagger)
	tg.buf = append(append(tg.buf[:0], blindDomain...), k...)
	tg.mac.Reset()
	tg.mac.Write(tg.buf)
	sum := tg.mac.Sum(tg.sum[:0])
	var enc [22]byte // base64.RawURLEncoding.EncodedLen(tagBytes)
	base64.RawURLEncoding.Encode(enc[:], sum[:tagBytes])
	pool.Put(tg)
	var idText [10]byte
	idDigits := strconv.AppendUint(idText[:0], uint64(id), 10)
	var out strings.Builder
	out.Grow(len(param) + len(keySep) + 2*len(tagMark) + len(idDigits) + len(enc))
	out.WriteString(param)
	out.WriteString(keySep)
	out.WriteString(tagMark)
	out.Write(idDigits)
	out.WriteString(tagMark)
	out.Write(enc[:])
	return out.String()
}

// TagKeyID reports the id of the blind-index key a stored index key was
// tagged under, and false for a key that is not a blind tag (a plain
// reference key): a rebuild after a blind-key rotation finds the rows it
// has yet to redo by it.
func TagKeyID(storedKey string) (uint32, bool) {
	_, val, ok := strings.Cut(storedKey, keySep)
	if !ok || !strings.HasPrefix(val, tagMark) {
		return 0, false
	}
	idText, tag, ok := strings.Cut(val[len(tagMark):], tagMark)
	if !ok || len(tag) != base64.RawURLEncoding.EncodedLen(tagBytes) {
		return 0, false
	}
	id, err := strconv.ParseUint(idText, 10, 32)
	if err != nil || id == 0 || strconv.FormatUint(id, 10) != idText {
		return 0, false
	}
	return uint32(id), true
}
