package fhirjson

// DecodeMembers is Decode that builds only the root object's members that
// keep accepts: the others are passed over without being built, which
// makes reading a few elements of many stored resources (a worker's
// screenings and certifications) several times cheaper. A member passed
// over is checked only for its extent (strings and balanced brackets),
// so DecodeMembers is for bodies Kiln stored, which were checked on
// write; Decode is for anything else.
func DecodeMembers(data []byte, keep func(name string) bool) (map[string]any, error) {
	d := decoderPool.Get().(*decoder)
	d.data, d.pos, d.keep = data, 0, keep
	m, err := d.doc()
	d.release()
	return m, err
}

// skip passes over the value at d.pos (whitespace skipped) without
// building it, and leaves d.pos after it.
func (d *decoder) skip() bool {
	depth := 0
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case '"':
			if !d.skipString() {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
			if depth > DecodeMaxDepth {
				d.syntax("JSON nesting is deeper than the limit")
				return false
			}
		case '}', ']':
			if depth == 0 {
				return true // the end of the object holding a scalar
			}
			depth--
			if depth == 0 {
				d.pos++
				return true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true // the end of a number or literal
			}
		}
		d.pos++
	}
	d.syntax("unexpected end of input inside a value")
	return false
}

// skipString passes over the string at d.pos, escapes included.
func (d *decoder) skipString() bool {
	for i := d.pos + 1; i < len(d.data); i++ {
		switch d.data[i] {
		case '\\':
			i++
		case '"':
			d.pos = i + 1
			return true
		}
	}
	d.syntax("unterminated string")
	return false
}
