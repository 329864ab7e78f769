package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/cmd/kiln/internal/synth"
)

// Scenarios of `kiln admin load`: each draws its parameters from the data
// set `kiln admin generate` writes with the default seed.
var loadScenarios = []string{"obs-by-subject-code", "patient-family-birthdate", "read"}

type loadConfig struct {
	URL           string
	Token         string // bearer token (from --token or KILN_TOKEN)
	CA            string
	Insecure      bool
	Connections   int
	Rate          float64 // requests per second over all connections; 0: closed loop
	Duration      time.Duration
	Warmup        time.Duration
	Timeout       time.Duration
	Scenario      string
	Patients      int
	ObsPerPatient int
	Proto         string // "h2" or "http1"
	Seed          uint64
	AllowRemote   bool
}

func parseLoadConfig(args []string, stderr io.Writer) (loadConfig, error) {
	var c loadConfig
	fs := flag.NewFlagSet("kiln admin load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.URL, "url", "https://127.0.0.1:8443/fhir", "FHIR base URL of the server under load")
	fs.StringVar(&c.Token, "token", os.Getenv("KILN_TOKEN"), "bearer token for the requests (env KILN_TOKEN; e.g. from kiln admin token)")
	fs.StringVar(&c.CA, "ca", "", "PEM file of the certificate(s) to trust, e.g. <data>/tls/cert.pem")
	fs.BoolVar(&c.Insecure, "insecure", false, "do not verify the server's certificate")
	fs.IntVar(&c.Connections, "connections", 16, "connections, each with one request in flight (closed loop)")
	fs.Float64Var(&c.Rate, "rate", 0, "requests per second over all connections, each on a fixed schedule (latency counts from the scheduled time, so a server that falls behind shows it); 0: closed loop, as fast as answers come")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "measured run time")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "unmeasured run time first (connections, caches)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.StringVar(&c.Scenario, "scenario", "obs-by-subject-code", "one of "+strings.Join(loadScenarios, ", "))
	fs.IntVar(&c.Patients, "patients", 0, "patients in the data set (ids pat-1 … pat-N)")
	fs.IntVar(&c.ObsPerPatient, "observations-per-patient", 0, "observations per patient in the data set; when set, obs-by-subject-code asks for a code the patient has")
	fs.StringVar(&c.Proto, "proto", "http1", "http1 (HTTP/1.1; cheaper for Kiln, see docs/benchmarks.md) or h2 (HTTP/2)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the parameter draws")
	fs.BoolVar(&c.AllowRemote, "allow-remote", false, "allow a URL whose host is not loopback")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("kiln admin load: unexpected argument %q", fs.Arg(0))
	}
	switch {
	case c.Patients <= 0:
		return c, errors.New("--patients must be positive (the size of the generated data set)")
	case c.ObsPerPatient < 0:
		return c, errors.New("--observations-per-patient must not be negative")
	case c.Connections <= 0 || c.Connections > 1024:
		return c, errors.New("--connections must be in [1, 1024]")
	case c.Rate < 0:
		return c, errors.New("--rate must not be negative")
	case c.Duration <= 0 || c.Warmup < 0 || c.Timeout <= 0:
		return c, errors.New("--duration and --timeout must be positive, --warmup not negative")
	case !slices.Contains(loadScenarios, c.Scenario):
		return c, fmt.Errorf("--scenario must be one of %s", strings.Join(loadScenarios, ", "))
	case c.Proto != "h2" && c.Proto != "http1":
		return c, fmt.Errorf("--proto must be h2 or http1, not %q", c.Proto)
	case c.CA != "" && c.Insecure:
		return c, errors.New("--ca and --insecure exclude each other")
	}
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" {
		return c, fmt.Errorf("--url must be an https:// base URL, got %q", c.URL)
	}
	if !c.AllowRemote && !isLoopback(u.Hostname()) {
		return c, fmt.Errorf("--url %s is not on loopback; pass --allow-remote to load another host", u.Host)
	}
	c.URL = strings.TrimRight(c.URL, "/")
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loadResult is what one connection saw.
type loadResult struct {
	hist     histogram // latency of measured 200 answers and errors alike
	requests int64
	errors   int64
	statuses map[int]int64 // by HTTP status; 0 is a transport error
	entries  int64         // entries in 200 answers
	ok       int64
	firstErr string
}

