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

	"github.com/kiln-fhir/kiln/fhirserver/indexversion"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/app"
	"github.com/kiln-fhir/kiln/profiles"
)

// runReindex is `kiln admin reindex`: it rebuilds the search index rows of
// every current resource (of the given types) with the search parameters
// and the string fold the server knows now, printing progress per type.
// A reindex of every type records the index version, which `kiln serve`
// checks.
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
	st, err := app.OpenStore(ctx, cfg.storage(), app.PartitionClinical)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := app.LoadCursorKey(cfg.DataDir, st)
	if err != nil {
		return err
	}
	srv, err := app.NewFHIRServer(cfg.appConfig(logger), app.Clinical(), st, key, nil)
	if err != nil {
		return err
	}
	before, err := indexversion.Stored(ctx, st)
	if err != nil {
		return err
	}
	all := types
	if len(all) == 0 {
		all = profiles.ResourceTypes()
	}
	start := time.Now()
	var n int64
	for _, t := range all {
		done, err := reindexType(ctx, srv, st, t, stdout)
		n += done
		if err != nil {
			return fmt.Errorf("reindex %s: %w", t, err)
		}
	}
	fmt.Fprintf(stdout, "reindex: %d resources in %s\n", n, time.Since(start).Round(time.Millisecond))
	switch {
	case len(types) == 0:
		// Every current resource now has rows of this version.
		if err := indexversion.Record(ctx, st, indexversion.Current); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "reindex: search index at version %d\n", indexversion.Current)
	case before != 0 && before != indexversion.Current:
		fmt.Fprintf(stdout, "reindex: the search index stays at version %d until every type is reindexed (no --type)\n", before)
	}
	return nil
}

// reindexType reindexes the resources of one type, printing done/total
// every 2 seconds and when the type is done (nothing for a type with no
// resource). total is counted first; resources created meanwhile may
// take done past it.
func reindexType(ctx context.Context, srv *fhirserver.Server, st store.Searcher, typ string, stdout io.Writer) (int64, error) {
	page, err := st.Search(ctx, &search.Query{Types: []string{typ}, Total: search.TotalAccurate})
	if err != nil {
		return 0, err
	}
	total := page.Total
	if total == 0 {
		return 0, nil
	}
	start, last := time.Now(), time.Now()
	n, err := srv.Reindex(ctx, []string{typ}, func(done int64) {
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "reindex: %s %d/%d (%.0f/s)\n", typ, done, total, float64(done)/time.Since(start).Seconds())
		}
	})
	if err != nil {
		return n, err
	}
	fmt.Fprintf(stdout, "reindex: %s %d/%d\n", typ, n, total)
	return n, nil
}
