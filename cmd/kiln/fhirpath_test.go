package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

func TestFHIRPathCommand(t *testing.T) {
	obs := `{"resourceType":"Observation","status":"final","code":{"text":"weight"},` +
		`"valueQuantity":{"value":72.50,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"},"effectiveDateTime":"2026-03-02"}`
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
		err   bool
	}{
		{"scalar arithmetic", []string{"1 + 2"}, "", "[3]", false},
		{"resource from stdin", []string{"--resource", "-", "Observation.status"}, obs, `["final"]`, false},
		{"choice element keeps the client's decimal", []string{"--resource", "-", "Observation.value.value"}, obs, `[72.50]`, false},
		{"complex value as FHIR JSON", []string{"--resource", "-", "Observation.code"}, obs, `[{"text":"weight"}]`, false},
		{"date as its FHIRPath string", []string{"--resource", "-", "Observation.effective"}, obs, `["2026-03-02"]`, false},
		{"UCUM comparison", []string{"--resource", "-", "Observation.value > 70000 'g'"}, obs, `[true]`, false},
		{"JSON variable", []string{"--var", "n=5", "%n * 2"}, "", "[10]", false},
		{"string variable", []string{"--var", "who=world", "'hello ' + %who"}, "", `["hello world"]`, false},
		{"empty result", []string{"--resource", "-", "Observation.subject"}, obs, "[]", false},
		{"parse error", []string{"1 +"}, "", "", true},
		{"bad resource", []string{"--resource", "-", "1"}, "{not json", "", true},
		{"no expression", nil, "", "", true},
		{"malformed variable", []string{"--var", "novalue", "1"}, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"fhirpath"}, tc.args...), strings.NewReader(tc.stdin), &out, io.Discard)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got := strings.TrimSpace(out.String()); !tc.err && got != tc.want {
				t.Errorf("output %s, want %s", got, tc.want)
			}
		})
	}
}
