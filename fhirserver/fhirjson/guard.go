package fhirjson

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The guard is a hand-written, single-pass JSON scanner that runs before
// the structural check (structure.go). It rejects what the FHIR JSON format
// forbids whatever the type: duplicate keys, null (but for the placeholders
// of "x"/"_x" arrays), empty strings, objects and arrays, upper-case element
// names and "_x" members holding plain values. It also enforces the nesting
// limit and UTF-8 validity, and records what later stages need (the root's
// members, narratives, resourceType members that are not first in their
// object), so that the structural check can assume well-formed JSON and
// read each byte once.

// Value kinds seen by the scanner.
const (
	kString uint8 = iota + 1
	kNumber
	kBool
	kNull
	kObject
	kArray
)

// valInfo summarises a scanned value; for arrays it also says what the
// elements were, which the "x"/"_x" pairing rules need.
type valInfo struct {
	kind      uint8
	hasNull   bool
	hasObj    bool // an element is an object (or array)
	hasPrim   bool // an element is a string, number or boolean
	allNull   bool
	firstNull int
}

// keyEnt is one member of an object that is still open.
type keyEnt struct {
	name []byte // decoded key
	info valInfo
}

// seg is one step of the current location: an object member or an array index.
type seg struct {
	key   []byte // nil for array elements
	index int
}

// member is one member of a scanned top-level object.
type member struct {
	name       []byte // decoded key
	keyStart   int    // raw key, quotes included: data[keyStart:keyEnd]
	keyEnd     int
	start, end int // raw value: data[start:end]
	kind       uint8
}

// guardIssue is a problem found by the scanner; path is relative to the root
// (the resource type is prefixed once it is known).
type guardIssue struct {
	code, path, msg string
}

const (
	maxIssues = 100
	// Above this many members an object's duplicate check switches from a
	// linear scan to a map, so huge objects cannot make the scan quadratic.
	smallObject = 32
)

type scanner struct {
	data     []byte
	pos      int
	maxDepth int
	depth    int
	fatal    bool

	path   []seg
	keys   []keyEnt // members of all open objects, innermost last
	issues []guardIssue

	top        []member       // members of the root object
	late       []lateType     // see structure.go
	narratives []narrativeRef // every Narrative.div string, for checkNarratives
	scratch    []byte

	// Initial backing arrays, so a typical resource needs one allocation.
	pathBuf [16]seg
	keysBuf [48]keyEnt
	topBuf  [32]member
}

// scanners recycles scanners, whose inline buffers make them a few KB:
// stamping every resource of a Bundle allocated one per resource.
var scanners = sync.Pool{New: func() any { return new(scanner) }}

// scanDoc scans data, which must hold exactly one JSON object. A caller
// that is done with the scanner, and keeps nothing of it, may release it.
func scanDoc(data []byte, maxDepth int) *scanner {
	s := scanners.Get().(*scanner)
	*s = scanner{data: data, maxDepth: maxDepth}
	s.path, s.keys, s.top = s.pathBuf[:0], s.keysBuf[:0], s.topBuf[:0]
	s.skipWS()
	if s.pos >= len(data) {
		s.fail(codeStructure, "the body is empty; a FHIR resource must be a JSON object")
		return s
	}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		s.fail(codeStructure, "a UTF-8 byte order mark is not allowed before the JSON")
		return s
	}
	if data[s.pos] != '{' {
		s.fail(codeStructure, "a FHIR resource must be a JSON object")
		return s
	}
	if _, ok := s.value(); !ok {
		return s
	}
	s.skipWS()
	if s.pos < len(data) {
		s.syntax("unexpected data after the end of the JSON object")
	}
	return s
}

func (s *scanner) release() {
	*s = scanner{} // holds nothing of the document while pooled
	scanners.Put(s)
}

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) addIssue(code, path, msg string) {
	if len(s.issues) < maxIssues {
		s.issues = append(s.issues, guardIssue{code: code, path: path, msg: msg})
	}
}

// issueHere records a problem at the current location. The cap is checked
// first so that a flood of problems does not render a flood of paths.
func (s *scanner) issueHere(code, msg string) {
	if len(s.issues) < maxIssues {
		s.addIssue(code, s.relPath(), msg)
	}
}