// runLoad is `kiln admin load`: a closed-loop load generator. Each of
// --connections workers has its own connection and sends its next request
// as soon as the previous answer is read, for --warmup then --duration.
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseLoadConfig(args, stderr)
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: c.Insecure}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca: no PEM certificate in %s", c.CA)
		}
		tlsConf.RootCAs = pool
	}

	pace := "closed loop"
	if c.Rate > 0 {
		pace = strconv.FormatFloat(c.Rate, 'f', -1, 64) + " req/s scheduled"
	}
	fmt.Fprintf(stdout, "load: %s, %d connections (%s, %s), %s after %s warm-up, %s\n",
		c.Scenario, c.Connections, c.Proto, pace, c.Duration, c.Warmup, c.URL)
	start := time.Now()
	measureFrom := start.Add(c.Warmup)
	ctx, cancel := context.WithDeadline(ctx, measureFrom.Add(c.Duration))
	defer cancel()
	results := make([]*loadResult, c.Connections)
	var wg sync.WaitGroup
	for i := range c.Connections {
		results[i] = &loadResult{statuses: map[int]int64{}}
		wg.Go(func() { loadWorker(ctx, c, tlsConf, uint64(i), measureFrom, results[i]) })
	}
	wg.Wait()
	end := time.Now()
	if end.Before(measureFrom) { // interrupted during the warm-up
		measureFrom = end
	}

	var all loadResult
	all.statuses = map[int]int64{}
	for _, r := range results {
		all.hist.merge(&r.hist)
		all.requests += r.requests
		all.errors += r.errors
		all.entries += r.entries
		all.ok += r.ok
		for s, n := range r.statuses {
			all.statuses[s] += n
		}
		if all.firstErr == "" {
			all.firstErr = r.firstErr
		}
	}
	secs := end.Sub(measureFrom).Seconds()
	rps := 0.0
	if secs > 0 {
		rps = float64(all.requests) / secs
	}
	entries := 0.0
	if all.ok > 0 {
		entries = float64(all.entries) / float64(all.ok)
	}
	var st []string
	codes := make([]int, 0, len(all.statuses))
	for s := range all.statuses {
		codes = append(codes, s)
	}
	sort.Ints(codes)
	for _, s := range codes {
		name := strconv.Itoa(s)
		if s == 0 {
			name = "transport-error"
		}
		st = append(st, fmt.Sprintf("%s×%d", name, all.statuses[s]))
	}
	h := &all.hist
	fmt.Fprintf(stdout, "requests %d, errors %d (%s), %.1f req/s over %.1fs\n", all.requests, all.errors, strings.Join(st, " "), rps, secs)
	fmt.Fprintf(stdout, "latency p50 %s  p90 %s  p99 %s  max %s  mean %s\n",
		fmtMS(h.quantile(.5)), fmtMS(h.quantile(.9)), fmtMS(h.quantile(.99)), fmtMS(time.Duration(h.max)), fmtMS(h.mean()))
	fmt.Fprintf(stdout, "entries per 200 answer: %.2f\n", entries)
	if all.firstErr != "" {
		fmt.Fprintf(stdout, "first error: %s\n", all.firstErr)
	}
	fmt.Fprintln(stdout, loadTableHeader)
	fmt.Fprintf(stdout, "| %s | %s | %d | %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
		c.Scenario, c.Proto, c.Connections, all.requests, all.errors, rps,
		ms(h.quantile(.5)), ms(h.quantile(.9)), ms(h.quantile(.99)), ms(time.Duration(h.max)), entries)
	if all.requests == 0 && all.firstErr != "" {
		return fmt.Errorf("no request succeeded: %s", all.firstErr)
	}
	return nil
}

const loadTableHeader = "| scenario | proto | conns | requests | errors | req/s | p50 ms | p90 ms | p99 ms | max ms | entries/answer |\n|---|---|---|---|---|---|---|---|---|---|---|"

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func fmtMS(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 2, 64) + "ms" }

