package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The command table is the one source of both the dispatch (run) and the
// usage text (kiln help, kiln admin help…), so that neither can list a
// command the other lacks (TestCommandTable).

// command is one command of the table: a leaf, run with the arguments
// that follow its name.
type command struct {
	name    string   // the words after "kiln", e.g. "admin user add"
	aliases []string // other spellings of the name's last word
	args    string   // the synopsis after the name
	help    string   // what it does; lines are indented as they are
	run     func(ctx context.Context, args []string, s stdio) error
}

// stdio are a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

func commands() []command {
	return []command{
		{name: "serve", args: "[flags]",
			help: "start the server (kiln serve -h lists the flags and their KILN_* variables)",
			run: func(ctx context.Context, args []string, s stdio) error {
				cfg, err := parseServeConfig(args, os.LookupEnv, s.err)
				if err != nil {
					return err
				}
				return serve(ctx, cfg, s.err)
			}},
		{name: "openapi", args: "[--base-url URL] [--out FILE]",
			help: "print the OpenAPI document of the platform endpoints, as GET /openapi.json\nserves it, without starting a server (for linters and client generators)",
			run:  runOpenAPI},
		{name: "fhirpath", args: "[--resource FILE|-] [--var name=value]... EXPRESSION",
			help: "evaluate FHIRPath and print the result as a JSON array",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runFHIRPath(ctx, args, s.in, s.out, s.err)
			}},
		{name: "validate", args: "[--package P]... [--profile URL]... [--output text|summary|json] FILE|DIR...",
			help: "validate resources offline (kiln validate -h); exits 1 on errors",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runValidate(ctx, args, s.out, s.err)
			}},
		{name: "version", aliases: []string{"--version", "-version"},
			help: "print the version",
			run: func(_ context.Context, _ []string, s stdio) error {
				fmt.Fprintln(s.out, "kiln", version)
				return nil
			}},
		{name: "admin generate", args: "--data DIR --patients N --observations-per-patient M\n[--batch 500] [--workers 2] [--mode transaction|put] [--seed 1]",
			help: "write deterministic synthetic Patients and Observations into the\nembedded store of DIR, in-process (no network)",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runGenerate(ctx, args, s.out, s.err)
			}},
		{name: "admin load", args: "--patients N [--url https://127.0.0.1:8443/fhir]\n[--ca FILE | --insecure] [--connections 16] [--duration 30s]\n" +
			"[--scenario obs-by-subject-code|patient-family-birthdate|read]\n[--observations-per-patient M] [--proto http1|h2] [--warmup 1s]",
			help: "closed-loop HTTP load against a running server",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runLoad(ctx, args, s.out, s.err)
			}},
		{name: "admin reindex", args: "--data DIR [--type Patient,Observation]",
			help: "rebuild the search index of the embedded store in DIR (after adding\nSearchParameters, or when kiln serve asks for it after an upgrade), printing\nprogress per type; reindexing every type records the index version; the\nserver need not be stopped",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runReindex(ctx, args, s.out, s.err)
			}},
		{name: "admin user add", args: `--data DIR --email E --role R --scopes "…" [--fhir-user REF] --password-stdin`,
			help: "add a user account (roles: admin, provider, workforce_officer,\nprivacy_officer); the password is the first line of standard input",
			run:  userCommand("add")},
		{name: "admin user list", args: "--data DIR",
			help: "list the user accounts",
			run:  userCommand("list")},
		{name: "admin user disable", args: "--data DIR --email E",
			help: "disable an account: it can no longer log in, and the tokens it holds\nare refused at once (within 5 s on other instances)",
			run:  userCommand("disable")},
		{name: "admin user enable", args: "--data DIR --email E",
			help: "enable a disabled account again",
			run:  userCommand("enable")},
		{name: "admin user password", args: "--data DIR --email E --password-stdin",
			help: "reset a user's password (the first line of standard input) and end\nthe user's sessions: the tokens it holds are refused (within 5 s on other instances)",
			run:  userCommand("password")},
		{name: "admin client add", args: `--data DIR --name N --scopes "…" [--jwks FILE] [--introspect]`,
			help: "add a machine client; prints its id and secret once (the secret expires\nafter 90 days); --jwks registers public keys for private_key_jwt;\n--introspect makes it a resource server that may introspect any token",
			run:  clientCommand("add")},
		{name: "admin client introspect", args: "--data DIR --id ID [--off]",
			help: "make a client a resource server, which may introspect any token\n(--off: no longer)",
			run:  clientCommand("introspect")},
		{name: "admin client rotate", args: "--data DIR --id ID",
			help: "issue a new secret; the old one keeps working for 7 days",
			run:  clientCommand("rotate")},
		{name: "admin client list", args: "--data DIR",
			help: "list the machine clients",
			run:  clientCommand("list")},
		{name: "admin client keys", args: "--data DIR --id ID --jwks FILE",
			help: "register a client's new public keys (private_key_jwt); they expire\nafter 90 days like secrets",
			run:  clientCommand("keys")},
		{name: "admin keys rotate", args: "--data DIR [--partition workforce [--ring data|blind] [--status]\n[--page 500] [--lease 30s] [--rate N]]",
			help: "publish a new token signing key; it signs 10 minutes later. With --partition:\nrotate the encrypted partition's data key (re-wrap every sealed value) or its\nblind-index key (rebuild the index) while servers run, printing done/total,\nrate and ETA; a stopped or killed rotation carries on when run again",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runKeysRotate(ctx, args, s.out, s.err)
			}},
		{name: "admin audit verify", args: "--data DIR",
			help: "check the hash chain of the audit trail; reports the first broken record",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runAuditVerify(ctx, args, s.out, s.err)
			}},
		{name: "admin audit hmac", args: "--data DIR [VALUE…]",
			help: "print the tag an audit record holds in place of a searched value (its\nHMAC under the data folder's audit query key), for each VALUE or each\nline of standard input; exact: case and spaces matter",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runAuditHMAC(ctx, args, s.in, s.out, s.err)
			}},
		{name: "admin audit export", args: "--data DIR [--partition clinical|workforce] [--since DATE] [--out FILE]",
			help: "write the audit records since DATE (YYYY-MM-DD, UTC), of one partition's\nFHIR service or all, as NDJSON, oldest first, each as stored in the chain",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runAuditExport(ctx, args, s.out, s.err)
			}},
		{name: "admin token", args: `--data DIR [--base-url URL] [--scopes "…"]`,
			help: "print an access token minted from the data folder's keys (every scope\nand role admin by default), for scripts and load tests",
			run: func(ctx context.Context, args []string, s stdio) error {
				return runToken(ctx, args, s.out, s.err)
			}},
	}
}