// fail records a problem that stops the scan.
func (s *scanner) fail(code, msg string) {
	s.issueHere(code, msg)
	s.fatal = true
}

func (s *scanner) syntax(what string) {
	s.fail(codeStructure, "invalid JSON at byte offset "+strconv.Itoa(s.pos)+": "+what)
}

// value scans one JSON value at s.pos (whitespace already skipped).
func (s *scanner) value() (valInfo, bool) {
	if s.pos >= len(s.data) {
		s.syntax("unexpected end of input, expected a value")
		return valInfo{}, false
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		start := s.pos
		if !s.str() {
			return valInfo{}, false
		}
		if s.pos-start == 2 {
			s.issueHere(codeValue, "empty string is not allowed (FHIR JSON omits elements without a value)")
		}
		return valInfo{kind: kString}, true
	case 't':
		return valInfo{kind: kBool}, s.literal("true")
	case 'f':
		return valInfo{kind: kBool}, s.literal("false")
	case 'n':
		// Whether null is allowed depends on the enclosing array and its
		// siblings, so callers decide.
		return valInfo{kind: kNull}, s.literal("null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return valInfo{kind: kNumber}, s.number()
		}
		s.syntax("unexpected character " + quoteByte(c) + ", expected a value")
		return valInfo{}, false
	}
}

func (s *scanner) literal(lit string) bool {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		s.syntax("invalid literal, expected " + lit)
		return false
	}
	s.pos += len(lit)
	return true
}

// number checks the JSON number grammar. Numbers are kept as text later on;
// those whose exponent overflows a float are refused (as google/fhir, the
// structural check before f7dada6, refused them), reported here where the
// location is known.
func (s *scanner) number() bool {
	start := s.pos
	end, exp, problem := scanNumber(s.data, start)
	s.pos = end
	if problem != "" {
		s.syntax(problem)
		return false
	}
	if exp && overflows(s.data[start:end]) {
		s.issueHere(codeValue, "number "+clip(s.data[start:end])+" is too large to process")
	}
	return true
}

// scanNumber checks the JSON number grammar for the number that starts at
// d[i] (a '-' or a digit). It returns where the number ends and whether it
// has an exponent, or, if problem is not empty, the offset of the offending
// byte and what is wrong.
func scanNumber(d []byte, i int) (end int, exp bool, problem string) {
	if d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '0' {
		i++
		if i < len(d) && '0' <= d[i] && d[i] <= '9' {
			return i, false, "invalid number: a leading zero is not allowed"
		}
	} else if digits() == 0 {
		return i, false, "invalid number"
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return i, false, "invalid number: expected a digit after the decimal point"
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		exp = true
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, false, "invalid number: expected a digit in the exponent"
		}
	}
	return i, exp, ""
}

// overflows keeps the limit google/fhir's JSON library had: numbers that
// start with 0 overflow as a float32, others as a float64.
func overflows(num []byte) bool {
	bits := 64
	if num[0] == '0' {
		bits = 32
	}
	// Underflow to zero is accepted; only a result of ±Inf is a failure.
	f, err := strconv.ParseFloat(string(num), bits)
	return err != nil && math.IsInf(f, 0)
}

func (s *scanner) enter() bool {
	s.depth++
	if s.depth > s.maxDepth {
		s.fail(codeStructure, "JSON nesting is deeper than the limit of "+strconv.Itoa(s.maxDepth)+" levels")
		return false
	}
	return true
}

