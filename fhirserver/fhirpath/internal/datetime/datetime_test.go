package datetime

import (
	"testing"
	"time"
)

func mustLiteral(t *testing.T, s string) *Value {
	t.Helper()
	d, err := ParseLiteral(s)
	if err != nil {
		t.Fatalf("ParseLiteral(%q): %v", s, err)
	}
	return d
}

// TestLiterals: the kind follows from the text, and String gives the
// literal back.
func TestLiterals(t *testing.T) {
	for s, k := range map[string]Kind{
		"2015": Date, "2015-02-04": Date, "2015T": DateTime, "2015-02-04T14:34:28.123+09:00": DateTime,
		"2015-02-04T14:34Z": DateTime, "T14:34:28": Time, "T14": Time,
	} {
		d := mustLiteral(t, s)
		if d.Kind() != k {
			t.Errorf("%s: kind %d, want %d", s, d.Kind(), k)
		}
		want := s
		if k == Time {
			want = s[1:]
		}
		if got := d.String(); got != want {
			t.Errorf("%s: String() = %q", s, got)
		}
	}
	for _, s := range []string{"2015-13", "2015-02-30", "T25:00", "2015-02-04T10:00+15:00", "2015-02-04x"} {
		if _, err := ParseLiteral(s); err == nil {
			t.Errorf("ParseLiteral(%q) succeeded", s)
		}
	}
	if got := mustLiteral(t, "2015T").FHIRString(); got != "2015" {
		t.Errorf("FHIRString of a partial DateTime = %q", got)
	}
}

// TestCompare: equal at the precision both have, unknown past it; time
// zones are normalized.
func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		c    int
		ok   bool
	}{
		{"2015-02", "2015-03-01", -1, true},
		{"2015-02", "2015-02-01", 0, false},
		{"2012-04-15T15:00:00+02:00", "2012-04-15T16:00:00+03:00", 0, true},
		{"2012-04-15T10:00:00", "2012-04-15T10:00:00.0", 0, true},
		{"T10:00", "2012-04-15T10:00", 0, false},
	}
	for _, tt := range tests {
		c, ok := Compare(mustLiteral(t, tt.a), mustLiteral(t, tt.b))
		if c != tt.c || ok != tt.ok {
			t.Errorf("Compare(%s, %s) = %d, %v; want %d, %v", tt.a, tt.b, c, ok, tt.c, tt.ok)
		}
	}
	a, b := mustLiteral(t, "T10:00:00"), mustLiteral(t, "T10:00:00.000")
	if !SamePrecision(a, b) || a.EqualityKey() != b.EqualityKey() {
		t.Errorf("seconds and milliseconds: same precision %v, keys %q %q", SamePrecision(a, b), a.EqualityKey(), b.EqualityKey())
	}
	if d := mustLiteral(t, "2012-01-01T10:00:00+01:00"); d.UTCString() != "2012-01-01T09:00:00Z" {
		t.Errorf("UTCString = %q", d.UTCString())
	}
}

func TestArithmeticAndBoundaries(t *testing.T) {
	if d, ok := mustLiteral(t, "2014-01-31").Add(1, "month"); !ok || d.String() != "2014-02-28" {
		t.Errorf("2014-01-31 + 1 month = %v %v", d, ok)
	}
	if _, ok := mustLiteral(t, "9999-12-31").Add(1, "day"); ok {
		t.Error("a date past 9999 was made")
	}
	if d, ok := mustLiteral(t, "T08").Boundary(9, true); !ok || d.String() != "08:59:59.999" {
		t.Errorf("T08 high boundary = %v %v", d, ok)
	}
	if d, ok := mustLiteral(t, "2014-01-01T08").Boundary(8, false); !ok || d.Kind() != Date || d.String() != "2014-01-01" {
		t.Errorf("low boundary at day precision = %v %v", d, ok)
	}
	if _, ok := mustLiteral(t, "2014").Boundary(5, false); ok {
		t.Error("5 digits is not a precision")
	}
	if n := mustLiteral(t, "2014-01-01T08:05").Digits(); n != 12 {
		t.Errorf("Digits = %d", n)
	}
	now := FromTime(time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC), DateTime)
	if now.String() != "2024-05-06T07:08:09.123Z" || now.AsDate().String() != "2024-05-06" {
		t.Errorf("FromTime = %s, AsDate = %s", now, now.AsDate())
	}
}
