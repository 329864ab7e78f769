package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-fhir/kiln/cmd/kiln/internal/synth"
)

type generateConfig struct {
	DataDir       string
	Patients      int
	ObsPerPatient int
	Batch         int
	Workers       int
	Mode          string // "transaction" or "put"
	Seed          uint64
	Progress      time.Duration
	LogLevel      slog.Level
	CPUProfile    string
}

func parseGenerateConfig(args []string, stderr io.Writer) (generateConfig, error) {
	var c generateConfig
	fs := flag.NewFlagSet("kiln admin generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var logLevel string
	fs.StringVar(&c.DataDir, "data", "./data", "data folder of the embedded store (as for kiln serve)")
	fs.IntVar(&c.Patients, "patients", 0, "number of Patients (ids pat-1 … pat-N)")
	fs.IntVar(&c.ObsPerPatient, "observations-per-patient", 10, "Observations per Patient (ids obs-<n>-1 … obs-<n>-M)")
	fs.IntVar(&c.Batch, "batch", 500, "most entries in one transaction Bundle (whole patients; at least one patient)")
	fs.IntVar(&c.Workers, "workers", 2, "requests in flight at once")
	fs.StringVar(&c.Mode, "mode", "transaction", "transaction: POST transaction Bundles to /fhir; put: PUT each resource")
	fs.Uint64Var(&c.Seed, "seed", synth.DefaultSeed, "generator seed (kiln admin load assumes the default)")
	fs.DurationVar(&c.Progress, "progress", 3*time.Second, "interval between progress lines")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the run (server and generator) to this file")
	fs.StringVar(&logLevel, "log-level", "warn", "server log level (debug, info, warn, error); logs go to standard error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("kiln admin generate: unexpected argument %q", fs.Arg(0))
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	switch {
	case c.Patients <= 0:
		return c, errors.New("--patients must be positive")
	case c.ObsPerPatient < 0 || c.ObsPerPatient >= 1<<20:
		return c, errors.New("--observations-per-patient must be in [0, 1048575]")
	case c.Batch <= 0:
		return c, errors.New("--batch must be positive")
	case c.Workers <= 0:
		return c, errors.New("--workers must be positive")
	case c.Mode != "transaction" && c.Mode != "put":
		return c, fmt.Errorf("--mode must be transaction or put, not %q", c.Mode)
	case c.Progress <= 0:
		return c, errors.New("--progress must be positive")
	}
	return c, nil
}

// runGenerate is `kiln admin generate`: it opens the data folder's store as
// `kiln serve` does, builds the same HTTP handler in-process and writes the
// synthetic data set through it, so every resource goes through the same
// validation, indexing and commit as over the network (without TLS).
func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	gc, err := parseGenerateConfig(args, stderr)
	if err != nil {
		return err
	}
	// The server's own configuration for this data folder: defaults and
	// KILN_* variables, as `kiln serve --data DIR` would have.
	cfg, err := parseServeConfig([]string{"--data", gc.DataDir}, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: gc.LogLevel}))
	a, err := openApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	if gc.CPUProfile != "" {
		f, err := os.Create(gc.CPUProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	g := &generator{cfg: gc, gen: synth.New(gc.Seed), h: a.Handler, token: cachedToken(a.AdminToken)}
	return g.run(ctx, stdout)
}

type generator struct {
	cfg generateConfig
	gen synth.Generator
	h   http.Handler
	// token mints the bearer token of each request.
	token func(context.Context) (string, error)

	resources, patients, requests atomic.Int64
	busy                          atomic.Int64 // total request time, ns
}

// span is a run of consecutive patients [first, last] written together.
type span struct{ first, last int }

func (g *generator) run(ctx context.Context, stdout io.Writer) error {
	c := g.cfg
	perBundle := max(1, c.Batch/(c.ObsPerPatient+1))
	total := int64(c.Patients) * int64(c.ObsPerPatient+1)
	fmt.Fprintf(stdout, "generate: %d patients × (1 + %d observations) = %d resources into %s (mode %s, %d workers, ≤ %d patients per request)\n",
		c.Patients, c.ObsPerPatient, total, c.DataDir, c.Mode, c.Workers, perBundle)
	if c.Mode == "put" {
		perBundle = 1
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once     sync.Once
		firstErr error
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err; cancel() })
	}
	work := make(chan span)
	var wg sync.WaitGroup
	for range c.Workers {
		wg.Go(func() {
			for s := range work {
				if err := g.write(ctx, s); err != nil {
					fail(err)
					return
				}
			}
		})
	}

	start := time.Now()
	done := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() {
		t := time.NewTicker(c.Progress)
		defer t.Stop()
		last, lastT := int64(0), start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				r := g.resources.Load()
				fmt.Fprintf(stdout, "  %d/%d resources (%d patients) in %s: %.0f resources/s (last %s: %.0f/s)\n",
					r, total, g.patients.Load(), now.Sub(start).Round(time.Second), float64(r)/now.Sub(start).Seconds(),
					now.Sub(lastT).Round(time.Second), float64(r-last)/now.Sub(lastT).Seconds())
				last, lastT = r, now
			}
		}
	})

