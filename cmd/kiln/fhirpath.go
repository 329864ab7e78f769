package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
)

// varFlags collects repeated --var name=value flags.
type varFlags []string

func (v *varFlags) String() string     { return strings.Join(*v, ",") }
func (v *varFlags) Set(s string) error { *v = append(*v, s); return nil }

// runFHIRPath is `kiln fhirpath [--resource FILE|-] [--var name=value]... EXPRESSION`:
// it evaluates an expression and prints the result collection as a JSON array.
func runFHIRPath(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kiln fhirpath", flag.ContinueOnError)
	fs.SetOutput(stderr)
	resource := fs.String("resource", "", "FHIR JSON resource to evaluate against (a file, or - for standard input)")
	var vars varFlags
	fs.Var(&vars, "var", "environment variable name=value (value: JSON, or else a string); repeatable")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: "+synopsis("fhirpath"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	expr, err := fhirpath.Compile(fs.Arg(0))
	if err != nil {
		return err
	}
	var input any
	if *resource != "" {
		if input, err = readResource(*resource, stdin); err != nil {
			return err
		}
	}
	var opts []fhirpath.Option
	for _, v := range vars {
		name, raw, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("--var %q: want name=value", v)
		}
		opts = append(opts, fhirpath.WithVariable(name, parseVarValue(raw)))
	}
	out, err := expr.Evaluate(ctx, input, opts...)
	if err != nil {
		return err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func readResource(name string, stdin io.Reader) (any, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(r)
	dec.UseNumber() // keep decimals exact
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("--resource: not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("--resource: more than one JSON value")
	}
	return v, nil
}

// parseVarValue reads a --var value as JSON when it is JSON, else as a string.
func parseVarValue(raw string) any {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		return v
	}
	return raw
}
