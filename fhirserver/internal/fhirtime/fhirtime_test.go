package fhirtime

import (
	"testing"
	"time"
)

func TestParseRanges(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	tests := []struct {
		in        string
		low, high string
		prec      Precision
		zoned     bool
	}{
		{"2024", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", Year, false},
		{"2024-02", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z", Month, false},
		{"2024-02-29", "2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z", Day, false},
		{"2024-02-29T10:15", "2024-02-29T10:15:00Z", "2024-02-29T10:16:00Z", Minute, false},
		{"2024-02-29T10:15:30Z", "2024-02-29T10:15:30Z", "2024-02-29T10:15:31Z", Second, true},
		{"2024-02-29T10:15:30.5+02:00", "2024-02-29T08:15:30.5Z", "2024-02-29T08:15:30.501Z", Millisecond, true},
		{"2024-12-31T23:59:59-05:00", "2025-01-01T04:59:59Z", "2025-01-01T05:00:00Z", Second, true},
		// A '+' sent unescaped in a query string arrives as a space.
		{"2024-01-01T00:00:00 01:00", "2023-12-31T23:00:00Z", "2023-12-31T23:00:01Z", Second, true},
	}
	for _, tc := range tests {
		v, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if !v.Low.Equal(utc(tc.low)) || !v.High.Equal(utc(tc.high)) || v.Precision != tc.prec || v.Zoned != tc.zoned {
			t.Errorf("Parse(%q) = [%s, %s) prec %d zoned %v; want [%s, %s) prec %d zoned %v",
				tc.in, v.Low, v.High, v.Precision, v.Zoned, tc.low, tc.high, tc.prec, tc.zoned)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", "24", "2024-1", "2024-13", "2023-02-29", "2024-01-01T", "2024-01-01T25:00",
		"2024-01-01T10:00:61", "2024-01-01T10:00:00.", "2024-01-01T10:00:00+15:00", "2024-01-01T10:00:00X",
		"2024-01-01 10:00", "2024-01-01T10:00:00Z ", "abcd", "2024-01-01T10:00:00.1234567890Z"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded; want an error", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"2024", "2024-02-29T10:15:30.5+02:00", "2024-01-01T10:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err == nil && !v.Low.Before(v.High) {
			t.Fatalf("Parse(%q): empty range [%s, %s)", s, v.Low, v.High)
		}
	})
}
