package main

import (
	"context"
	"fmt"
	"io"
)

const adminUsage = `Usage:
  kiln admin generate --data DIR --patients N --observations-per-patient M
                      [--batch 500] [--workers 2] [--mode transaction|put] [--seed 1]
      write deterministic synthetic Patients and Observations into the
      embedded store of DIR, in-process (no network)
  kiln admin load --patients N [--url https://127.0.0.1:8443/fhir]
                  [--ca FILE | --insecure] [--connections 16] [--duration 30s]
                  [--scenario obs-by-subject-code|patient-family-birthdate|read]
                  [--observations-per-patient M] [--proto http1|h2] [--warmup 1s]
      closed-loop HTTP load against a running server
  kiln admin reindex --data DIR [--type Patient,Observation]
      rebuild the search index of the embedded store in DIR (after adding
      SearchParameters), printing progress; the server need not be stopped
`

// runAdmin dispatches `kiln admin SUBCOMMAND`.
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminUsage)
		return errUsage
	}
	switch args[0] {
	case "generate":
		return runGenerate(ctx, args[1:], stdout, stderr)
	case "load":
		return runLoad(ctx, args[1:], stdout, stderr)
	case "reindex":
		return runReindex(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	fmt.Fprintf(stderr, "kiln admin: unknown command %q\n\n%s", args[0], adminUsage)
	return errUsage
}
