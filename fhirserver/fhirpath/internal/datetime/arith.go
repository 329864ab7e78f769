package datetime

import "time"

// Add adds amount of a calendar unit to d, keeping its precision.
func (d *Value) Add(amount int64, unit string) (*Value, bool) {
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
		if n.kind == Time {
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
	if d.kind == Time && step >= 24*time.Hour {
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
	if n.kind != Time && (n.y < 1 || n.y > 9999) {
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

// Digits is the precision of the value counted in digits, as precision()
// and the boundary functions count it.
func (d *Value) Digits() int {
	if d.kind == Time {
		return [...]int{pHour: 2, pMinute: 4, pSecond: 6, pMilli: 9}[d.prec]
	}
	return [...]int{pYear: 4, pMonth: 6, pDay: 8, pHour: 10, pMinute: 12, pSecond: 14, pMilli: 17}[d.prec]
}

func precFromDigits(k Kind, n int64) (int, bool) {
	if k == Time {
		switch n {
		case 2:
			return pHour, true
		case 4:
			return pMinute, true
		case 6:
			return pSecond, true
		case 9:
			return pMilli, true
		}
		return 0, false
	}
	switch n {
	case 4:
		return pYear, true
	case 6:
		return pMonth, true
	case 8:
		return pDay, true
	case 10:
		return pHour, true
	case 12:
		return pMinute, true
	case 14:
		return pSecond, true
	case 17:
		return pMilli, true
	}
	return 0, false
}

// Boundary is the least (or, with high, the greatest) value the value
// can stand for at a precision of digits (see Digits): the components
// below its own precision are filled with their least or greatest
// values. ok=false when digits is not a precision of the value's kind.
func (d *Value) Boundary(digits int64, high bool) (*Value, bool) {
	prec, ok := precFromDigits(d.kind, digits)
	if !ok {
		return nil, false
	}
	return d.boundary(prec, high), true
}

// boundary fills the components below the value's precision with their
// least (or greatest) values, up to prec.
func (d *Value) boundary(prec int, high bool) *Value {
	n := *d
	k := d.kind
	if k == DateTime && prec <= pDay {
		k = Date
	}
	if n.kind == DateTime && n.prec == pHour {
		n.prec = pMinute // T08 means 08:00
	}
	if prec > n.prec {
		for p := n.prec + 1; p <= prec; p++ {
			switch p {
			case pMonth:
				n.mo = pick(high, 1, 12)
			case pDay:
				n.d = pick(high, 1, daysIn(n.y, n.mo))
			case pHour:
				n.h = pick(high, 0, 23)
			case pMinute:
				n.mi = pick(high, 0, 59)
			case pSecond:
				n.s = pick(high, 0, 59)
			case pMilli:
				n.ns = pick(high, 0, 999000000)
				n.frac = 3
			}
		}
		if n.prec < pMilli && prec >= pSecond && prec == pMilli {
			n.frac = 3
		}
		if k == DateTime && !n.tz && prec >= pHour {
			n.tz = true
			n.off = pick(high, 14*3600, -12*3600)
		}
	}
	n.prec = prec
	n.kind = k
	if k == Date {
		n.tz = false
	}
	return &n
}

func pick(high bool, lo, hi int) int {
	if high {
		return hi
	}
	return lo
}
