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
  kiln admin user add --data DIR --email E --role R --scopes "…" [--fhir-user REF] --password-stdin
  kiln admin user list|disable|enable --data DIR [--email E]
      user accounts (roles: admin, provider, workforce_officer, privacy_officer)
  kiln admin client add --data DIR --name N --scopes "…" [--jwks FILE]
  kiln admin client rotate|list --data DIR [--id ID]
  kiln admin client keys --data DIR --id ID --jwks FILE
      register a client's new public keys (private_key_jwt); they expire
      after 90 days like secrets
      machine clients: add prints the client id and its secret once; rotate
      issues a new secret, the old one keeps working for 7 days
  kiln admin keys rotate --data DIR
      publish a new token signing key; it signs 10 minutes later
  kiln admin audit verify --data DIR
      check the hash chain of the audit trail; reports the first broken record
  kiln admin token --data DIR [--base-url URL] [--scopes "…"]
      print an access token minted from the data folder's keys (every scope
      and role admin by default), for scripts and load tests
`

// runAdmin dispatches `kiln admin SUBCOMMAND`.
func runAdmin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
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
	case "user":
		return runUser(ctx, args[1:], stdin, stdout, stderr)
	case "client":
		return runClient(ctx, args[1:], stdout, stderr)
	case "keys":
		return runKeys(ctx, args[1:], stdout, stderr)
	case "token":
		return runToken(ctx, args[1:], stdout, stderr)
	case "audit":
		return runAudit(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	fmt.Fprintf(stderr, "kiln admin: unknown command %q\n\n%s", args[0], adminUsage)
	return errUsage
}
