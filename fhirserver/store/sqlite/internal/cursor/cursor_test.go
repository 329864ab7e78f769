package cursor

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

func TestSearchCursorRoundTrip(t *testing.T) {
	for _, c := range []Search{
		{Query: 1, MaxRid: 10, Rid: 3},
		{Back: true, Query: math.MaxUint32, MaxRid: math.MaxInt64, Rid: math.MaxInt64, Vals: []any{nil, int64(-5), 2.5, "", "x\x1fé"}},
		{MaxRid: 1, Rid: 1, Vals: []any{math.Inf(1), math.Inf(-1), -math.MaxFloat64, int64(math.MinInt64)}},
	} {
		s := c.Encode()
		got, err := DecodeSearch(s)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

func TestSearchCursorRejects(t *testing.T) {
	good := Search{Query: 7, MaxRid: 100, Rid: 42, Vals: []any{"abc", int64(3)}}.Encode()
	bad := []string{"", "=", good + "A", good[:len(good)-2], strings.ToUpper(good),
		Search{MaxRid: 4, Rid: 5}.Encode(),                            // rid beyond the snapshot
		History{LastUpdated: 1, Seq: 1, MaxSeq: 2, Query: 7}.Encode(), // a history cursor
	}
	checkRejects(t, "DecodeSearch", good, bad, DecodeSearch)
}

func FuzzSearchCursorDecode(f *testing.F) {
	f.Add(Search{Query: 1, MaxRid: 9, Rid: 2, Vals: []any{"a", int64(1), 1.5, nil}}.Encode())
	f.Add(Search{Back: true, MaxRid: 1, Rid: 1}.Encode())
	fuzzDecode(f, DecodeSearch)
}

// TestCursorDecode: every corruption of a valid cursor is rejected, and
// encoding round-trips.
func TestCursorDecode(t *testing.T) {
	c := History{LastUpdated: -1234567, Seq: 42, MaxSeq: 1 << 40, Query: 0xdeadbeef}
	s := c.Encode()
	got, err := DecodeHistory(s)
	if err != nil || got != c {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := []string{"", "=", s + "=", s + "A", s[:len(s)-1], "A" + s, strings.ToUpper(s),
		History{Seq: 5, MaxSeq: 4}.Encode(), History{Seq: 0, MaxSeq: 4}.Encode()}
	checkRejects(t, "DecodeHistory", s, bad, DecodeHistory)
}

func FuzzCursorDecode(f *testing.F) {
	f.Add(History{LastUpdated: 1, Seq: 1, MaxSeq: 2}.Encode())
	fuzzDecode(f, DecodeHistory)
}

// checkRejects: decode fails with ErrBadCursor on each of bad and on every
// one-character corruption of the valid cursor good.
func checkRejects[C any](t *testing.T, name, good string, bad []string, decode func(string) (C, error)) {
	t.Helper()
	for i := range good {
		bad = append(bad, good[:i]+"~"+good[i+1:])
	}
	for _, b := range bad {
		if b == good {
			continue
		}
		if _, err := decode(b); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s(%q): %v, want ErrBadCursor", name, b, err)
		}
	}
}

// fuzzDecode: decode accepts only what encode writes, and rejects the
// rest with ErrBadCursor.
func fuzzDecode[C interface{ Encode() string }](f *testing.F, decode func(string) (C, error)) {
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decode(s)
		if err != nil {
			if !errors.Is(err, store.ErrBadCursor) {
				t.Fatalf("error %v does not match ErrBadCursor", err)
			}
			return
		}
		if c.Encode() != s {
			t.Fatalf("accepted non-canonical %q", s)
		}
	})
}