func userCommand(sub string) func(context.Context, []string, stdio) error {
	return func(ctx context.Context, args []string, s stdio) error { return runUser(ctx, sub, args, s) }
}

func clientCommand(sub string) func(context.Context, []string, stdio) error {
	return func(ctx context.Context, args []string, s stdio) error {
		return runClient(ctx, sub, args, s.out, s.err)
	}
}

var helpWords = []string{"help", "-h", "--help"}

// lookup finds the command args name and returns it with the arguments
// that follow its name; nil when args name none.
func lookup(cmds []command, args []string) (*command, []string) {
	for i := range cmds {
		c := &cmds[i]
		words := strings.Fields(c.name)
		if len(args) < len(words) || !slices.Equal(args[:len(words)-1], words[:len(words)-1]) {
			continue
		}
		last := args[len(words)-1]
		if last == words[len(words)-1] || slices.Contains(c.aliases, last) {
			return c, args[len(words):]
		}
	}
	return nil, nil
}

// group returns the longest group of commands ("", "admin", "admin user"…)
// args start with, and the words after it.
func group(cmds []command, args []string) (string, []string) {
	g, n := "", 0
	for i := 1; i <= len(args); i++ {
		prefix := strings.Join(args[:i], " ") + " "
		if slices.ContainsFunc(cmds, func(c command) bool { return strings.HasPrefix(c.name, prefix) }) {
			g, n = strings.TrimSpace(prefix), i
		}
	}
	return g, args[n:]
}

// dispatch runs the command args name, or answers with the usage of the
// group they name (to stdout when asked for help).
func dispatch(ctx context.Context, args []string, s stdio) error {
	cmds := commands()
	if c, rest := lookup(cmds, args); c != nil {
		return c.run(ctx, rest, s)
	}
	g, rest := group(cmds, args)
	switch {
	case len(rest) == 0:
		fmt.Fprint(s.err, usageText(cmds, g))
		return errUsage
	case slices.Contains(helpWords, rest[0]):
		fmt.Fprint(s.out, usageText(cmds, g))
		return nil
	}
	fmt.Fprintf(s.err, "%s: unknown command %q\n\n%s", strings.TrimSpace("kiln "+g), rest[0], usageText(cmds, g))
	return errUsage
}

// usageText lists the commands of group g ("" for all of them).
func usageText(cmds []command, g string) string {
	var b strings.Builder
	if g == "" {
		b.WriteString("Kiln is a FHIR R4 server.\n\n")
	}
	b.WriteString("Usage:\n")
	for _, c := range cmds {
		if g != "" && !strings.HasPrefix(c.name, g+" ") {
			continue
		}
		b.WriteString(synopsisLines(c))
		for line := range strings.SplitSeq(c.help, "\n") {
			b.WriteString("      " + line + "\n")
		}
	}
	b.WriteString("\nA command's flags: kiln COMMAND -h. Its group only: kiln admin help, kiln admin user help…\n")
	return b.String()
}

// synopsisLines is "  kiln NAME ARGS", continued lines indented under the
// arguments.
func synopsisLines(c command) string {
	head := "  kiln " + c.name
	lines := strings.Split(c.args, "\n")
	pad := strings.Repeat(" ", len(head)+1)
	out := strings.TrimRight(head+" "+lines[0], " ") + "\n"
	for _, l := range lines[1:] {
		out += pad + l + "\n"
	}
	return out
}

// synopsis is a command's one-line synopsis, for usage errors.
func synopsis(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return strings.TrimSpace("kiln " + c.name + " " + strings.ReplaceAll(c.args, "\n", " "))
		}
	}
	panic("synopsis: no command " + name)
}
