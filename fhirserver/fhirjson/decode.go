package fhirjson

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"unicode/utf8"
)

// DecodeMaxDepth is the deepest nesting Decode accepts: encoding/json's
// own limit, so that Decode accepts whatever encoding/json accepts. It is
// far above any Limits.MaxDepth the guard allows.
const DecodeMaxDepth = 10000

// Decode decodes data, which must hold exactly one JSON object (whitespace
// around it is allowed), into the values encoding/json produces with
// Decoder.UseNumber: map[string]any, []any, string, json.Number, bool and
// nil. The result is the one encoding/json gives, byte for byte: the last
// of duplicate keys wins, numbers keep their literal text, unpaired
// surrogate escapes and invalid UTF-8 in strings become U+FFFD, empty
// objects and arrays are non-nil. Data encoding/json rejects is rejected,
// and so are a top-level null or other non-object, data after the object,
// and nesting deeper than DecodeMaxDepth.
//
// It is a single pass that allocates little more than the result: maps and
// slices are made at their final size, the scratch space is pooled, and
// short strings seen before (most member names, many codes) are reused.
func Decode(data []byte) (map[string]any, error) {
	d := decoderPool.Get().(*decoder)
	d.data, d.pos = data, 0
	m, err := d.doc()
	d.release()
	return m, err
}

type decoder struct {
	data  []byte
	pos   int
	depth int
	err   error

	// keep, when set, selects the root object's members to decode; the
	// others are skipped (DecodeMembers).
	keep func(name string) bool

	members []pendingMember // members of the open objects, innermost last
	elems   []any           // elements of the open arrays, innermost last
	buf     []byte          // decoded strings with escapes

	// Plain ASCII strings of up to maxCached bytes seen before, by a hash
	// of their bytes: most member names and many values (codes, systems,
	// units) repeat within a resource and across resources. The caches
	// outlive a call, as the decoder is pooled; they hold only strings,
	// which cannot change, so results share them safely.
	keys   [1 << cacheBits]string
	values [1 << cacheBits]any
}

// pendingMember is one decoded member of an object that is still open.
type pendingMember struct {
	key string
	val any
}

var decoderPool = sync.Pool{New: func() any {
	return &decoder{members: make([]pendingMember, 0, 64), elems: make([]any, 0, 32)}
}}

// release clears the scratch space (so the pool keeps no decoded data
// alive, the string caches apart) and returns the decoder to the pool; oversized buffers are
// dropped.
func (d *decoder) release() {
	clear(d.members)
	clear(d.elems)
	d.members, d.elems, d.buf = d.members[:0], d.elems[:0], d.buf[:0]
	d.data, d.err, d.depth, d.keep = nil, nil, 0, nil
	if cap(d.members) > 4096 || cap(d.elems) > 4096 || cap(d.buf) > 64<<10 {
		return
	}
	decoderPool.Put(d)
}

func (d *decoder) doc() (map[string]any, error) {
	d.skipWS()
	if d.pos >= len(d.data) {
		return nil, errors.New("unexpected end of input, expected a JSON object")
	}
	if d.data[d.pos] != '{' {
		return nil, errors.New("the JSON value is not an object")
	}
	m, ok := d.object()
	if !ok {
		return nil, d.err
	}
	d.skipWS()
	if d.pos < len(d.data) {
		return nil, d.syntax("unexpected data after the end of the JSON object")
	}
	return m, nil
}

// syntax records (the first) error at d.pos and returns it.
func (d *decoder) syntax(what string) error {
	if d.err == nil {
		d.err = errors.New("invalid JSON at byte offset " + strconv.Itoa(d.pos) + ": " + what)
	}
	return d.err
}

func (d *decoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value decodes the value at d.pos (whitespace already skipped).
func (d *decoder) value() (any, bool) {
	if d.pos >= len(d.data) {
		d.syntax("unexpected end of input, expected a value")
		return nil, false
	}
	switch c := d.data[d.pos]; c {
	case '{':
		m, ok := d.object()
		return m, ok
	case '[':
		a, ok := d.array()
		return a, ok
	case '"':
		return d.strValue()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			start := d.pos
			end, _, problem := scanNumber(d.data, start)
			d.pos = end
			if problem != "" {
				d.syntax(problem)
				return nil, false
			}
			return json.Number(d.data[start:end]), true
		}
		d.syntax("unexpected character " + quoteByte(c) + ", expected a value")
		return nil, false
	}
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		d.syntax("invalid literal, expected " + lit)
		return false
	}
	d.pos += len(lit)
	return true
}

func (d *decoder) enter() bool {
	d.depth++
	if d.depth > DecodeMaxDepth {
		d.syntax("JSON nesting is deeper than the limit of " + strconv.Itoa(DecodeMaxDepth) + " levels")
		return false
	}
	return true
}

