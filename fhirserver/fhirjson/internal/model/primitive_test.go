package model

import (
	"encoding/base64"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The reference: google/fhir v0.7.4's checks of the same values, written
// out from its source (regular expressions, time layouts, strconv and
// base64 calls), which the hand-written checks must match on every input.

var (
	refDate     = regexp.MustCompile(`^-?[0-9]{4}(-(0[1-9]|1[0-2])(-(0[0-9]|[1-2][0-9]|3[0-1]))?)?$`)
	refDateTime = regexp.MustCompile(`^-?[0-9]{4}(-(0[1-9]|1[0-2])(-(0[0-9]|[1-2][0-9]|3[0-1])(T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00)))?)?)?$`)
	refTime     = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?$`)
	refInstant  = regexp.MustCompile(`^-?[0-9]{4}-(0[1-9]|1[0-2])-(0[0-9]|[1-2][0-9]|3[0-1])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))$`)
	refCode     = regexp.MustCompile(`^[^\s]+(\s[^\s]+)*$`)
	refID       = regexp.MustCompile(`^[A-Za-z0-9\-\.]{1,64}$`)
	refOID      = regexp.MustCompile(`^urn:oid:[0-2](\.(0|[1-9][0-9]*))+$`)
	refUUID     = regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	refPosInt   = regexp.MustCompile(`^[+]?[1-9][0-9]*$`)
	refUInt     = regexp.MustCompile(`^(0|([1-9][0-9]*))$`)
)

func refTimeValid(f Format, s string) bool {
	parses := func(layouts ...string) bool {
		for _, l := range layouts {
			if _, err := time.Parse(l, s); err == nil {
				return true
			}
		}
		return false
	}
	switch f {
	case Date:
		return refDate.MatchString(s) && parses("2006-01-02", "2006-01", "2006")
	case DateTime:
		return refDateTime.MatchString(s) && parses("2006-01-02T15:04:05-07:00", "2006-01-02T15:04:05Z", "2006-01-02", "2006-01", "2006")
	case Instant:
		return refInstant.MatchString(s) && parses("2006-01-02T15:04:05Z", "2006-01-02T15:04:05-07:00")
	case Time:
		return refTime.MatchString(s) && parses("15:04:05")
	}
	panic(f)
}

// refBase64 is google/fhir's decodeBase64: spaces in a regular
// stride-and-separator pattern are dropped, the rest must decode.
func refBase64(s string) bool {
	p := []byte(s)
	n, nn, chunkStart, stride, sep := len(p), 0, 0, 0, 0
	for i := 0; i < n; i++ {
		c := p[i]
		if c != ' ' {
			p[nn] = c
			nn++
			continue
		}
		cur := i - chunkStart
		if stride == 0 {
			stride = cur
		}
		if cur != stride {
			return false
		}
		chunkStart = i
		for ; i < n && p[i] == ' '; i++ {
		}
		curSep := i - chunkStart
		if sep == 0 {
			sep = curSep
		}
		if curSep != sep {
			return false
		}
		chunkStart = i
		i--
	}
	_, err := base64.StdEncoding.DecodeString(string(p[:nn]))
	return err == nil
}

func TestPrimitivesMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gen := func(alphabet string, max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	// Mostly near-valid values: a valid one with a few characters changed.
	mutate := func(s, alphabet string) string {
		b := []byte(s)
		for k := r.IntN(3); k > 0 && len(b) > 0; k-- {
			switch i := r.IntN(len(b)); r.IntN(3) {
			case 0:
				b[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			default:
				b = append(b[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		return string(b)
	}
	valid := map[Format][]string{
		Date:     {"2020", "2020-02", "2020-02-29", "2021-12-31", "0000-01-01"},
		DateTime: {"2020", "2020-02-29T23:59:59Z", "2020-01-01T00:00:00.123+14:00", "1999-12-31T10:10:10-13:59"},
		Instant:  {"2020-02-29T23:59:59Z", "2020-01-01T00:00:00.123456+05:30"},
		Time:     {"23:59:59", "00:00:00.5"},
	}
	const timeChars = "0123456789-:T.Z+ 2"
	for f, vs := range valid {
		for i := 0; i < 20000; i++ {
			s := mutate(vs[r.IntN(len(vs))], timeChars)
			if i%4 == 0 {
				s = gen(timeChars, 30)
			}
			if got, want := validTime(f, []byte(s)), refTimeValid(f, s); got != want {
				t.Errorf("format %d %q: got %v, want %v", f, s, got, want)
			}
		}
	}
	for i := 0; i < 50000; i++ {
		s := gen("a \t\n\f\r\v-._:0Z\x01é", 8)
		if got, want := isCode([]byte(s)), refCode.MatchString(s); got != want {
			t.Errorf("code %q: got %v, want %v", s, got, want)
		}
		s = gen("aZ09-._ /", 70)
		if got, want := Check(ID, []byte(strconv.Quote(s)), nil) == OK, refID.MatchString(s); got != want {
			t.Errorf("id %q: got %v, want %v", s, got, want)
		}
		s = mutate("urn:oid:2.16.840.1.113883", "0123456789.:a")
		if got, want := isOID([]byte(s)), refOID.MatchString(s); got != want {
			t.Errorf("oid %q: got %v, want %v", s, got, want)
		}
		s = mutate("urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0", "0123456789abcdefABX-:")
		if got, want := isUUID([]byte(s)), refUUID.MatchString(s); got != want {
			t.Errorf("uuid %q: got %v, want %v", s, got, want)
		}
		s = mutate("QUJD REVG R0g= ", "AQ+/= ")
		if i%3 == 0 {
			s = gen("AQz09+/= ", 16)
		}
		if got, want := isBase64([]byte(s)), refBase64(s); got != want {
			t.Errorf("base64 %q: got %v, want %v", s, got, want)
		}
		s = mutate("http://example.org:80/a/b?c=d#e", "h:/?#@%[]1aé .\x7f")
		if i%3 == 0 {
			s = gen("a:/?#@%[]1.-+_", 12)
		}
		_, err := url.Parse(s)
		if got, want := validURI([]byte(s)), err == nil; got != want {
			t.Errorf("uri %q: got %v, want %v", s, got, want)
		}
		s = gen("0123456789-+.e", 11)
		if s == "" || !isNumber(s[0]) {
			continue
		}
		// Integer: jsoniter's int32 reading takes digits with an optional
		// minus and nothing else (the guard has checked the JSON grammar).
		n, err := strconv.ParseInt(s, 10, 32)
		wantInt := err == nil && refJSONInt(s)
		_ = n
		if got := Check(Integer, []byte(s), nil) == OK; got != wantInt {
			t.Errorf("integer %s: got %v, want %v", s, got, wantInt)
		}
		u, err := strconv.ParseUint(s, 10, 32)
		wantPos := refPosInt.MatchString(s) && err == nil && u <= 1<<31-1
		wantU := refUInt.MatchString(s) && err == nil && u <= 1<<31-1
		if got := Check(PositiveInt, []byte(s), nil) == OK; got != wantPos {
			t.Errorf("positiveInt %s: got %v, want %v", s, got, wantPos)
		}
		if got := Check(UnsignedInt, []byte(s), nil) == OK; got != wantU {
			t.Errorf("unsignedInt %s: got %v, want %v", s, got, wantU)
		}
	}
}

// refJSONInt is the JSON integer grammar: -?(0|[1-9][0-9]*).
func refJSONInt(s string) bool {
	return regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`).MatchString(s)
}
