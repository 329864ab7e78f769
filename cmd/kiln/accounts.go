package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/app"
)

// The account commands (users, machine clients, signing keys, tokens)
// open the data folder's issuer in-process, as `kiln serve --data DIR`
// would: they need the store and the master key, not a running server.

func runUser(ctx context.Context, sub string, args []string, s stdio) error {
	cmdName := "admin user " + sub
	fs, data := accountFlags("kiln "+cmdName, s.err)
	// Each sub-command has only the flags it reads.
	email, role, scopes, fhirUser, passwordStdin := new(string), new(string), new(string), new(string), new(bool)
	if sub != "list" {
		email = fs.String("email", "", "the user's email address")
	}
	if sub == "add" {
		role = fs.String("role", "", "one of "+strings.Join(auth.Roles, ", "))
		scopes = fs.String("scopes", "", "space-separated scopes the user's tokens may carry")
		fhirUser = fs.String("fhir-user", "", "optional FHIR reference of the user (e.g. Practitioner/123)")
	}
	if sub == "add" || sub == "password" {
		passwordStdin = fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	}
	a, err := openParsed(ctx, fs, args, data, s.err)
	if err != nil {
		return err
	}
	defer a.Close()
	users := a.Auth.Users
	switch sub {
	case "add":
		if *email == "" || *role == "" || !*passwordStdin {
			return usageError(s.err, synopsis(cmdName))
		}
		password, err := readPassword(s.in)
		if err != nil {
			return err
		}
		u, err := users.Add(ctx, *email, *role, *scopes, *fhirUser, password)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.out, "added user %s (id %s, role %s, scopes %q)\n", u.Email, u.ID, u.Role, u.Scopes)
		return nil
	case "password":
		if *email == "" || !*passwordStdin {
			return usageError(s.err, synopsis(cmdName))
		}
		password, err := readPassword(s.in)
		if err != nil {
			return err
		}
		u, families, err := a.Auth.ResetPassword(ctx, *email, password)
		if errors.Is(err, store.ErrNotFound) {
			return noUser(*email)
		}
		if u != nil {
			// Recorded once the password changed, even if revoking the
			// sessions then failed: the audit trail says what happened.
			a.Auth.Record(ctx, auth.Event{Action: "password-reset", Subject: "user/" + u.ID, Success: err == nil})
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(s.out, "reset the password of %s; ended %d session(s): its tokens issued before now are refused\n", u.Email, families)
		return nil
	case "list":
		list, err := users.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tID\tROLE\tSTATE\tSCOPES")
		for _, u := range list {
			state := "active"
			if u.Disabled {
				state = "disabled"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Email, u.ID, u.Role, state, u.Scopes)
		}
		return tw.Flush()
	case "disable", "enable":
		if *email == "" {
			return usageError(s.err, synopsis(cmdName))
		}
		ended, err := a.Auth.SetDisabled(ctx, *email, sub == "disable")
		if errors.Is(err, store.ErrNotFound) {
			return noUser(*email)
		}
		if err != nil {
			return err
		}
		if sub == "disable" {
			fmt.Fprintf(s.out, "user %s disabled; ended %d session(s): its tokens issued before now are refused\n", *email, ended)
		} else {
			fmt.Fprintf(s.out, "user %s enabled\n", *email)
		}
		return nil
	}
	return fmt.Errorf("kiln admin user: no sub-command %q", sub) // the command table names only the cases above
}

// noUser is the error of a user command naming an account that does not
// exist (the store's own error names its records, not the account).
func noUser(email string) error {
	return fmt.Errorf("no user with e-mail %q", email)
}

