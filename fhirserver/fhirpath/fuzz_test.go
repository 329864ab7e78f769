package fhirpath

import (
	"context"
	"fmt"
	"testing"
	"time"
)

var fuzzSeeds = []string{
	"Patient.name.family", "name.where(use = 'official').given.first()", "1 + 2 * 3 div 4 mod 5",
	"@2015-02-04T14:34:28.123+09:00 + 1 month", "4 'mg' = 4000 'ug'", "(1|2|3).aggregate($this + $total, 0)",
	"descendants().ofType(Coding).code", "iif(a.exists(), 'x', 'y')", "repeat(item).linkId", "'x'.matches('[a-z]+')",
	"%`ext-foo`.length()", "children().count() > 1 implies true xor false", "value.as(Quantity).toString()",
	"'1.0'.toDecimal().round(0).lowBoundary()", "(1|2).sort(-$this)",
}

func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		e, err := Compile(expr)
		if err == nil && e == nil {
			t.Fatal("nil expression without error")
		}
	})
}

func FuzzEvaluate(f *testing.F) {
	inputs := []any{
		loadJSON(f, "patient.json"),
		loadJSON(f, "observation.json"),
		map[string]any{"a": []any{map[string]any{"a": []any{1.5, "x", true}}, nil}, "_a": []any{nil, map[string]any{"id": "z"}}},
	}
	for _, s := range fuzzSeeds {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, expr string, which uint8) {
		// A hang would stall the fuzzer silently; crash instead so the
		// input is recorded.
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("evaluation of %q hangs", expr)) })
		defer watchdog.Stop()
		e, err := Compile(expr)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		_, _ = e.Evaluate(ctx, inputs[int(which)%len(inputs)], WithLimits(Limits{MaxCollection: 10000, MaxDepth: 100}))
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("%q took %v", expr, d)
		}
	})
}