func loadTransport(c loadConfig, tlsConf *tls.Config) *http.Transport {
	t := &http.Transport{
		TLSClientConfig:     tlsConf.Clone(),
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     time.Minute,
		TLSHandshakeTimeout: c.Timeout,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		Protocols:           new(http.Protocols),
	}
	if c.Proto == "h2" {
		t.Protocols.SetHTTP2(true)
	} else {
		t.Protocols.SetHTTP1(true)
	}
	return t
}

// loadWorker runs one connection's closed loop until ctx ends.
func loadWorker(ctx context.Context, c loadConfig, tlsConf *tls.Config, id uint64, measureFrom time.Time, res *loadResult) {
	tr := loadTransport(c, tlsConf)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: c.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r := rand.New(rand.NewPCG(c.Seed, id))
	var body bytes.Buffer
	fullURL := []byte(`"fullUrl"`)
	// With --rate each connection sends on its own fixed schedule,
	// staggered against the others; a request's latency runs from its
	// scheduled time, so waiting for a late answer is not hidden.
	var interval time.Duration
	var next time.Time
	if c.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(c.Connections) / c.Rate)
		next = time.Now().Add(time.Duration(id) * interval / time.Duration(c.Connections))
	}
	for ctx.Err() == nil {
		target := c.URL + loadPath(c, r)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			res.firstErr = err.Error()
			return
		}
		req.Header.Set("Accept", "application/fhir+json")
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		t0 := time.Now()
		if interval > 0 {
			select {
			case <-time.After(time.Until(next)):
			case <-ctx.Done():
				return
			}
			t0, next = next, next.Add(interval)
		}
		resp, err := client.Do(req)
		status := 0
		body.Reset()
		if err == nil {
			status = resp.StatusCode
			_, err = body.ReadFrom(resp.Body)
			resp.Body.Close()
		}
		t1 := time.Now()
		if ctx.Err() != nil {
			return // cut by the end of the run: not counted
		}
		if t0.Before(measureFrom) {
			continue // warm-up
		}
		res.requests++
		res.hist.record(t1.Sub(t0))
		if err != nil {
			status = 0
		}
		res.statuses[status]++
		if status != http.StatusOK {
			res.errors++
			if err != nil {
				// A refused or broken connection fails at once: do not
				// spin on it.
				time.Sleep(10 * time.Millisecond)
			}
			if res.firstErr == "" {
				if err != nil {
					res.firstErr = err.Error()
				} else {
					res.firstErr = fmt.Sprintf("HTTP %d on %s: %s", status, req.URL.RequestURI(), outcomeText(body.Bytes()))
				}
			}
			continue
		}
		res.ok++
		if c.Scenario == "read" {
			res.entries++
		} else {
			// Each searchset entry has one fullUrl; counting them is cheap
			// next to decoding the Bundle.
			res.entries += int64(bytes.Count(body.Bytes(), fullURL))
		}
	}
}

// loadPath draws the next request (path and query, after the base URL).
func loadPath(c loadConfig, r *rand.Rand) string {
	n := 1 + r.IntN(c.Patients)
	switch c.Scenario {
	case "read":
		return "/Patient/" + synth.PatientID(n)
	case "patient-family-birthdate":
		family := []rune(synth.Surnames[r.IntN(len(synth.Surnames))])
		prefix := string(family[:min(3, len(family))])
		days := int(synth.MaxBirthDate.Sub(synth.MinBirthDate).Hours() / 24)
		date := synth.MinBirthDate.AddDate(0, 0, r.IntN(days+1)).Format(time.DateOnly)
		return "/Patient?family=" + url.QueryEscape(prefix) + "&birthdate=ge" + date
	default: // obs-by-subject-code
		code := synth.Codes[r.IntN(len(synth.Codes))].Code
		if c.ObsPerPatient > 0 {
			code = synth.Codes[synth.ObservationCode(n, 1+r.IntN(c.ObsPerPatient))].Code
		}
		return "/Observation?subject=Patient%2F" + synth.PatientID(n) + "&code=" + url.QueryEscape(synth.LOINC+"|"+code)
	}
}