func (s *scanner) object() (valInfo, bool) {
	if !s.enter() {
		return valInfo{}, false
	}
	root := s.depth == 1
	objStart := s.pos
	s.pos++ // '{'
	frame := len(s.keys)
	var big map[string]int
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		if !root { // the root reports the missing resourceType instead
			s.issueHere(codeStructure, "empty object is not allowed (FHIR JSON omits elements without content)")
		}
		return valInfo{kind: kObject}, true
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			s.syntax(`expected a member name in double quotes`)
			return valInfo{}, false
		}
		keyStart := s.pos
		name, ok := s.key()
		if !ok {
			return valInfo{}, false
		}
		keyEnd := s.pos
		s.checkName(name)
		if s.isDup(frame, big, name) {
			s.path = append(s.path, seg{key: name})
			s.issueHere(codeStructure, "duplicate key "+quoteName(name))
			s.path = s.path[:len(s.path)-1]
		}
		if big == nil && len(s.keys)-frame >= smallObject {
			big = make(map[string]int, 2*smallObject)
			for i, k := range s.keys[frame:] {
				big[string(k.name)] = frame + i
			}
		}
		if big != nil {
			big[string(name)] = len(s.keys) // its index once appended below
		}
		s.skipWS()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			s.syntax("expected ':' after a member name")
			return valInfo{}, false
		}
		s.pos++
		s.skipWS()
		s.path = append(s.path, seg{key: name})
		vstart := s.pos
		info, ok := s.value()
		if !ok {
			return valInfo{}, false
		}
		if info.kind == kNull {
			s.issueHere(codeStructure, "null is not allowed (FHIR JSON omits elements without a value)")
		}
		if info.kind == kString && string(name) == "div" {
			s.noteNarrative(vstart)
		}
		if string(name) == "resourceType" && (len(s.keys) > frame || keyEnd-keyStart != len(`"resourceType"`)) {
			s.late = append(s.late, lateType{obj: objStart, start: vstart, end: s.pos})
		}
		s.path = s.path[:len(s.path)-1]
		s.keys = append(s.keys, keyEnt{name: name, info: info})
		if root {
			s.top = append(s.top, member{name: name, keyStart: keyStart, keyEnd: keyEnd, start: vstart, end: s.pos, kind: info.kind})
		}
		s.skipWS()
		if s.pos >= len(s.data) {
			s.syntax("unexpected end of input inside an object")
			return valInfo{}, false
		}
		if s.data[s.pos] == ',' {
			s.pos++
			s.skipWS()
			continue
		}
		if s.data[s.pos] == '}' {
			s.pos++
			break
		}
		s.syntax("expected ',' or '}' after an object member")
		return valInfo{}, false
	}
	s.checkPairs(frame, big)
	s.keys = s.keys[:frame]
	s.depth--
	return valInfo{kind: kObject}, true
}

