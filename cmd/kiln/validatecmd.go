package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// validateAbout follows the synopsis of the command table.
const validateAbout = `

Validates FHIR JSON resources offline, as the server does on write:
structure (R4), the base definition of each resource's type, every
meta.profile it knows, and the profiles given with --profile. Folders are
searched for *.json files. Exits 1 when any file has an error.

Output: text lists every issue of every file; summary lists the files with
errors and their first error; json prints the OperationOutcome of a single
file, or a collection Bundle of them (fullUrl = the file).
`

// runValidate is `kiln validate`.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("kiln validate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(stderr, "Usage: "+synopsis("validate")+validateAbout)
		fset.PrintDefaults()
	}
	vc := validationConfig{Mode: "profiles", UnknownProfile: "warn", TypeProfiles: "none"}
	fset.StringVar(&vc.ProfileURL, "profile-url", defaultProfileURL, "canonical base URL of the national profiles")
	fset.StringVar(&vc.UnknownExtensions, "unknown-extensions", "warning", "an extension without a known definition: ignore, warning or error")
	fset.Func("package", "a FHIR package to load: an npm .tgz or a folder (repeatable)", func(s string) error {
		vc.Packages = append(vc.Packages, s)
		return nil
	})
	var want []string
	fset.Func("profile", "validate against this profile too (repeatable)", func(s string) error {
		want = append(want, s)
		return nil
	})
	output := fset.String("output", "text", "text, summary or json")
	baseline := fset.String("baseline", "", "a file listing, one per line, the names of the files expected to have errors (# comments): exit 0 when exactly those have errors")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() == 0 || !slices.Contains([]string{"text", "summary", "json"}, *output) {
		fset.Usage()
		return errUsage
	}
	if err := vc.check(); err != nil {
		return err
	}
	files, err := jsonFiles(fset.Args())
	if err != nil {
		return err
	}
	set, v, err := loadProfiles(vc)
	if err != nil {
		return err
	}
	for _, p := range want {
		if _, ok := set.StructureDefinition(p); !ok {
			return fmt.Errorf("--profile %s: no such profile is loaded", p)
		}
	}
	structural, err := fhirjson.NewValidator(fhirjson.DefaultLimits())
	if err != nil {
		return err
	}
	checker := validation.Checker{Structural: structural, Validation: validation.Config{
		Mode: validation.Profiles, Validator: v, UnknownProfile: validation.UnknownWarn,
		Known: func(url string) bool { _, ok := set.StructureDefinition(url); return ok },
	}}
	check := func(body []byte) ([]outcome.Issue, error) {
		issues, err := checker.Check(ctx, "", body, want...)
		if oe, ok := outcome.As(err); ok {
			return oe.Issues, nil // e.g. larger than the size limit
		}
		return issues, err
	}

	rep := validationReport{out: stdout, mode: *output}
	if *baseline != "" {
		if rep.baseline, err = readBaseline(*baseline); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		body, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		issues, err := check(body)
		if err != nil {
			return err
		}
		rep.add(f, issues)
	}
	return rep.finish()
}

// jsonFiles expands folders into their *.json files, sorted.
func jsonFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".json") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	return files, nil
}

// validationReport prints the results of kiln validate.
type validationReport struct {
	out                     io.Writer
	mode                    string
	files, errors, warnings int
	entries                 []json.RawMessage // json: one OperationOutcome per file
	names                   []string
	baseline                map[string]bool // file names expected to have errors; nil: none is
	failed                  []string        // names of the files with errors
}

func (r *validationReport) add(file string, issues []outcome.Issue) {
	r.files++
	nerr, nwarn := 0, 0
	for _, i := range issues {
		switch i.Severity {
		case "error", "fatal":
			nerr++
		case "warning":
			nwarn++
		}
	}
	if nerr > 0 {
		r.errors++
		r.failed = append(r.failed, filepath.Base(file))
	} else if nwarn > 0 {
		r.warnings++
	}
	switch r.mode {
	case "json":
		if len(issues) == 0 {
			issues = outcome.Information("the resource is valid")
		}
		r.entries = append(r.entries, outcome.Render(issues))
		r.names = append(r.names, file)
	case "summary":
		for _, i := range issues {
			if i.Severity == "error" || i.Severity == "fatal" {
				fmt.Fprintf(r.out, "%s: %s\n", file, issueLine(i))
				break
			}
		}
	default:
		fmt.Fprintf(r.out, "%s: %d errors, %d warnings\n", file, nerr, nwarn)
		for _, i := range issues {
			fmt.Fprintf(r.out, "  %-11s %s\n", i.Severity, issueLine(i))
		}
	}
}

func issueLine(i outcome.Issue) string {
	var b strings.Builder
	if len(i.Expression) > 0 {
		b.WriteString(strings.Join(i.Expression, ", ") + ": ")
	}
	b.WriteString(i.Diagnostics)
	if i.Details != nil {
		b.WriteString(" [" + i.Details.Text + "]")
	}
	return b.String()
}

func (r *validationReport) finish() error {
	switch {
	case r.mode == "json" && len(r.entries) == 1:
		fmt.Fprintf(r.out, "%s\n", r.entries[0])
	case r.mode == "json":
		type entry struct {
			FullURL  string          `json:"fullUrl"`
			Resource json.RawMessage `json:"resource"`
		}
		b := struct {
			ResourceType string  `json:"resourceType"`
			Type         string  `json:"type"`
			Entry        []entry `json:"entry"`
		}{ResourceType: "Bundle", Type: "collection"}
		for i, e := range r.entries {
			abs, err := filepath.Abs(r.names[i])
			if err != nil {
				abs = r.names[i]
			}
			b.Entry = append(b.Entry, entry{FullURL: "file://" + filepath.ToSlash(abs), Resource: e})
		}
		out, err := json.Marshal(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "%s\n", out)
	default:
		fmt.Fprintf(r.out, "kiln validate: %d files: %d with errors, %d with warnings only, %d without issues\n",
			r.files, r.errors, r.warnings, r.files-r.errors-r.warnings)
	}
	if r.baseline != nil {
		return r.compareBaseline()
	}
	if r.errors > 0 {
		return errInvalid
	}
	return nil
}

// compareBaseline reports the differences between the files with errors
// and the baseline: both new errors and files that became valid fail.
func (r *validationReport) compareBaseline() error {
	var unexpected, fixed []string
	failed := map[string]bool{}
	for _, f := range r.failed {
		failed[f] = true
		if !r.baseline[f] {
			unexpected = append(unexpected, f)
		}
	}
	for f := range r.baseline {
		if !failed[f] {
			fixed = append(fixed, f)
		}
	}
	slices.Sort(fixed)
	for _, f := range unexpected {
		fmt.Fprintf(r.out, "baseline: %s has errors and is not in the baseline\n", f)
	}
	for _, f := range fixed {
		fmt.Fprintf(r.out, "baseline: %s is in the baseline but has no error (remove it)\n", f)
	}
	if len(unexpected)+len(fixed) > 0 {
		return errors.New("the files with errors differ from the baseline")
	}
	fmt.Fprintf(r.out, "baseline: the %d files with errors are exactly the expected ones\n", len(r.failed))
	return nil
}

// readBaseline reads a list of file names, one per line; # starts a
// comment.
func readBaseline(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			out[line] = true
		}
	}
	return out, nil
}

// errInvalid makes kiln validate exit 1.
var errInvalid = errors.New("some resources are invalid")
