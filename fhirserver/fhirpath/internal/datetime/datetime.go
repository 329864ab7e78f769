// Package datetime holds FHIRPath's partial Date, DateTime and Time
// values: parsed from literals and FHIR JSON, rendered back, compared at
// the precision both sides have, moved by calendar durations, and widened
// to their low and high boundaries.
package datetime

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind tells a Date, a DateTime and a Time apart.
type Kind uint8

const (
	Date Kind = iota + 1
	DateTime
	Time
)

// Precisions of dates and times. Seconds and fractions of a second form
// one precision for comparisons, as the specification says.
const (
	pYear = iota + 1
	pMonth
	pDay
	pHour
	pMinute
	pSecond
	pMilli
)

// Value is a partial Date, DateTime or Time. It is not changed once made.
type Value struct {
	kind                   Kind
	y, mo, d, h, mi, s, ns int
	prec                   int
	frac                   int // number of fractional second digits written
	tz                     bool
	off                    int // seconds east of UTC
}

// Kind reports whether v is a Date, a DateTime or a Time.
func (d *Value) Kind() Kind { return d.kind }

// ParseLiteral parses the body of an @ literal (the text after '@'); the
// kind follows from the text.
func ParseLiteral(s string) (*Value, error) {
	k := Date
	if strings.HasPrefix(s, "T") {
		k = Time
		s = s[1:]
	} else if strings.Contains(s, "T") {
		k = DateTime
	}
	return Parse(s, k)
}

// ParseFHIR parses a FHIR date, dateTime, instant or time string.
func ParseFHIR(s string, want Kind) (*Value, error) {
	k := want
	if want != Time {
		if strings.Contains(s, "T") {
			k = DateTime
		} else if want == DateTime && len(s) > 10 {
			k = DateTime
		} else if want == DateTime {
			// a dateTime of date precision stays a DateTime
			k = DateTime
		}
	}
	return Parse(s, k)
}