// key scans a member name and returns it decoded. Names without escapes (the
// normal case) are returned as a slice of the input, without copying.
func (s *scanner) key() ([]byte, bool) {
	start := s.pos
	i := start + 1
	for i < len(s.data) {
		c := s.data[i]
		if c == '"' {
			s.pos = i + 1
			return s.data[start+1 : i], true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		i++
	}
	if !s.str() {
		return nil, false
	}
	dec, ok := unquote(s.data[start:s.pos])
	if !ok { // cannot happen: str validated it
		s.syntax("invalid string")
		return nil, false
	}
	return dec, true
}

// checkName rejects names no FHIR element can have: element names start
// with a lower-case letter and are case-sensitive ("Gender" is not
// "gender"), with a message that says so.
func (s *scanner) checkName(name []byte) {
	n := name
	if len(n) > 0 && n[0] == '_' {
		n = n[1:]
	}
	if len(n) > 0 && 'A' <= n[0] && n[0] <= 'Z' {
		s.path = append(s.path, seg{key: name})
		s.issueHere(codeStructure, "unknown element "+quoteName(name)+" (FHIR element names are case-sensitive and start with a lower-case letter)")
		s.path = s.path[:len(s.path)-1]
	}
}

func (s *scanner) isDup(frame int, big map[string]int, name []byte) bool {
	if big != nil {
		_, ok := big[string(name)]
		return ok
	}
	for _, k := range s.keys[frame:] {
		if string(k.name) == string(name) {
			return true
		}
	}
	return false
}

// lookup finds a member of the object whose members start at frame.
func (s *scanner) lookup(frame int, big map[string]int, name []byte) (valInfo, bool) {
	if big != nil {
		i, ok := big[string(name)]
		if !ok {
			return valInfo{}, false
		}
		return s.keys[i].info, true
	}
	for _, k := range s.keys[frame:] {
		if string(k.name) == string(name) {
			return k.info, true
		}
	}
	return valInfo{}, false
}

// checkPairs applies the rules for primitive elements and their "_x"
// siblings: "_x" holds an object (or, for repeating elements, an array of
// objects), and null may only appear as a placeholder inside the arrays of
// such a pair, to keep values and extensions aligned.
func (s *scanner) checkPairs(frame int, big map[string]int) {
	for i := frame; i < len(s.keys); i++ {
		k := s.keys[i]
		under := len(k.name) > 1 && k.name[0] == '_'
		// Only look for the sibling when a rule could fail.
		if !under && !k.info.hasNull {
			continue
		}
		var other []byte
		if under {
			other = k.name[1:]
		} else {
			s.scratch = append(append(s.scratch[:0], '_'), k.name...)
			other = s.scratch
		}
		oinfo, hasOther := s.lookup(frame, big, other)
		switch {
		case k.info.kind == kNull:
			// already reported
		case under && (k.info.kind != kObject && (k.info.kind != kArray || k.info.hasPrim)):
			s.pathIssue(codeStructure, k.name, -1, quoteName(k.name)+" must hold an object (or an array of objects) with the id and extensions of "+quoteName(other))
		case under && hasOther && (oinfo.kind == kObject || (oinfo.kind == kArray && oinfo.hasObj)):
			s.pathIssue(codeStructure, other, -1, quoteName(other)+" must hold a primitive value because "+quoteName(k.name)+" is present")
		}
		if k.info.hasNull {
			switch {
			case k.info.allNull:
				s.pathIssue(codeStructure, k.name, -1, "an array of only nulls is not allowed")
			case !hasOther || oinfo.kind != kArray:
				s.pathIssue(codeStructure, k.name, k.info.firstNull, "null is not allowed (except as a placeholder that aligns a repeating primitive with its "+quoteName([]byte(pairName(k.name)))+" array)")
			}
		}
	}
}

func pairName(name []byte) string {
	if len(name) > 0 && name[0] == '_' {
		return string(name[1:])
	}
	return "_" + string(name)
}

func (s *scanner) pathIssue(code string, name []byte, index int, msg string) {
	if len(s.issues) >= maxIssues {
		return
	}
	var b strings.Builder
	writeSegs(&b, s.path)
	b.WriteByte('.')
	writeName(&b, name)
	if index >= 0 {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(index))
		b.WriteByte(']')
	}
	s.addIssue(code, b.String(), msg)
}

func (s *scanner) array() (valInfo, bool) {
	if !s.enter() {
		return valInfo{}, false
	}
	s.pos++ // '['
	info := valInfo{kind: kArray, allNull: true, firstNull: -1}
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		s.issueHere(codeStructure, "empty array is not allowed (FHIR JSON omits elements without content)")
		info.allNull = false
		return info, true
	}
	for n := 0; ; n++ {
		s.path = append(s.path, seg{index: n})
		el, ok := s.value()
		if !ok {
			return valInfo{}, false
		}
		switch el.kind {
		case kNull:
			if !info.hasNull {
				info.firstNull = n
			}
			info.hasNull = true
		case kObject, kArray:
			info.hasObj = true
			info.allNull = false
		default:
			info.hasPrim = true
			info.allNull = false
		}
		s.path = s.path[:len(s.path)-1]
		s.skipWS()
		if s.pos >= len(s.data) {
			s.syntax("unexpected end of input inside an array")
			return valInfo{}, false
		}
		if s.data[s.pos] == ',' {
			s.pos++
			s.skipWS()
			continue
		}
		if s.data[s.pos] == ']' {
			s.pos++
			break
		}
		s.syntax("expected ',' or ']' after an array element")
		return valInfo{}, false
	}
	s.depth--
	// Nulls in an array that is not an object member cannot be placeholders.
	if info.hasNull && (len(s.path) == 0 || s.path[len(s.path)-1].key == nil) {
		s.path = append(s.path, seg{index: info.firstNull})
		s.issueHere(codeStructure, "null is not allowed")
		s.path = s.path[:len(s.path)-1]
		info.hasNull = false
	}
	return info, true
}
