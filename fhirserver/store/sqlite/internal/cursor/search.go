package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// searchFormat is the first byte of a search cursor; history cursors
// use historyFormat, so neither is mistaken for the other.
const searchFormat = 2

// maxSearch bounds the text of a cursor (sort values are strings of
// any length, but a client should not make us decode megabytes).
const maxSearch = 8192

// Search is a position in the order of a search: the sort values and
// rid of the row it is next to. Back says the page wanted is the one
// before that row (Prev), otherwise the one after it (Next). MaxRid is the
// highest rid when the first page was read: later pages ignore resources
// created since, so they cannot shift what the client has not seen yet.
// Query is a hash of the query the cursor belongs to (SearchHash).
type Search struct {
	Back   bool
	Query  uint32
	MaxRid int64
	Rid    int64
	Vals   []any // nil, int64, float64 or string, one per Sort key
}

// Value tags of the encoding.
const (
	tagNull = iota
	tagInt
	tagFloat
	tagString
)

// Encode is base64url (no padding) of: format, direction, 4-byte query
// hash, uvarint MaxRid, uvarint Rid, uvarint count of values, then each
// value as a tag and its varint, 8-byte IEEE bits, or uvarint length and
// bytes.
func (c Search) Encode() string {
	b := []byte{searchFormat, 0}
	if c.Back {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint32(b, c.Query)
	b = binary.AppendUvarint(b, uint64(c.MaxRid))
	b = binary.AppendUvarint(b, uint64(c.Rid))
	b = binary.AppendUvarint(b, uint64(len(c.Vals)))
	for _, v := range c.Vals {
		switch v := v.(type) {
		case int64:
			b = append(b, tagInt)
			b = binary.AppendVarint(b, v)
		case float64:
			b = append(b, tagFloat)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
		case string:
			b = append(b, tagString)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		default:
			b = append(b, tagNull)
		}
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeSearch parses s strictly: anything Encode could not have
// produced is store.ErrBadCursor. It never panics.
func DecodeSearch(s string) (Search, error) {
	bad := func(why string) (Search, error) {
		return Search{}, fmt.Errorf("sqlite store: search cursor %.40q: %s: %w", s, why, store.ErrBadCursor)
	}
	if len(s) > maxSearch {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) < 6 || b[0] != searchFormat || b[1] > 1 {
		return bad("unknown format")
	}
	c := Search{Back: b[1] == 1, Query: binary.BigEndian.Uint32(b[2:6])}
	b = b[6:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	maxRid, ok1 := uv()
	rid, ok2 := uv()
	n, ok3 := uv()
	if !ok1 || !ok2 || !ok3 {
		return bad("truncated")
	}
	if maxRid > math.MaxInt64 || rid > maxRid || n > 64 {
		return bad("out of range")
	}
	c.MaxRid, c.Rid = int64(maxRid), int64(rid)
	for range n {
		if len(b) == 0 {
			return bad("truncated")
		}
		tag := b[0]
		b = b[1:]
		switch tag {
		case tagNull:
			c.Vals = append(c.Vals, nil)
		case tagInt:
			v, k := binary.Varint(b)
			if k <= 0 {
				return bad("truncated")
			}
			b = b[k:]
			c.Vals = append(c.Vals, v)
		case tagFloat:
			if len(b) < 8 {
				return bad("truncated")
			}
			f := math.Float64frombits(binary.BigEndian.Uint64(b))
			if math.IsNaN(f) {
				return bad("not a number")
			}
			b = b[8:]
			c.Vals = append(c.Vals, f)
		case tagString:
			l, ok := uv()
			if !ok || l > uint64(len(b)) {
				return bad("truncated")
			}
			c.Vals = append(c.Vals, string(b[:l]))
			b = b[l:]
		default:
			return bad("unknown value tag")
		}
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	if c.Encode() != s {
		return bad("not canonical")
	}
	return c, nil
}

// SearchHash identifies what a cursor may continue: the types, the
// clauses and the sort, not the page size or the includes.
func SearchHash(q *search.Query) uint32 {
	h := fnv.New32a()
	var b []byte
	b = appendQuery(b, q)
	h.Write(b)
	return h.Sum32()
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendQuery(b []byte, q *search.Query) []byte {
	if q == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(q.Types)))
	for _, t := range q.Types {
		b = appendStr(b, t)
	}
	b = binary.AppendUvarint(b, uint64(len(q.Where)))
	for _, cl := range q.Where {
		b = binary.AppendUvarint(b, uint64(len(cl.Any)))
		for i := range cl.Any {
			m := &cl.Any[i]
			b = append(b, byte(m.Op), byte(m.Cmp))
			b = strconv.AppendBool(b, m.Not)
			b = strconv.AppendBool(b, m.Missing)
			b = appendStr(b, m.Type)
			b = binary.AppendUvarint(b, uint64(len(m.Keys)))
			for _, k := range m.Keys {
				b = appendStr(b, k)
			}
			b = appendStr(b, m.Prefix)
			b = appendStr(b, m.Contains)
			b = appendStr(b, m.Param)
			b = binary.AppendVarint(b, m.Low)
			b = binary.AppendVarint(b, m.High)
			for _, f := range []float64{m.NumLow, m.NumHigh, m.Approx} {
				b = binary.BigEndian.AppendUint64(b, math.Float64bits(f))
			}
			if m.Chain != nil {
				b = appendStr(b, m.Chain.RefParam)
				b = appendQuery(b, m.Chain.Query)
			} else {
				b = append(b, 0)
			}
			if m.Has != nil {
				b = appendStr(b, m.Has.Param)
				b = appendQuery(b, m.Has.Query)
			} else {
				b = append(b, 0)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(q.Sort)))
	for _, s := range q.Sort {
		b = appendStr(b, s.Param)
		b = strconv.AppendBool(b, s.Desc)
	}
	return b
}