// Parse parses the text of a value of kind k (a Time without its 'T').
func Parse(s string, k Kind) (*Value, error) {
	d := &Value{kind: k}
	bad := fmt.Errorf("invalid date/time %q", s)
	i := 0
	num := func(n int) (int, bool) {
		if i+n > len(s) {
			return 0, false
		}
		v := 0
		for j := 0; j < n; j++ {
			c := s[i+j]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		i += n
		return v, true
	}
	var ok bool
	timePart := func() error {
		if d.h, ok = num(2); !ok {
			return bad
		}
		d.prec = pHour
		if i < len(s) && s[i] == ':' {
			i++
			if d.mi, ok = num(2); !ok {
				return bad
			}
			d.prec = pMinute
			if i < len(s) && s[i] == ':' {
				i++
				if d.s, ok = num(2); !ok {
					return bad
				}
				d.prec = pSecond
				if i < len(s) && s[i] == '.' {
					i++
					st := i
					for i < len(s) && s[i] >= '0' && s[i] <= '9' {
						i++
					}
					if i == st {
						return bad
					}
					f := s[st:i]
					d.frac = len(f)
					for len(f) < 9 {
						f += "0"
					}
					d.ns, _ = strconv.Atoi(f[:9])
					d.prec = pMilli
				}
			}
		}
		if d.h > 23 || d.mi > 59 || d.s > 59 {
			return bad
		}
		return nil
	}
	if k == Time {
		if err := timePart(); err != nil {
			return nil, err
		}
		if i != len(s) {
			return nil, bad
		}
		return d, nil
	}
	if d.y, ok = num(4); !ok {
		return nil, bad
	}
	d.prec = pYear
	d.mo, d.d = 1, 1
	if i < len(s) && s[i] == '-' {
		i++
		if d.mo, ok = num(2); !ok || d.mo < 1 || d.mo > 12 {
			return nil, bad
		}
		d.prec = pMonth
		if i < len(s) && s[i] == '-' {
			i++
			if d.d, ok = num(2); !ok || d.d < 1 || d.d > daysIn(d.y, d.mo) {
				return nil, bad
			}
			d.prec = pDay
		}
	}
	if i < len(s) && s[i] == 'T' {
		if k == Date {
			return nil, bad
		}
		i++
		if i < len(s) {
			if err := timePart(); err != nil {
				return nil, err
			}
		}
		if i < len(s) {
			switch s[i] {
			case 'Z':
				d.tz = true
				i++
			case '+', '-':
				sign := 1
				if s[i] == '-' {
					sign = -1
				}
				i++
				hh, ok1 := num(2)
				if i >= len(s) || s[i] != ':' {
					return nil, bad
				}
				i++
				mm, ok2 := num(2)
				if !ok1 || !ok2 || hh > 14 || mm > 59 {
					return nil, bad
				}
				d.tz = true
				d.off = sign * (hh*3600 + mm*60)
			}
		}
	}
	if i != len(s) {
		return nil, bad
	}
	return d, nil
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// String renders the value in FHIRPath literal form without the '@'.
func (d *Value) String() string {
	var b strings.Builder
	if d.kind == Time {
		b.WriteString("T")
		d.writeTime(&b)
		return b.String()[1:]
	}
	fmt.Fprintf(&b, "%04d", d.y)
	if d.prec >= pMonth {
		fmt.Fprintf(&b, "-%02d", d.mo)
	}
	if d.prec >= pDay {
		fmt.Fprintf(&b, "-%02d", d.d)
	}
	if d.kind == DateTime && d.prec >= pHour {
		b.WriteByte('T')
		d.writeTime(&b)
		if d.tz {
			if d.off == 0 {
				b.WriteString("Z")
			} else {
				o := d.off
				sign := '+'
				if o < 0 {
					sign, o = '-', -o
				}
				fmt.Fprintf(&b, "%c%02d:%02d", sign, o/3600, o%3600/60)
			}
		}
	} else if d.kind == DateTime && d.prec < pHour {
		b.WriteByte('T')
	}
	return b.String()
}

func (d *Value) writeTime(b *strings.Builder) {
	fmt.Fprintf(b, "%02d", d.h)
	if d.prec >= pMinute {
		fmt.Fprintf(b, ":%02d", d.mi)
	}
	if d.prec >= pSecond {
		fmt.Fprintf(b, ":%02d", d.s)
	}
	if d.prec >= pMilli {
		n := d.frac
		if n < 3 {
			n = 3
		}
		if n > 9 {
			n = 9
		}
		f := fmt.Sprintf("%09d", d.ns)
		fmt.Fprintf(b, ".%s", f[:n])
	}
}

// FHIRString renders the value as FHIR JSON would (no 'T' for partial
// dateTimes).
func (d *Value) FHIRString() string {
	return strings.TrimSuffix(d.String(), "T")
}

// FromTime makes a value of kind k from a clock reading, at millisecond
// precision (day precision for a Date).
func FromTime(t time.Time, k Kind) *Value {
	_, off := t.Zone()
	d := &Value{kind: k, y: t.Year(), mo: int(t.Month()), d: t.Day(), h: t.Hour(), mi: t.Minute(), s: t.Second(),
		ns: t.Nanosecond() / 1e6 * 1e6, frac: 3, tz: k == DateTime, off: off}
	switch k {
	case Date:
		d.prec = pDay
	default:
		d.prec = pMilli
	}
	return d
}

// AsDate converts a DateTime to the Date it falls on (toDate()).
func (d *Value) AsDate() *Value {
	n := *d
	n.kind = Date
	n.prec = min(n.prec, pDay)
	n.tz = false
	return &n
}

// AsDateTime converts a Date to a DateTime of the same precision
// (toDateTime()).
func (d *Value) AsDateTime() *Value {
	n := *d
	n.kind = DateTime
	return &n
}
