// Command kiln is the Kiln FHIR R4 server.
//
//	kiln serve [flags]              start the server (see `kiln serve -h`)
//	kiln fhirpath [flags] EXPR      evaluate a FHIRPath expression
//	kiln validate [flags] FILE...   validate resources against profiles, offline
//	kiln admin generate|load        synthetic data and HTTP load for benchmarks
//	kiln version                    print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "kiln:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

const usage = `Kiln is a FHIR R4 server.

Usage:
  kiln serve [flags]       start the server (kiln serve -h lists the flags)
  kiln fhirpath [--resource FILE|-] [--var name=value]... EXPRESSION
                           evaluate FHIRPath and print the result as a JSON array
  kiln validate [--package P]... [--profile URL]... [--output text|summary|json] FILE|DIR...
                           validate resources offline (kiln validate -h); exits 1 on errors
  kiln admin generate|load [flags]
                           synthetic data and HTTP load for benchmarks (kiln admin help)
  kiln version             print the version
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	privateFiles()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "serve":
		cfg, err := parseServeConfig(args[1:], os.LookupEnv, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stderr)
	case "fhirpath":
		return runFHIRPath(ctx, args[1:], stdin, stdout, stderr)
	case "validate":
		return runValidate(ctx, args[1:], stdout, stderr)
	case "admin":
		return runAdmin(ctx, args[1:], stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "kiln", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "kiln: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}
