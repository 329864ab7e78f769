// Command suite runs the official FHIRPath R4 test suite
// (tests-fhir-r4.xml) against the engine and prints every failure and,
// as the last line, "fhirpath: N passed, M failed".
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
)

type suiteXML struct {
	Groups []struct {
		Name  string     `xml:"name,attr"`
		Tests []testCase `xml:"test"`
	} `xml:"group"`
}

type testCase struct {
	Name      string `xml:"name,attr"`
	InputFile string `xml:"inputfile,attr"`
	Predicate string `xml:"predicate,attr"`
	Mode      string `xml:"mode,attr"`
	Invalid   string `xml:"invalid,attr"`
	Expr      struct {
		Text    string `xml:",chardata"`
		Invalid string `xml:"invalid,attr"`
	} `xml:"expression"`
	Outputs []struct {
		Type string `xml:"type,attr"`
		Text string `xml:",chardata"`
	} `xml:"output"`
}

func main() {
	dir := flag.String("dir", "../shared/fhirpath", "folder holding tests-fhir-r4.xml and input/")
	minPass := flag.Float64("min", 0, "minimum passed fraction (exit 1 below it)")
	flag.Parse()
	if _, err := os.Stat(*dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Printf("fhirpath: %s is absent; suite not run\n", *dir)
		return
	}
	data, err := os.ReadFile(filepath.Join(*dir, "tests-fhir-r4.xml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var s suiteXML
	if err := xml.Unmarshal(data, &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	inputs := map[string]any{}
	// Load the type definitions once, outside the per-test timeouts.
	_, _ = fhirpath.MustCompile("Patient.name").Evaluate(context.Background(), map[string]any{"resourceType": "Patient"})
	passed, failed := 0, 0
	for _, g := range s.Groups {
		for _, t := range g.Tests {
			if msg := run(*dir, inputs, t); msg != "" {
				failed++
				fmt.Printf("FAIL %s/%s: %s\n    %s\n", g.Name, t.Name, strings.TrimSpace(t.Expr.Text), msg)
			} else {
				passed++
			}
		}
	}
	fmt.Printf("fhirpath: %d passed, %d failed\n", passed, failed)
	if total := passed + failed; total > 0 && float64(passed)/float64(total) < *minPass {
		os.Exit(1)
	}
}

func loadInput(dir string, cache map[string]any, name string) (any, error) {
	if name == "" {
		return nil, nil
	}
	name = strings.TrimSuffix(name, filepath.Ext(name)) + ".json"
	if v, ok := cache[name]; ok {
		return v, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "input", name))
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	cache[name] = v
	return v, nil
}

// run returns "" when the test passes, or a description of the failure.
func run(dir string, inputs map[string]any, t testCase) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("panic: %v", r)
		}
	}()
	invalid := t.Invalid != "" || t.Expr.Invalid != ""
	input, err := loadInput(dir, inputs, t.InputFile)
	if err != nil {
		return "input: " + err.Error()
	}
	expr, err := fhirpath.Compile(t.Expr.Text)
	if err != nil {
		if invalid {
			return ""
		}
		return "compile error: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := expr.Evaluate(ctx, input, fhirpath.WithNow(time.Now()), fhirpath.WithStrict(t.Mode == "strict"))
	if err != nil {
		if invalid {
			return ""
		}
		return "error: " + err.Error()
	}
	if invalid {
		return "expected an error, got " + render(res)
	}
	if t.Predicate == "true" {
		// predicate tests compare the result's existence
		got := len(res) > 0
		res = fhirpath.Collection{}
		if got {
			res = trueValue()
		} else {
			res = falseValue()
		}
	}
	want := make([]string, len(t.Outputs))
	for i, o := range t.Outputs {
		want[i] = o.Type + ":" + o.Text
	}
	got := make([]string, len(res))
	for i, v := range res {
		got[i] = describe(v)
	}
	if len(want) != len(got) {
		return fmt.Sprintf("expected %v, got %v", want, got)
	}
	for i := range want {
		if !matches(t.Outputs[i].Type, t.Outputs[i].Text, res[i]) {
			return fmt.Sprintf("expected %v, got %v", want, got)
		}
	}
	return ""
}

func trueValue() fhirpath.Collection {
	c, _ := fhirpath.MustCompile("true").Evaluate(context.Background(), nil)
	return c
}
func falseValue() fhirpath.Collection {
	c, _ := fhirpath.MustCompile("false").Evaluate(context.Background(), nil)
	return c
}

func render(c fhirpath.Collection) string {
	b, _ := json.Marshal(c)
	return string(b)
}

func describe(v fhirpath.Value) string {
	return v.TypeName() + ":" + v.String()
}

// matches compares one expected output with an actual value.
func matches(typ, text string, v fhirpath.Value) bool {
	s := v.String()
	tn := v.TypeName()
	if typ == "" && strings.HasPrefix(text, "@") {
		typ = "date"
	}
	switch typ {
	case "date", "dateTime", "time":
		return "@"+strings.TrimPrefix(s, "T") == text || "@"+s == text || "@T"+s == text
	case "Quantity":
		return s == text && strings.HasSuffix(tn, "Quantity")
	case "boolean":
		return s == text && strings.HasSuffix(tn, "Boolean") || (tn == "FHIR.boolean" && s == text)
	case "integer":
		return s == text && (strings.HasSuffix(tn, "Integer") || strings.HasPrefix(tn, "FHIR."))
	case "decimal":
		return s == text
	}
	return s == text
}