func (d *decoder) object() (map[string]any, bool) {
	if !d.enter() {
		return nil, false
	}
	d.pos++ // '{'
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return map[string]any{}, true
	}
	frame := len(d.members)
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			d.syntax("expected a member name in double quotes")
			return nil, false
		}
		key, ok := d.str()
		if !ok {
			return nil, false
		}
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			d.syntax("expected ':' after a member name")
			return nil, false
		}
		d.pos++
		d.skipWS()
		if d.keep != nil && d.depth == 1 && !d.keep(key) {
			if !d.skip() {
				return nil, false
			}
		} else {
			val, ok := d.value()
			if !ok {
				return nil, false
			}
			d.members = append(d.members, pendingMember{key, val})
		}
		more, ok := d.separator('}', "an object", "an object member")
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	ms := d.members[frame:]
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		m[e.key] = e.val // the last of duplicate keys wins
	}
	clear(ms)
	d.members = d.members[:frame]
	d.depth--
	return m, true
}

func (d *decoder) array() ([]any, bool) {
	if !d.enter() {
		return nil, false
	}
	d.pos++ // '['
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return []any{}, true
	}
	frame := len(d.elems)
	for {
		val, ok := d.value()
		if !ok {
			return nil, false
		}
		d.elems = append(d.elems, val)
		more, ok := d.separator(']', "an array", "an array element")
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	es := d.elems[frame:]
	a := make([]any, len(es))
	copy(a, es)
	clear(es)
	d.elems = d.elems[:frame]
	d.depth--
	return a, true
}

// separator reads what follows a member or an element: a ',' (more
// follow) or the closing byte; anything else is an error, recorded.
func (d *decoder) separator(closing byte, inside, after string) (more, ok bool) {
	d.skipWS()
	if d.pos >= len(d.data) {
		d.syntax("unexpected end of input inside " + inside)
		return false, false
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.skipWS()
		return true, true
	case closing:
		d.pos++
		return false, true
	}
	d.syntax("expected ',' or '" + string(closing) + "' after " + after)
	return false, false
}

// plainString scans the string at d.pos. Plain ASCII without escapes,
// the normal case, comes back as its bytes and their cache hash, with
// d.pos past it. Otherwise rest is where strSlow takes over, or -1 for an
// unterminated string (recorded).
func (d *decoder) plainString() (b []byte, h uint32, rest int) {
	data := d.data
	start := d.pos + 1
	for i := start; i < len(data); i++ {
		c := data[i]
		if c == '"' {
			d.pos = i + 1
			return data[start:i], h, 0
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return nil, 0, i
		}
		h = h*31 + uint32(c)
	}
	d.pos = len(data)
	d.syntax("unterminated string")
	return nil, 0, -1
}

// str decodes the string at d.pos; short plain ones are taken from the
// cache when they were seen before.
func (d *decoder) str() (string, bool) {
	b, h, rest := d.plainString()
	switch {
	case rest < 0:
		return "", false
	case rest > 0:
		return d.strSlow(d.pos+1, rest)
	case len(b) > maxCached:
		return string(b), true
	}
	e := &d.keys[cacheSlot(h, len(b))]
	if *e != string(b) {
		*e = string(b)
	}
	return *e, true
}

// strValue is str for a member value or array element, with the cache
// holding the boxed string, so that a repeated value costs no allocation.
func (d *decoder) strValue() (any, bool) {
	b, h, rest := d.plainString()
	switch {
	case rest < 0:
		return "", false
	case rest > 0:
		return d.strSlow(d.pos+1, rest)
	case len(b) > maxCached:
		return string(b), true
	}
	e := &d.values[cacheSlot(h, len(b))]
	if s, ok := (*e).(string); !ok || s != string(b) {
		*e = string(b)
	}
	return *e, true
}

// maxCached is the longest string the caches hold: element names, codes,
// code systems and units, not narratives or ids.
const maxCached = 48

func cacheSlot(h uint32, n int) uint32 {
	return (h + uint32(n)) * 0x9E3779B1 >> (32 - cacheBits)
}

const cacheBits = 8

// strSlow finishes a string that has escapes or non-ASCII bytes: it finds
// the end, checking the escapes, then decodes it as encoding/json does.
func (d *decoder) strSlow(start, i int) (string, bool) {
	data := d.data
	esc := false
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			body := data[start:i]
			d.pos = i + 1
			if !esc && utf8.Valid(body) {
				return string(body), true
			}
			var ok bool
			d.buf, ok = appendUnquoted(d.buf[:0], body)
			if !ok { // cannot happen: the escapes were checked
				d.syntax("invalid string")
				return "", false
			}
			return string(d.buf), true
		case c == '\\':
			esc = true
			if i+1 >= len(data) {
				d.pos = i
				d.syntax("unterminated string")
				return "", false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(data, i+2); !ok {
					d.pos = i
					d.syntax(`invalid \u escape`)
					return "", false
				}
				i += 6
			default:
				d.pos = i
				d.syntax("invalid escape sequence " + strconv.Quote(string(data[i:i+2])))
				return "", false
			}
		case c < 0x20:
			d.pos = i
			d.syntax("control character " + quoteByte(c) + " in a string must be escaped")
			return "", false
		default:
			i++
		}
	}
	d.pos = len(data)
	d.syntax("unterminated string")
	return "", false
}
