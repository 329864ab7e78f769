package fhirpath

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// hangGuard is a generous deadline that only stops a hung evaluation; the
// tests never assert on speed.
const hangGuard = 20 * time.Second

// evalGuarded evaluates expr under a hang-guard deadline and renders the
// result as JSON.
func evalGuarded(t *testing.T, expr string, res any, opts ...Option) (string, error) {
	t.Helper()
	e, err := Compile(expr)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c, err := e.Evaluate(ctx, res, opts...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%q did not end within the hang guard", expr)
	}
	if err != nil {
		return "", err
	}
	b, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b), nil
}

// cancelAfter is a context that reports cancellation from the n-th call
// of Err() on: it makes "cancellation is honoured here" deterministic.
type cancelAfter struct {
	context.Context
	n, calls atomic.Int64
}

func newCancelAfter(n int64) *cancelAfter {
	c := &cancelAfter{Context: context.Background()}
	c.n.Store(n)
	return c
}

func (c *cancelAfter) Err() error {
	if c.calls.Add(1) >= c.n.Load() {
		return context.Canceled
	}
	return nil
}

// hostile is a table row: an expression that grows without bound must end
// with an error (or empty), never exhaust memory or hang.
type hostile struct {
	name, expr string
	opts       []Option
	wantErr    error // nil: any error or an empty result
}

func runHostile(t *testing.T, tests []hostile) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalGuarded(t, tt.expr, nil, tt.opts...)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("%q = %s, %v; want error %v", tt.expr, got, err, tt.wantErr)
			case tt.wantErr == nil && err == nil && got != "[]":
				t.Fatalf("%q = %s; want an error or empty", tt.expr, got)
			}
		})
	}
}

type exprCase struct {
	expr, want string
}

