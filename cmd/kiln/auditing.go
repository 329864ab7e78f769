package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/internal/app"
)

// runAuditVerify is `kiln admin audit verify`.
func runAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin audit verify", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(stderr, synopsis("admin audit verify"))
	}
	cfg, err := parseServeConfig([]string{"--data", *data}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	l, err := app.OpenAuditLog(ctx, cfg.storage())
	if err != nil {
		return err
	}
	defer l.Close()
	rep, err := audit.Verify(ctx, l, func(n int64) {
		if n%100000 == 0 {
			fmt.Fprintf(stdout, "audit verify: %d records checked\n", n)
		}
	})
	if err != nil {
		return err
	}
	if !rep.OK {
		fmt.Fprintf(stdout, "audit verify: BROKEN after %d records: first broken record %s: %s\n", rep.Checked, rep.FirstBroken, rep.Reason)
		return fmt.Errorf("the audit chain is broken at %s", rep.FirstBroken)
	}
	fmt.Fprintf(stdout, "audit verify: the chain of %d records is intact\n", rep.Checked)
	return nil
}

// runAuditHMAC is `kiln admin audit hmac`: the tag (audit.ValueTag) an
// audit record holds for each value, under the data folder's audit query
// key (or the MongoDB store's, as kiln serve would use). A value on the
// command line shows in the shell's history and the process list; on
// standard input, one per line, it does not. A data folder without the
// key is an error: a new key would confirm nothing.
func runAuditHMAC(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin audit hmac", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := parseServeConfig([]string{"--data", *data}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	var key []byte
	if cfg.MongoURI != "" {
		st, err := app.OpenStore(ctx, cfg.storage(), app.PartitionClinical)
		if err != nil {
			return err
		}
		defer st.Close()
		if key, err = app.LoadAuditQueryKey(cfg.DataDir, st); err != nil {
			return err
		}
	} else {
		path := filepath.Join(cfg.DataDir, app.AuditQueryKeyFile)
		if key, err = os.ReadFile(path); err != nil || len(key) < 32 {
			return fmt.Errorf("no audit query key in %s (%v): the audit records of this folder were keyed by none, or it is not a data folder", cfg.DataDir, err)
		}
	}
	values := fs.Args()
	if len(values) == 0 {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			values = append(values, strings.TrimRight(sc.Text(), "\r"))
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(values) == 0 {
		return usageError(stderr, synopsis("admin audit hmac"))
	}
	for _, v := range values {
		fmt.Fprintln(stdout, audit.ValueTag(key, v))
	}
	return nil
}

// runAuditExport is `kiln admin audit export`: the audit records since a
// date, of one partition or all, as NDJSON (one chained AuditEvent a
// line, as stored and hashed, so that `audit verify`'s rules can be
// re-checked on the copy), for a regulator.
func runAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin audit export", stderr)
	partition := fs.String("partition", "", "the partition whose FHIR service recorded the events: clinical or workforce (default: every record)")
	since := fs.String("since", "", "the first day (YYYY-MM-DD, UTC) or instant (RFC 3339) to export (default: the whole trail)")
	out := fs.String("out", "", "file to write (default: standard output); it must not exist")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(stderr, synopsis("admin audit export"))
	}
	q := audit.ExportQuery{Partition: *partition}
	switch *partition {
	case "", app.PartitionClinical, app.PartitionWorkforce:
	default:
		return fmt.Errorf("--partition %q: want %s or %s", *partition, app.PartitionClinical, app.PartitionWorkforce)
	}
	if *since != "" {
		t, err := time.Parse(time.DateOnly, *since)
		if err != nil {
			if t, err = time.Parse(time.RFC3339Nano, *since); err != nil {
				return fmt.Errorf("--since %q: want YYYY-MM-DD or an RFC 3339 instant", *since)
			}
		}
		q.Since = t
	}
	cfg, err := parseServeConfig([]string{"--data", *data}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	l, err := app.OpenAuditLog(ctx, cfg.storage())
	if err != nil {
		return err
	}
	defer l.Close()
	w := stdout
	var f *os.File
	if *out != "" {
		// O_EXCL: an export never overwrites an earlier one.
		if f, err = os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return err
		}
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	n, err := audit.Export(ctx, l, q, bw)
	if err == nil {
		err = bw.Flush()
	}
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	fmt.Fprintf(stderr, "audit export: %d records\n", n)
	return nil
}
