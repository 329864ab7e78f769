package fhirpath

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func loadJSON(t testing.TB, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, b)
}

func decodeJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// evalJSON evaluates expr on res and renders the result as JSON.
func evalJSON(t testing.TB, expr string, res any, opts ...Option) (string, error) {
	t.Helper()
	e, err := Compile(expr)
	if err != nil {
		return "", err
	}
	c, err := e.Evaluate(context.Background(), res, opts...)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), nil
}

// evalCase is one expression, its input and its expected JSON result.
type evalCase struct {
	expr string
	res  any
	want string
}

// runEvalCases evaluates each case and compares the JSON of the result.
func runEvalCases(t *testing.T, tests []evalCase) {
	t.Helper()
	for _, tc := range tests {
		got, err := evalJSON(t, tc.expr, tc.res)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s = %s, want %s", tc.expr, got, tc.want)
		}
	}
}
