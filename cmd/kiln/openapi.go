package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/kiln-fhir/kiln/legacyapi"
)

// runOpenAPI is `kiln openapi`: the document GET /openapi.json serves,
// built without a server, a store or a data folder.
func runOpenAPI(_ context.Context, args []string, s stdio) error {
	fs := flag.NewFlagSet("kiln openapi", flag.ContinueOnError)
	fs.SetOutput(s.err)
	baseURL := fs.String("base-url", "", "the server's public base URL, the document's server (as kiln serve --base-url; default from KILN_BASE_URL or KILN_ADDR, else https://127.0.0.1:8443)")
	out := fs.String("out", "", "write the document to this file (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kiln openapi: unexpected argument %q", fs.Arg(0))
	}
	// The base URL the server would have, by the same rules.
	var serveArgs []string
	if *baseURL != "" {
		serveArgs = []string{"--base-url", *baseURL}
	}
	cfg, err := parseServeConfig(serveArgs, os.LookupEnv, s.err)
	if err != nil {
		return err
	}
	doc, err := legacyapi.Document(cfg.BaseURL)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = s.out.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}
