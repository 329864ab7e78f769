package fhirpath

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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

// dateTime is a partial Date, DateTime or Time.
type dateTime struct {
	kind                   kind
	y, mo, d, h, mi, s, ns int
	prec                   int
	frac                   int // number of fractional second digits written
	tz                     bool
	off                    int // seconds east of UTC
}

// parseDateTimeLiteral parses the body of an @ literal.
func parseDateTimeLiteral(s string) (Value, error) {
	k := kDate
	if strings.HasPrefix(s, "T") {
		k = kTime
		s = s[1:]
	} else if strings.Contains(s, "T") {
		k = kDateTime
	}
	d, err := parseDT(s, k)
	if err != nil {
		return Value{}, err
	}
	return Value{k: d.kind, d: d}, nil
}

// parseFHIRDateTime parses a FHIR date, dateTime, instant or time string.
func parseFHIRDateTime(s string, want kind) (*dateTime, error) {
	k := want
	if want != kTime {
		if strings.Contains(s, "T") {
			k = kDateTime
		} else if want == kDateTime && len(s) > 10 {
			k = kDateTime
		} else if want == kDateTime {
			// a dateTime of date precision stays a DateTime
			k = kDateTime
		}
	}
	return parseDT(s, k)
}

func parseDT(s string, k kind) (*dateTime, error) {
	d := &dateTime{kind: k}
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
	if k == kTime {
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
		if k == kDate {
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
func (d *dateTime) String() string {
	var b strings.Builder
	if d.kind == kTime {
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
	if d.kind == kDateTime && d.prec >= pHour {
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
	} else if d.kind == kDateTime && d.prec < pHour {
		b.WriteByte('T')
	}
	return b.String()
}

func (d *dateTime) writeTime(b *strings.Builder) {
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

// literal renders the value as a FHIRPath literal, with '@'.
func (d *dateTime) literal() string {
	if d.kind == kTime {
		return "@T" + d.String()
	}
	return "@" + d.String()
}

// fhirString renders the value as FHIR JSON would (no 'T' for partial
// dateTimes).
func (d *dateTime) fhirString() string {
	return strings.TrimSuffix(d.String(), "T")
}

// toTime converts to time.Time in the value's own offset.
func (d *dateTime) toTime() time.Time {
	loc := time.UTC
	if d.tz && d.off != 0 {
		loc = time.FixedZone("", d.off)
	}
	if d.kind == kTime {
		return time.Date(0, 1, 1, d.h, d.mi, d.s, d.ns, loc)
	}
	return time.Date(d.y, time.Month(d.mo), d.d, d.h, d.mi, d.s, d.ns, loc)
}

// fromTime copies the fields of t into a dateTime of the same shape as d.
func (d *dateTime) fromTime(t time.Time) *dateTime {
	n := *d
	if d.kind != kTime {
		n.y, n.mo, n.d = t.Year(), int(t.Month()), t.Day()
	}
	n.h, n.mi, n.s, n.ns = t.Hour(), t.Minute(), t.Second(), t.Nanosecond()
	return &n
}

// utc normalizes a value with a time zone and at least hour precision.
func (d *dateTime) utc() *dateTime {
	if !d.tz || d.prec < pHour || d.off == 0 {
		return d
	}
	n := d.fromTime(d.toTime().UTC())
	n.off = 0
	return n
}

// fields returns the comparable components for each precision.
func (d *dateTime) fields() [6]int {
	if d.kind == kTime {
		return [6]int{d.h, d.mi, d.s*1000000000 + d.ns}
	}
	return [6]int{d.y, d.mo, d.d, d.h, d.mi, d.s*1000000000 + d.ns}
}

// cmpPrec maps a precision to the number of compared fields.
func (d *dateTime) cmpPrec() int {
	p := d.prec
	if p == pMilli {
		p = pSecond
	}
	if d.kind == kTime {
		return p - pHour + 1
	}
	return p
}

// compareDT compares two dates/times: ok=false when the answer depends on
// precision the values do not have.
func compareDT(a, b *dateTime) (int, bool) {
	if (a.kind == kTime) != (b.kind == kTime) {
		return 0, false
	}
	if a.tz || b.tz {
		if a.tz != b.tz && a.prec >= pHour && b.prec >= pHour {
			return 0, false
		}
		a, b = a.utc(), b.utc()
	}
	fa, fb := a.fields(), b.fields()
	pa, pb := a.cmpPrec(), b.cmpPrec()
	n := min(pa, pb)
	for i := 0; i < n; i++ {
		if fa[i] != fb[i] {
			if fa[i] < fb[i] {
				return -1, true
			}
			return 1, true
		}
	}
	if pa != pb {
		return 0, false
	}
	return 0, true
}

// addDuration adds amount of a calendar unit to d, keeping its precision.
func addDuration(d *dateTime, amount int64, unit string) (*dateTime, bool) {
	// No amount larger than the span of years 0001-9999 can land inside
	// it; rejecting those first keeps the multiplications below from
	// overflowing (10000 years < 10000*366*86400000 ms < 2^63).
	if lim := maxCalendarAmount(unit); lim == 0 || amount > lim || amount < -lim {
		return nil, false
	}
	switch unit {
	case "year", "month":
		months := amount
		if unit == "year" {
			months *= 12
		}
		n := *d
		if n.kind == kTime {
			return nil, false
		}
		total := int64(n.y)*12 + int64(n.mo-1) + months
		if total < 0 || total > 9999*12+11 {
			return nil, false
		}
		n.y, n.mo = int(total/12), int(total%12)+1
		if dm := daysIn(n.y, n.mo); n.d > dm {
			n.d = dm
		}
		return &n, true
	}
	var step time.Duration
	switch unit {
	case "week":
		step = 7 * 24 * time.Hour
	case "day":
		step = 24 * time.Hour
	case "hour":
		step = time.Hour
	case "minute":
		step = time.Minute
	case "second":
		step = time.Second
	case "millisecond":
		step = time.Millisecond
	default:
		return nil, false
	}
	if d.kind == kTime && step >= 24*time.Hour {
		return nil, false
	}
	t := d.toTime()
	if step >= 24*time.Hour {
		t = t.AddDate(0, 0, int(amount*int64(step/(24*time.Hour))))
	} else {
		// whole days first: amount*step may not fit a time.Duration
		perDay := int64(24 * time.Hour / step)
		t = t.AddDate(0, 0, int(amount/perDay)).Add(time.Duration(amount%perDay) * step)
	}
	n := d.fromTime(t)
	if n.kind != kTime && (n.y < 1 || n.y > 9999) {
		return nil, false
	}
	return n, true
}

// maxCalendarAmount is the largest magnitude of amount of unit that can
// keep a date inside years 0001-9999; 0 for an unknown unit.
func maxCalendarAmount(unit string) int64 {
	const days = 10000 * 366
	switch unit {
	case "year":
		return 10000
	case "month":
		return 10000 * 12
	case "week":
		return days / 7
	case "day":
		return days
	case "hour":
		return days * 24
	case "minute":
		return days * 24 * 60
	case "second":
		return days * 24 * 60 * 60
	case "millisecond":
		return days * 24 * 60 * 60 * 1000
	}
	return 0
}
