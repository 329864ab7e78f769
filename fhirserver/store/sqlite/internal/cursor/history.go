// Package cursor holds the SQLite store's page cursors: the opaque
// positions of a history page and of a search page, their encodings
// (docs/format/page-cursors.md) and the hashes that bind a cursor to the
// query it was issued for. Decoding is strict: anything an encoder could
// not have produced is store.ErrBadCursor.
package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// historyFormat is the first byte of every history cursor, so that a
// later layout can be told apart from this one (and old cursors rejected
// cleanly).
const historyFormat = 1

// History is the position after the last version of a history page:
// pages are ordered by (last_updated DESC, seq DESC), so the next page
// starts strictly below (LastUpdated, Seq).
//
// MaxSeq freezes the page set: the first page records the highest seq that
// existed when it was read, and later pages ignore anything written after.
// seq grows with commit order (AUTOINCREMENT under a single writer), so this
// makes paging a true snapshot even when a new version carries an older
// LastUpdated than the cursor (clock skew, imported data).
//
// Query is a hash of the filter the cursor was issued for, so a cursor
// replayed against another history query is rejected instead of silently
// skipping or repeating versions.
type History struct {
	LastUpdated int64 // unix microseconds
	Seq         int64
	MaxSeq      int64
	Query       uint32
}

// Encode is base64url (no padding) of: format byte, varint LastUpdated,
// uvarint Seq, uvarint MaxSeq, 4-byte big-endian query hash.
func (c History) Encode() string {
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+4)
	b = append(b, historyFormat)
	b = binary.AppendVarint(b, c.LastUpdated)
	b = binary.AppendUvarint(b, uint64(c.Seq))
	b = binary.AppendUvarint(b, uint64(c.MaxSeq))
	b = binary.BigEndian.AppendUint32(b, c.Query)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeHistory parses s strictly: anything that Encode could not have
// produced is store.ErrBadCursor.
func DecodeHistory(s string) (History, error) {
	bad := func(why string) (History, error) {
		return History{}, fmt.Errorf("sqlite store: cursor %.40q: %s: %w", s, why, store.ErrBadCursor)
	}
	if len(s) > 64 {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) == 0 || b[0] != historyFormat {
		return bad("unknown format")
	}
	b = b[1:]
	var c History
	var n int
	c.LastUpdated, n = binary.Varint(b)
	if n <= 0 {
		return bad("truncated")
	}
	b = b[n:]
	seq, n := binary.Uvarint(b)
	if n <= 0 {
		return bad("truncated")
	}
	b = b[n:]
	maxSeq, n := binary.Uvarint(b)
	if n <= 0 {
		return bad("truncated")
	}
	b = b[n:]
	if len(b) != 4 {
		return bad("wrong length")
	}
	c.Query = binary.BigEndian.Uint32(b)
	if seq == 0 || seq > maxSeq || maxSeq > math.MaxInt64 {
		return bad("position out of range")
	}
	c.Seq, c.MaxSeq = int64(seq), int64(maxSeq)
	// Reject non-canonical encodings (e.g. padded varints) so that each
	// position has exactly one cursor.
	if c.Encode() != s {
		return bad("not canonical")
	}
	return c, nil
}

// HistoryHash identifies the filter of a history query (not its page
// size, which a client may change between pages): its level (system,
// type or instance, as the store numbers them), type, id and bounds.
func HistoryHash(level byte, typ, id string, since, atLow, atHigh int64) uint32 {
	h := fnv.New32a()
	var b []byte
	b = append(b, level)
	b = binary.AppendUvarint(b, uint64(len(typ)))
	b = append(b, typ...)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	b = binary.AppendVarint(b, since)
	b = binary.AppendVarint(b, atLow)
	b = binary.AppendVarint(b, atHigh)
	h.Write(b)
	return h.Sum32()
}
