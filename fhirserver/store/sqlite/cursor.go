package sqlite

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// cursorFormat is the first byte of every cursor, so that a later layout can
// be told apart from this one (and old cursors rejected cleanly).
const cursorFormat = 1

// cursor is the position after the last version of a history page: pages are
// ordered by (last_updated DESC, seq DESC), so the next page starts strictly
// below (lastUpdated, seq).
//
// maxSeq freezes the page set: the first page records the highest seq that
// existed when it was read, and later pages ignore anything written after.
// seq grows with commit order (AUTOINCREMENT under a single writer), so this
// makes paging a true snapshot even when a new version carries an older
// LastUpdated than the cursor (clock skew, imported data).
//
// query is a hash of the filter the cursor was issued for, so a cursor
// replayed against another history query is rejected instead of silently
// skipping or repeating versions.
type cursor struct {
	lastUpdated int64 // unix microseconds
	seq         int64
	maxSeq      int64
	query       uint32
}

// encode is base64url (no padding) of: format byte, varint lastUpdated,
// uvarint seq, uvarint maxSeq, 4-byte big-endian query hash.
func (c cursor) encode() string {
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+4)
	b = append(b, cursorFormat)
	b = binary.AppendVarint(b, c.lastUpdated)
	b = binary.AppendUvarint(b, uint64(c.seq))
	b = binary.AppendUvarint(b, uint64(c.maxSeq))
	b = binary.BigEndian.AppendUint32(b, c.query)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses s strictly: anything that encode could not have
// produced is store.ErrBadCursor.
func decodeCursor(s string) (cursor, error) {
	bad := func(why string) (cursor, error) {
		return cursor{}, fmt.Errorf("sqlite store: cursor %.40q: %s: %w", s, why, store.ErrBadCursor)
	}
	if len(s) > 64 {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) == 0 || b[0] != cursorFormat {
		return bad("unknown format")
	}
	b = b[1:]
	var c cursor
	var n int
	c.lastUpdated, n = binary.Varint(b)
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
	c.query = binary.BigEndian.Uint32(b)
	if seq == 0 || seq > maxSeq || maxSeq > math.MaxInt64 {
		return bad("position out of range")
	}
	c.seq, c.maxSeq = int64(seq), int64(maxSeq)
	// Reject non-canonical encodings (e.g. padded varints) so that each
	// position has exactly one cursor.
	if c.encode() != s {
		return bad("not canonical")
	}
	return c, nil
}

// queryHash identifies the filter of a history query (not its page size,
// which a client may change between pages).
func queryHash(l level, typ, id string, since, atLow, atHigh int64) uint32 {
	h := fnv.New32a()
	var b []byte
	b = append(b, byte(l))
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
