package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/profiles"
)

// runReindex is `kiln admin reindex`: it rebuilds the search index rows of
// every current resource (of the given types) with the search parameters
// the server knows now, printing progress.
func runReindex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kiln admin reindex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "data folder of the embedded store")
	typeList := fs.String("type", "", "comma-separated resource types (default: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kiln admin reindex: unexpected argument %q", fs.Arg(0))
	}
	var types []string
	for _, t := range strings.Split(*typeList, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !profiles.IsResourceType(t) {
			return fmt.Errorf("--type: %q is not an R4 resource type", t)
		}
		types = append(types, t)
	}
	if _, err := os.Stat(*data); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	cfg, err := parseServeConfig([]string{"--data", *data}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := newFHIRServer(cfg, st, fhirserver.Validation{}, logger)
	if err != nil {
		return err
	}
	start, last := time.Now(), time.Now()
	n, err := srv.Reindex(ctx, types, func(done int64) {
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "reindex: %d resources (%.0f/s)\n", done, float64(done)/time.Since(start).Seconds())
		}
	})
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	fmt.Fprintf(stdout, "reindex: %d resources in %s\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}