// readPassword reads a password from the first line of r.
func readPassword(r io.Reader) (string, error) {
	if r == nil {
		return "", errors.New("reading the password: no standard input")
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func runClient(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	cmdName := "admin client " + sub
	fs, data := accountFlags("kiln "+cmdName, stderr)
	// Each sub-command has only the flags it reads.
	name, scopes, jwksFile, id := new(string), new(string), new(string), new(string)
	introspect, off := new(bool), new(bool)
	switch sub {
	case "add":
		name = fs.String("name", "", "the client's name")
		scopes = fs.String("scopes", "", "space-separated scopes the client may ask for")
		jwksFile = fs.String("jwks", "", "a JWK Set file of the client's public keys (enables private_key_jwt)")
		introspect = fs.Bool("introspect", false, "a resource server: it may introspect any token at /auth/introspect")
	case "keys":
		jwksFile = fs.String("jwks", "", "a JWK Set file of the client's new public keys")
	case "introspect":
		off = fs.Bool("off", false, "no longer a resource server")
	}
	if sub != "add" && sub != "list" {
		id = fs.String("id", "", "the client id")
	}
	a, err := openParsed(ctx, fs, args, data, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	clients := a.Auth.Clients
	switch sub {
	case "add":
		if *name == "" || *scopes == "" {
			return usageError(stderr, synopsis(cmdName))
		}
		var jwks []byte
		if *jwksFile != "" {
			if jwks, err = os.ReadFile(*jwksFile); err != nil {
				return err
			}
		}
		cl, secret, err := clients.Register(ctx, auth.Registration{Name: *name, Scopes: *scopes, JWKS: jwks, Introspect: *introspect})
		if err != nil {
			return err
		}
		a.Auth.Record(ctx, auth.Event{Action: "client-issue", Subject: "client/" + cl.ID, Success: true})
		fmt.Fprintf(stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; it expires on %s)\n",
			cl.ID, secret, cl.Secrets[0].Expires.Format("2006-01-02"))
		return nil
	case "rotate":
		if *id == "" {
			return usageError(stderr, synopsis(cmdName))
		}
		secret, err := clients.Rotate(ctx, *id)
		if err != nil {
			return err
		}
		a.Auth.Record(ctx, auth.Event{Action: "client-rotate", Subject: "client/" + *id, Success: true})
		fmt.Fprintf(stdout, "client_secret: %s\n(the previous secret keeps working for %s, at most until it expires)\n", secret, clients.Overlap)
		return nil
	case "keys":
		if *id == "" || *jwksFile == "" {
			return usageError(stderr, synopsis(cmdName))
		}
		jwks, err := os.ReadFile(*jwksFile)
		if err != nil {
			return err
		}
		if err := clients.SetKeys(ctx, *id, jwks); err != nil {
			return err
		}
		a.Auth.Record(ctx, auth.Event{Action: "client-rotate", Subject: "client/" + *id, Success: true})
		fmt.Fprintf(stdout, "registered the keys of %s; they are accepted for %s\n", *id, clients.SecretLifetime)
		return nil
	case "introspect":
		if *id == "" {
			return usageError(stderr, synopsis(cmdName))
		}
		if err := clients.SetIntrospect(ctx, *id, !*off); err != nil {
			return err
		}
		a.Auth.Record(ctx, auth.Event{Action: "client-introspect", Subject: "client/" + *id, Success: true})
		fmt.Fprintf(stdout, "%s may introspect any token: %v\n", *id, !*off)
		return nil
	case "list":
		list, err := clients.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSECRETS\tINTROSPECTS\tSCOPES")
		for _, c := range list {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%s\n", c.ID, c.Name, len(c.Secrets), c.Introspect, c.Scopes)
		}
		return tw.Flush()
	}
	return fmt.Errorf("kiln admin client: no sub-command %q", sub) // the command table names only the cases above
}

func runKeysRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin keys rotate", stderr)
	var o partitionRotateFlags
	fs.StringVar(&o.partition, "partition", "", "rotate the keys of this encrypted partition (workforce) instead of the token signing key")
	fs.StringVar(&o.ring, "ring", "", "with --partition: data (re-wrap every sealed value; the default for a new rotation) or blind (rebuild the blind index); a rotation under way is carried on")
	fs.IntVar(&o.page, "page", 500, "with --partition: values or resources per step")
	fs.DurationVar(&o.lease, "lease", 30*time.Second, "with --partition: how long the rotation's lease outlives its last step; after a kill, a new command carries the rotation on once it lapsed")
	fs.Float64Var(&o.rate, "rate", 0, "with --partition: at most this many values or resources a second (0: no limit), to spare a busy server")
	fs.BoolVar(&o.status, "status", false, "with --partition: print the partition's keys (ids) and rotation, and change nothing")
	a, err := openParsed(ctx, fs, args, data, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	if o.partition != "" {
		return runPartitionKeysRotate(ctx, a, o, stdout)
	}
	var partitionOnly []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "data" {
			partitionOnly = append(partitionOnly, "--"+f.Name)
		}
	})
	if len(partitionOnly) > 0 {
		return fmt.Errorf("kiln admin keys rotate: %s go with --partition", strings.Join(partitionOnly, ", "))
	}
	if err := a.Auth.Keys.Rotate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "a new signing key is published now and signs from %s on; the current one verifies until its last token expires\n",
		a.Auth.Keys.Lead)
	return nil
}

// runToken is `kiln admin token`: a token minted directly from the data
// folder's keys (for load tests and scripts on the server's machine).
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, data := accountFlags("kiln admin token", stderr)
	scopes := fs.String("scopes", "", "space-separated scopes (default: every scope, role admin)")
	baseURL := fs.String("base-url", "", "the server's public base URL, the token's issuer (as kiln serve --base-url; default from KILN_BASE_URL or https://127.0.0.1:8443)")
	a, err := openParsed(ctx, fs, args, data, stderr, func() []string { return []string{"--base-url", *baseURL} })
	if err != nil {
		return err
	}
	defer a.Close()
	var tok string
	if *scopes == "" {
		tok, err = a.AdminToken(ctx)
	} else {
		g, rejected := auth.ParseScopes(*scopes)
		if len(rejected) > 0 {
			return fmt.Errorf("unknown scopes: %s", strings.Join(rejected, " "))
		}
		tok, _, err = a.Auth.Tokens.Issue(ctx, "system/kiln-admin-cli", "", "", "", g.String())
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// accountFlags is the flag set of an account command, with its --data.
func accountFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, fs.String("data", "./data", "data folder (as for kiln serve)")
}

// openParsed parses an account command's flags and opens the data
// folder's server in-process; serveArgs, if given, adds kiln serve flags
// (those with an empty value are left out).
func openParsed(ctx context.Context, fs *flag.FlagSet, args []string, data *string, stderr io.Writer, serveArgs ...func() []string) (*app.App, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if _, err := os.Stat(*data); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	cfgArgs := []string{"--data", *data}
	for _, more := range serveArgs {
		kv := more()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				cfgArgs = append(cfgArgs, kv[i], kv[i+1])
			}
		}
	}
	cfg, err := parseServeConfig(cfgArgs, os.LookupEnv, stderr)
	if err != nil {
		return nil, err
	}
	return openApp(ctx, cfg, slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func usageError(stderr io.Writer, usage string) error {
	fmt.Fprintf(stderr, "usage: %s\n", usage)
	return errUsage
}
