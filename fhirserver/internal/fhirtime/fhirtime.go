// Package fhirtime parses FHIR date, dateTime and instant values with their
// partial precision. A partial value denotes a range: "2024-03" is every
// instant of March 2024. Search prefixes and the history parameters _since
// and _at compare against that range.
package fhirtime

import (
	"errors"
	"fmt"
	"time"
)

// Precision is how much of a date-time value was given.
type Precision int

const (
	Year Precision = iota + 1
	Month
	Day
	Minute
	Second
	Millisecond // any fractional seconds
)

// Value is a parsed date, dateTime or instant.
type Value struct {
	// Low is the first instant the value denotes, High the first instant
	// after it: the value is the half-open range [Low, High).
	Low, High time.Time
	Precision Precision
	// Zoned reports whether the text carried a time zone. Values without one
	// are read in UTC.
	Zoned bool
}

var errSyntax = errors.New("not a FHIR date, dateTime or instant")

// Parse reads YYYY, YYYY-MM, YYYY-MM-DD, or YYYY-MM-DDThh:mm[:ss[.fff…]][Z|±hh:mm].
func Parse(s string) (Value, error) {
	v, err := parse(s)
	if err != nil {
		return Value{}, fmt.Errorf("%q: %w", s, err)
	}
	return v, nil
}

func parse(s string) (Value, error) {
	p := parser{s: s}
	year := p.digits(4)
	if p.err != nil {
		return Value{}, p.err
	}
	month, day := 1, 1
	prec := Year
	if p.more() {
		p.expect('-')
		month = p.digits(2)
		prec = Month
		if p.more() {
			p.expect('-')
			day = p.digits(2)
			prec = Day
		}
	}
	hour, min, sec, nsec := 0, 0, 0, 0
	loc := time.UTC
	zoned := false
	if prec == Day && p.more() {
		p.expect('T')
		hour = p.digits(2)
		p.expect(':')
		min = p.digits(2)
		prec = Minute
		if p.peek() == ':' {
			p.expect(':')
			sec = p.digits(2)
			prec = Second
			if p.peek() == '.' {
				p.expect('.')
				nsec = p.fraction()
				prec = Millisecond
			}
		}
		if p.more() {
			loc = p.zone()
			zoned = true
		}
	}
	if p.err == nil && p.more() {
		p.err = errSyntax
	}
	if p.err != nil {
		return Value{}, p.err
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || min > 59 || sec > 59 {
		return Value{}, errors.New("date or time out of range")
	}
	low := time.Date(year, time.Month(month), day, hour, min, sec, nsec, loc)
	var high time.Time
	switch prec {
	case Year:
		high = low.AddDate(1, 0, 0)
	case Month:
		high = low.AddDate(0, 1, 0)
	case Day:
		high = low.AddDate(0, 0, 1)
	case Minute:
		high = low.Add(time.Minute)
	case Second:
		high = low.Add(time.Second)
	default:
		high = low.Add(time.Millisecond)
	}
	return Value{Low: low.UTC(), High: high.UTC(), Precision: prec, Zoned: zoned}, nil
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

type parser struct {
	s   string
	i   int
	err error
}

func (p *parser) more() bool { return p.err == nil && p.i < len(p.s) }

func (p *parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) expect(c byte) {
	if p.err != nil {
		return
	}
	if p.peek() != c {
		p.err = errSyntax
		return
	}
	p.i++
}

func (p *parser) digits(n int) int {
	if p.err != nil {
		return 0
	}
	v := 0
	for k := 0; k < n; k++ {
		c := p.peek()
		if c < '0' || c > '9' {
			p.err = errSyntax
			return 0
		}
		v = v*10 + int(c-'0')
		p.i++
	}
	return v
}

// fraction reads fractional seconds (1–9 digits) as nanoseconds.
func (p *parser) fraction() int {
	start := p.i
	ns := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if p.i-start < 9 {
			ns = ns*10 + int(p.s[p.i]-'0')
		}
		p.i++
	}
	n := p.i - start
	if n == 0 || n > 9 {
		p.err = errSyntax
		return 0
	}
	for ; n < 9; n++ {
		ns *= 10
	}
	return ns
}

func (p *parser) zone() *time.Location {
	switch c := p.peek(); c {
	case 'Z':
		p.i++
		return time.UTC
	case '+', '-', ' ':
		// ' ' is a '+' that arrived unescaped in a query string.
		p.i++
		h := p.digits(2)
		p.expect(':')
		m := p.digits(2)
		if p.err != nil || h > 14 || m > 59 {
			p.err = errSyntax
			return time.UTC
		}
		off := h*3600 + m*60
		if c == '-' {
			off = -off
		}
		return time.FixedZone("", off)
	}
	p.err = errSyntax
	return time.UTC
}