feed:
	for first := 1; first <= c.Patients; first += perBundle {
		select {
		case work <- span{first, min(first+perBundle-1, c.Patients)}:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(done)
	pwg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = context.Cause(ctx)
	}
	el := time.Since(start)
	r, n := g.resources.Load(), g.requests.Load()
	mean := time.Duration(0)
	if n > 0 {
		mean = time.Duration(g.busy.Load() / n)
	}
	fmt.Fprintf(stdout, "generate: wrote %d resources (%d patients) in %s: %.0f resources/s; %d requests, mean %s each\n",
		r, g.patients.Load(), el.Round(time.Millisecond), float64(r)/el.Seconds(), n, mean.Round(time.Microsecond))
	return firstErr
}

// write stores the patients of s and their observations: one transaction
// Bundle, or one PUT per resource.
func (g *generator) write(ctx context.Context, s span) error {
	var entries []synth.Entry
	for n := s.first; n <= s.last; n++ {
		entries = append(entries, g.gen.Record(n, g.cfg.ObsPerPatient)...)
	}
	if g.cfg.Mode == "transaction" {
		if err := g.do(ctx, http.MethodPost, "/fhir", synth.TransactionBundle(entries...)); err != nil {
			return fmt.Errorf("transaction for patients %d–%d: %w", s.first, s.last, err)
		}
		g.resources.Add(int64(len(entries)))
	} else {
		for _, e := range entries {
			if err := g.do(ctx, http.MethodPut, "/fhir/"+e.Type+"/"+e.ID, e.Resource); err != nil {
				return fmt.Errorf("PUT %s/%s: %w", e.Type, e.ID, err)
			}
			g.resources.Add(1)
		}
	}
	g.patients.Add(int64(s.last - s.first + 1))
	return nil
}

// do sends one request to the in-process handler and turns a non-2xx
// answer into an error carrying its OperationOutcome.
func (g *generator) do(ctx context.Context, method, path string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := httptest.NewRequestWithContext(ctx, method, "https://127.0.0.1"+path, bytes.NewReader(body))
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Content-Type", "application/fhir+json")
	req.Header.Set("Accept", "application/fhir+json")
	req.Header.Set("Prefer", "return=minimal")
	tok, err := g.token(ctx)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	start := time.Now()
	g.h.ServeHTTP(rec, req)
	g.busy.Add(int64(time.Since(start)))
	g.requests.Add(1)
	if rec.Code < 200 || rec.Code > 299 {
		return fmt.Errorf("HTTP %d: %s", rec.Code, outcomeText(rec.Body.Bytes()))
	}
	return nil
}

// outcomeText renders an OperationOutcome (or any error body) on one line.
func outcomeText(body []byte) string {
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Severity    string   `json:"severity"`
			Code        string   `json:"code"`
			Diagnostics string   `json:"diagnostics"`
			Expression  []string `json:"expression"`
			Details     struct {
				Text string `json:"text"`
			} `json:"details"`
		} `json:"issue"`
	}
	if json.Unmarshal(body, &oo) != nil || oo.ResourceType != "OperationOutcome" || len(oo.Issue) == 0 {
		s := strings.TrimSpace(string(body))
		if len(s) > 500 {
			s = s[:500] + "…"
		}
		return s
	}
	var parts []string
	for _, is := range oo.Issue {
		msg := is.Diagnostics
		if msg == "" {
			msg = is.Details.Text
		}
		p := is.Severity + " " + is.Code + ": " + msg
		if len(is.Expression) > 0 {
			p += " (at " + strings.Join(is.Expression, ", ") + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