func runCases(t *testing.T, res any, tests []exprCase, opts ...Option) {
	t.Helper()
	for _, tt := range tests {
		got, err := evalGuarded(t, tt.expr, res, opts...)
		if err != nil {
			t.Errorf("%q: unexpected error %v", tt.expr, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q = %s, want %s", tt.expr, got, tt.want)
		}
	}
}

func runErrors(t *testing.T, res any, exprs []string) {
	t.Helper()
	for _, expr := range exprs {
		if got, err := evalGuarded(t, expr, res); err == nil {
			t.Errorf("%q = %s, want an error", expr, got)
		}
	}
}

// combine() and aggregate() are bounded by Limits.MaxCollection.
func TestFixCombineAggregateLimits(t *testing.T) {
	runHostile(t, []hostile{
		{"doubling combine", `'aaaaaaaaaaaaaaaaaaaaaaaaa'.toChars().aggregate($total.combine($total), 1).count()`, nil, value.ErrTooLarge},
		{"doubling combine small limit", `'aaaaaaaaaaaaaaaaaaaaaaaaa'.toChars().aggregate($total.combine($total), 1).count()`,
			[]Option{WithLimits(Limits{MaxCollection: 1000})}, value.ErrTooLarge},
		{"combine over limit", `(1|2|3).combine(4|5|6)`, []Option{WithLimits(Limits{MaxCollection: 5})}, value.ErrTooLarge},
		{"aggregate total over limit", `(1|2|3).aggregate($total | $this, {}).count()`, []Option{WithLimits(Limits{MaxCollection: 2})}, value.ErrTooLarge},
		// A small limit: at the default one this takes seconds under the
		// race detector (the default limit is proven by doubling combine).
		{"doubling select in aggregate", `'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'.toChars().aggregate($total.select($this | ($this + 1000000)), 1).count()`,
			[]Option{WithLimits(Limits{MaxCollection: 10000})}, nil},
	})
	// The specification's results are unchanged within the limits.
	runCases(t, nil, []exprCase{
		{`(1|2).combine(2|3)`, `[1,2,2,3]`},
		{`{}.combine(1)`, `[1]`},
		{`(1|2|3).aggregate($total + $this, 0)`, `[6]`},
		{`(1|2|3).aggregate($total.combine($this))`, `[1,2,3]`},
		{`(1|2|3).combine(4|5|6).count()`, `[6]`},
	}, WithLimits(Limits{MaxCollection: 6}))
	runCases(t, nil, []exprCase{
		{`'abcd'.toChars().aggregate($total.combine($total), 1).count()`, `[16]`},
	})
}

// aggregate() checks for cancellation at each step.
func TestFixAggregateCancellation(t *testing.T) {
	e := MustCompile(`(1|2|3).aggregate($total + $this, 0)`)
	// Evaluate itself consults the context once before starting.
	_, err := e.Evaluate(newCancelAfter(2), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// encode, decode, escape and unescape are bounded by the string length
// limit that +, &, replace and join use.
func TestFixStringCodecLimits(t *testing.T) {
	a35 := "'" + strings.Repeat("a", 35) + "'"
	// 2^21 ampersands and 2^22 backslashes: within the string limit, but
	// not once escaped.
	amp21 := "'" + strings.Repeat("a", 21) + "'.toChars().aggregate($total & $total, '&')"
	bsl22 := "'" + strings.Repeat("a", 22) + `'.toChars().aggregate($total & $total, '\\')`
	for expr, want := range map[string]string{amp21 + ".length()": "[2097152]", bsl22 + ".length()": "[4194304]"} {
		if got, err := evalGuarded(t, expr, nil); err != nil || got != want {
			t.Fatalf("%q = %s, %v; want %s", expr, got, err, want)
		}
	}
	runHostile(t, []hostile{
		{"hex doubling", a35 + `.toChars().aggregate($total.encode('hex'), 'xx').length()`, nil, value.ErrTooLarge},
		{"base64 growth", a35 + `.toChars().combine(` + a35 + `.toChars()).aggregate($total.encode('base64'), 'xx').length()`, nil, value.ErrTooLarge},
		{"urlbase64 growth", a35 + `.toChars().combine(` + a35 + `.toChars()).aggregate($total.encode('urlbase64'), 'xx').length()`, nil, value.ErrTooLarge},
		{"html escape of a large text", amp21 + `.escape('html')`, nil, value.ErrTooLarge},
		{"json escape of a large text", bsl22 + `.escape('json')`, nil, value.ErrTooLarge},
		{"json escape growth", a35 + `.toChars().aggregate($total.escape('json'), '\\').length()`, nil, value.ErrTooLarge},
		{"json escape of quotes", a35 + `.toChars().aggregate($total.escape('json') & '"', '"').length()`, nil, value.ErrTooLarge},
	})
	runCases(t, nil, []exprCase{
		{`'abc'.encode('hex')`, `["616263"]`},
		{`'616263'.decode('hex')`, `["abc"]`},
		{`'test'.encode('base64')`, `["dGVzdA=="]`},
		{`'dGVzdA=='.decode('base64')`, `["test"]`},
		{`'subjects?_d'.encode('urlbase64')`, `["c3ViamVjdHM_X2Q="]`},
		{`'c3ViamVjdHM_X2Q='.decode('urlbase64')`, `["subjects?_d"]`},
		{`'"1<2"'.escape('html')`, `["\u0026quot;1\u0026lt;2\u0026quot;"]`},
		{`'&quot;1&lt;2&quot;'.unescape('html')`, `["\"1\u003c2\""]`},
		{`'"1<2"'.escape('json')`, `["\\\"1\u003c2\\\""]`},
		{`'\\"1<2\\"'.unescape('json')`, `["\"1\u003c2\""]`},
		{`'zz'.decode('hex')`, `[]`},
		{`'abc'.encode('rot13')`, `[]`},
		{`'a'.escape('xml')`, `[]`},
		// The length limit leaves room for large but legitimate results.
		{`'abcdefghij'.toChars().aggregate($total & $total, 'x').encode('hex').length()`, `[2048]`},
	})
	// that the precomputed lengths agree with the escapers is proven in
	// package functions
}

// intersect, exclude, subsetOf and supersetOf end within a deadline on
// large inputs and keep FHIRPath equality (=) semantics.
func TestFixSetFunctionsLarge(t *testing.T) {
	s := "'" + strings.Repeat("abcdefghij", 30) + "'"
	lhs := s + `.toChars().select(` + s + `.toChars().select($index))`        // 300 x (0..299)
	rhs := s + `.toChars().select(` + s + `.toChars().select($index + 1000))` // 300 x (1000..1299)
	mid := s + `.toChars().select(` + s + `.toChars().select($index + 100))`  // 300 x (100..399)
	runCases(t, nil, []exprCase{
		{lhs + `.exclude(` + rhs + `).count()`, `[90000]`},
		{lhs + `.exclude(` + mid + `).count()`, `[30000]`},
		{lhs + `.intersect(` + rhs + `).count()`, `[0]`},
		{lhs + `.intersect(` + mid + `).count()`, `[200]`},
		{lhs + `.intersect(` + mid + `).first()`, `[100]`},
		{lhs + `.subsetOf(` + mid + `)`, `[false]`},
		{mid + `.where($this < 300).subsetOf(` + lhs + `)`, `[true]`},
		{lhs + `.supersetOf(` + mid + `.where($this < 300))`, `[true]`},
		{lhs + `.supersetOf(` + rhs + `)`, `[false]`},
	})
}

// The set functions check for cancellation while they compare.
func TestFixSetFunctionsCancellation(t *testing.T) {
	for _, fn := range []string{"intersect", "exclude", "subsetOf", "supersetOf"} {
		e := MustCompile(`%a.` + fn + `(%b)`)
		var a, b Collection
		for i := range 3000 {
			a = append(a, value.Int(int64(i)))
			b = append(b, value.Int(int64(i+100000)))
		}
		// Two calls: the one in Evaluate and the first periodic check.
		_, err := e.Evaluate(newCancelAfter(2), nil, WithVariable("a", a), WithVariable("b", b))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", fn, err)
		}
	}
}

// The indexed path (large collections) answers as the pairwise path
// (small collections) for every kind of value.
func TestFixSetFunctionsEquality(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	pad := make([]any, 0, 100)
	for i := range 100 {
		pad = append(pad, 1_000_000+i)
	}
	pairs := []struct{ a, b, intersect, exclude string }{
		{`(1|2|3)`, `(2|3|4)`, `[2,3]`, `[1]`},
		{`1`, `1.0`, `[1]`, `[]`},
		{`1.0`, `1.00`, `[1.0]`, `[]`},
		{`(1|1|2).combine(1)`, `1`, `[1]`, `[2]`},
		{`('a'|'A')`, `'a'`, `["a"]`, `["A"]`},
		{`true`, `'true'`, `[]`, `[true]`},
		{`@T10:00:00`, `@T10:00:00.000`, `["10:00:00"]`, `[]`},
		{`@2012-01-01T10:00:00+01:00`, `@2012-01-01T09:00:00Z`, `["2012-01-01T10:00:00+01:00"]`, `[]`},
		{`@2012-01-01T10:00`, `@2012-01-01T10:00Z`, `[]`, `["2012-01-01T10:00"]`},
		{`@2012-01-01`, `@2012-01-01T10:00`, `[]`, `["2012-01-01"]`},
		{`@2012`, `@2012-01`, `[]`, `["2012"]`},
		{`(1 'm')`, `(100 'cm')`, `[{"value":1,"unit":"m"}]`, `[]`},
		{`(1 'm')`, `(1 'g')`, `[]`, `[{"value":1,"unit":"m"}]`},
		{`Patient.name.given`, `'Anna'`, `["Anna"]`, `["Marie","Annie"]`},
		{`Patient.name`, `Patient.name.where(use = 'official')`, ``, ``},
		{`Patient.name.combine(Patient.name)`, `Patient.name.first()`, ``, ``},
	}
	for _, p := range pairs {
		small := map[string]string{
			"intersect": p.a + `.intersect(` + p.b + `)`,
			"exclude":   p.a + `.exclude(` + p.b + `)`,
			"subsetOf":  p.a + `.subsetOf(` + p.b + `)`,
			"superset":  p.a + `.supersetOf(` + p.b + `)`,
		}
		// Padding both sides with values that match nothing forces the
		// indexed path; excluding the padding restores the result.
		large := map[string]string{
			"intersect": `(` + p.a + `).combine(%pad).intersect((` + p.b + `).combine(%pad)).exclude(%pad)`,
			"exclude":   `(` + p.a + `).combine(%pad).exclude((` + p.b + `).combine(%pad))`,
			"subsetOf":  `(` + p.a + `).combine(%pad).subsetOf((` + p.b + `).combine(%pad))`,
			"superset":  `(` + p.a + `).combine(%pad).supersetOf((` + p.b + `).combine(%pad))`,
		}
		for fn, expr := range small {
			want, err := evalGuarded(t, expr, pat)
			if err != nil {
				t.Errorf("%q: %v", expr, err)
				continue
			}
			got, err := evalGuarded(t, large[fn], pat, WithVariable("pad", pad))
			if err != nil {
				t.Errorf("%q: %v", large[fn], err)
				continue
			}
			if got != want {
				t.Errorf("%s on large input = %s, on small input = %s (%s / %s)", fn, got, want, p.a, p.b)
			}
			if fn == "intersect" && p.intersect != "" && want != p.intersect {
				t.Errorf("%q = %s, want %s", expr, want, p.intersect)
			}
			if fn == "exclude" && p.exclude != "" && want != p.exclude {
				t.Errorf("%q = %s, want %s", expr, want, p.exclude)
			}
		}
	}
	// Complex values: the whole collection is found by value.
	runCases(t, pat, []exprCase{
		{`Patient.name.combine(%pad).intersect(Patient.name.combine(%pad)).exclude(%pad).count() = Patient.name.count()`, `[true]`},
		{`Patient.name.combine(%pad).exclude(Patient.name).count()`, `[100]`},
		{`Patient.name.combine(%pad).subsetOf(Patient.name.combine(%pad).combine(Patient.name))`, `[true]`},
	}, WithVariable("pad", pad))
}

// log() and power() propagate errors from evaluating their argument.
func TestFixMathArgumentErrors(t *testing.T) {
	runErrors(t, nil, []string{
		`2.power((1|2).single())`,
		`2.log((1|2).single())`,
		`2.power(1|2)`,
		`2.log(1|2)`,
		`2.power('x')`,
		`2.log('x')`,
	})
	runCases(t, nil, []exprCase{
		{`2.power(3)`, `[8]`},
		{`2.5.power(2)`, `[6.25]`},
		{`2.power({})`, `[]`},
		{`{}.power(2)`, `[]`},
		{`16.log(2)`, `[4]`},
		{`100.0.log(10)`, `[2]`},
		{`2.log({})`, `[]`},
		{`(-1).power(0.5)`, `[]`},
	})
	// Cancellation inside the argument reaches the caller.
	s := "'" + strings.Repeat("abcdefghij", 30) + "'"
	for _, fn := range []string{"power", "log"} {
		e := MustCompile(`2.` + fn + `(` + s + `.toChars().where(true).count())`)
		_, err := e.Evaluate(newCancelAfter(2), nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", fn, err)
		}
	}
}

// Boundaries at hour precision fill every lower component.
func TestFixBoundaryHourPrecision(t *testing.T) {
	runCases(t, nil, []exprCase{
		{`@T08.highBoundary()`, `["08:59:59.999"]`},
		{`@T08.lowBoundary()`, `["08:00:00.000"]`},
		{`@T08.highBoundary(4)`, `["08:59"]`},
		{`@2014-01-01T08.lowBoundary(17)`, `["2014-01-01T08:00:00.000+14:00"]`},
		{`@2014-01-01T08:05-05:00.highBoundary(17)`, `["2014-01-01T08:05:59.999-05:00"]`},
		{`@2014-01-01T08.lowBoundary(8)`, `["2014-01-01"]`},
	})
}

// Decimal results of power(), exp(), round() and the conversions are
// bounded as Decimals: at most 28 integer digits (else empty) and 28
// fractional digits.
func TestFixDecimalBounds(t *testing.T) {
	runCases(t, nil, []exprCase{
		{`2.0.power(200)`, `[]`},
		{`2.0.power(200).empty()`, `[true]`},
		{`10.0.power(27) > 0`, `[true]`},
		{`10.0.power(28)`, `[]`},
		{`2.power(200)`, `[]`},
		{`200.exp()`, `[]`},
		{`'99999999999999999999999999999'.toDecimal()`, `[]`},
		{`'99999999999999999999999999999'.convertsToDecimal()`, `[false]`},
		{`'9999999999999999999999999999'.toDecimal()`, `[9999999999999999999999999999]`},
		{`'-99999999999999999999999999999'.toDecimal()`, `[]`},
		{`'0.12345678901234567890123456789012'.toDecimal().precision()`, `[28]`},
		{`'99999999999999999999999999999 \'mg\''.toQuantity()`, `[]`},
		{`'99999999999999999999999999999 \'mg\''.convertsToQuantity()`, `[false]`},
		{`'12 \'mg\''.toQuantity()`, `[{"value":12,"unit":"mg"}]`},
		{`'1.5'.toQuantity()`, `[{"value":1.5,"unit":"1"}]`},
		{`1.5.round(50).precision() <= 28`, `[true]`},
		{`1.5.round(50) = 1.5`, `[true]`},
		{`3.14159.round(3)`, `[3.142]`},
		{`1.5.round()`, `[2]`},
	})
	runErrors(t, nil, []string{`(1.5 'mg').round()`})
}

// join() takes a collection of Strings; an empty input gives empty.
func TestFixJoinStrings(t *testing.T) {
	pat := loadJSON(t, "patient.json")
	runCases(t, pat, []exprCase{
		{`('A' | 'B' | 'C').join()`, `["ABC"]`},
		{`('A' | 'B' | 'C').join(',')`, `["A,B,C"]`},
		{`'A'.join(',')`, `["A"]`},
		{`{}.join(',')`, `[]`},
		{`Patient.name.given.join(',')`, `["Anna,Marie,Annie,Anna"]`},
		{`'A,,C'.split(',').join(',')`, `["A,,C"]`},
	})
	runErrors(t, pat, []string{
		`(1 | 2).join(',')`,
		`('a' | 1).join()`,
		`(true).join()`,
		`Patient.name.join(',')`,
		`@2012.join()`,
	})
}
