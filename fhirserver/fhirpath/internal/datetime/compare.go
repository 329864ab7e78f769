package datetime

import (
	"strconv"
	"time"
)

// toTime converts to time.Time in the value's own offset.
func (d *Value) toTime() time.Time {
	loc := time.UTC
	if d.tz && d.off != 0 {
		loc = time.FixedZone("", d.off)
	}
	if d.kind == Time {
		return time.Date(0, 1, 1, d.h, d.mi, d.s, d.ns, loc)
	}
	return time.Date(d.y, time.Month(d.mo), d.d, d.h, d.mi, d.s, d.ns, loc)
}

// fromTime copies the fields of t into a value of the same shape as d.
func (d *Value) fromTime(t time.Time) *Value {
	n := *d
	if d.kind != Time {
		n.y, n.mo, n.d = t.Year(), int(t.Month()), t.Day()
	}
	n.h, n.mi, n.s, n.ns = t.Hour(), t.Minute(), t.Second(), t.Nanosecond()
	return &n
}

// utc normalizes a value with a time zone and at least hour precision.
func (d *Value) utc() *Value {
	if !d.tz || d.prec < pHour || d.off == 0 {
		return d
	}
	n := d.fromTime(d.toTime().UTC())
	n.off = 0
	return n
}

// fields returns the comparable components for each precision.
func (d *Value) fields() [6]int {
	if d.kind == Time {
		return [6]int{d.h, d.mi, d.s*1000000000 + d.ns}
	}
	return [6]int{d.y, d.mo, d.d, d.h, d.mi, d.s*1000000000 + d.ns}
}

// cmpPrec maps a precision to the number of compared fields.
func (d *Value) cmpPrec() int {
	p := d.prec
	if p == pMilli {
		p = pSecond
	}
	if d.kind == Time {
		return p - pHour + 1
	}
	return p
}

// Compare compares two dates/times: ok=false when the answer depends on
// precision the values do not have.
func Compare(a, b *Value) (int, bool) {
	if (a.kind == Time) != (b.kind == Time) {
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

// SamePrecision reports whether a and b are known to the same precision,
// seconds and fractions of a second counting as one (for ~).
func SamePrecision(a, b *Value) bool { return a.cmpPrec() == b.cmpPrec() }

// UTCString is the literal form of the value moved to UTC: values equal
// at the same precision share it.
func (d *Value) UTCString() string { return d.utc().String() }

// EqualityKey is shared by all values that Compare finds equal: the
// kind (Time or not), the compared precision and the fields up to it,
// in UTC. So 10:00:00 and 10:00:00.000, or a Date and a DateTime of the
// same day, share a key.
func (d *Value) EqualityKey() string {
	d = d.utc()
	f := d.fields()
	n := d.cmpPrec()
	b := make([]byte, 0, 48)
	if d.kind == Time {
		b = append(b, 'T')
	} else {
		b = append(b, 'D')
	}
	b = strconv.AppendInt(b, int64(n), 10)
	for i := 0; i < n && i < len(f); i++ {
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(f[i]), 10)
	}
	return string(b)
}
