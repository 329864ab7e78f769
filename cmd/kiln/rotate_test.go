package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/internal/app"
)

// withShortKeyBounds creates the data folder's partition keys as a first
// start would, but with the bounds of a key change shortened (servers
// reload every 50 ms; a rotation waits 200 ms per change and 50 ms for
// writes to land), so that a rotation beside a server takes a second, not
// minutes. The bounds are kept in the keys record, where kiln serve and
// the command read them.
func withShortKeyBounds(t *testing.T, data string) {
	t.Helper()
	cfg, err := parseServeConfig([]string{"--data", data}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ac := cfg.appConfig(slog.New(slog.DiscardHandler))
	ac.KeyViewTTL, ac.KeyWriteTTL = 150*time.Millisecond, 50*time.Millisecond
	a, err := app.Open(t.Context(), ac)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
}

// workforceClient talks to the workforce FHIR service of a running
// server; safe for concurrent use (errors are returned, not fatal).
type workforceClient struct {
	client *http.Client
	base   string
	token  string
}

func (c workforceClient) do(method, path string, body []byte) (int, map[string]any, error) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, err := io.ReadAll(resp.Body)
	if err == nil {
		_ = json.Unmarshal(raw, &m)
	}
	return resp.StatusCode, m, err
}

func (c workforceClient) create(emp string) (string, error) {
	body := fmt.Sprintf(`{"resourceType":"Patient","identifier":[{"system":"https://example.org/sid/employee-id","value":%q}],`+
		`"name":[{"family":"Rotated","given":["Worker"]}],"birthDate":"1990-01-01","telecom":[{"system":"phone","value":"555 0100"}]}`, emp)
	status, m, err := c.do("POST", "/workforce/fhir/Patient", []byte(body))
	id, _ := m["id"].(string)
	if err == nil && (status != http.StatusCreated || id == "") {
		err = fmt.Errorf("create %s: %d %v", emp, status, m)
	}
	return id, err
}

// check reads the worker and finds it by its identifier.
func (c workforceClient) check(id, emp string) error {
	status, m, err := c.do("GET", "/workforce/fhir/Patient/"+id, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK || m["id"] != id {
		return fmt.Errorf("read %s: %d %v", id, status, m)
	}
	status, m, err = c.do("GET", "/workforce/fhir/Patient?identifier="+url.QueryEscape(emp), nil)
	if err != nil {
		return err
	}
	if entries, _ := m["entry"].([]any); status != http.StatusOK || len(entries) != 1 {
		return fmt.Errorf("search %s: %d %v", emp, status, m)
	}
	return nil
}

// readers read and search the workers from goroutines until stopped,
// keeping every failure.
type readers struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	reads atomic.Int64
	mu    sync.Mutex
	errs  []error
}

func startReaders(c workforceClient, ids map[string]string) *readers {
	r := &readers{stop: make(chan struct{})}
	var emps []string
	for emp := range ids {
		emps = append(emps, emp)
	}
	for g := range 3 {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for i := g; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				emp := emps[i%len(emps)]
				if err := c.check(ids[emp], emp); err != nil {
					r.mu.Lock()
					r.errs = append(r.errs, err)
					r.mu.Unlock()
				}
				r.reads.Add(1)
			}
		}()
	}
	return r
}

func (r *readers) end(t *testing.T) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	for _, err := range r.errs {
		t.Errorf("a read during the rotation failed: %v", err)
	}
	if r.reads.Load() == 0 {
		t.Error("no read ran during the rotation")
	}
}

// startWorkforceServe starts kiln serve on a data folder with short key
// bounds and n workers written through it.
func startWorkforceServe(t *testing.T, data string, n int) (workforceClient, map[string]string, func() string) {
	t.Helper()
	withShortKeyBounds(t, data)
	addr, client, out, _ := startServe(t, "--data", data)
	base := "https://" + addr
	c := workforceClient{client: client, base: base, token: adminLogin(t, client, base, out.String())}
	ids := map[string]string{}
	for i := range n {
		emp := fmt.Sprintf("EMP-%d", 3000+i)
		id, err := c.create(emp)
		if err != nil {
			t.Fatal(err)
		}
		ids[emp] = id
	}
	return c, ids, out.String
}

// rotateCmd runs kiln admin keys rotate in-process.
func rotateCmd(ctx context.Context, data string, extra ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"admin", "keys", "rotate", "--data", data}, extra...), nil, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

var progressRE = regexp.MustCompile(`(rewrap|verify|rebuild) (\d+)/(\d+) (values|resources), \d+/s, ETA `)

// TestKeysRotatePartitionBesideServe: kiln admin keys rotate
// --partition workforce, run beside kiln serve on the same data folder,
// rotates the data key and then the blind-index key while the server
// answers every read and search; the command prints its progress
// (done/total, rate, ETA) and --status the keys by id; nothing it prints
// looks like a key.
func TestKeysRotatePartitionBesideServe(t *testing.T) {
	data := t.TempDir()
	c, ids, serverLog := startWorkforceServe(t, data, 30)
	rd := startReaders(c, ids)
	for _, ring := range []string{"data", "blind"} {
		stdout, stderr, err := rotateCmd(t.Context(), data, "--partition", "workforce", "--ring", ring, "--page", "5")
		if err != nil {
			t.Fatalf("rotate %s: %v\n%s%s", ring, err, stdout, stderr)
		}
		if !progressRE.MatchString(stdout) || !strings.Contains(stdout, "done: key 2 is current; key 1 retired") {
			t.Errorf("rotate %s printed:\n%s", ring, stdout)
		}
		t.Logf("rotate %s:\n%s", ring, stdout)
		noKeyLike(t, "the command's output", stdout+stderr)
	}
	rd.end(t)
	stdout, _, err := rotateCmd(t.Context(), data, "--partition", "workforce", "--status")
	if err != nil || !strings.Contains(stdout, "workforce keys: data 2*, blind 2*") || !strings.Contains(stdout, "blind rotation to key 2, phase done") {
		t.Fatalf("--status: %v\n%s", err, stdout)
	}
	for emp, id := range ids {
		if err := c.check(id, emp); err != nil {
			t.Error(err)
		}
	}
	noMasterKey(t, data, serverLog()+stdout)
	if _, _, err := rotateCmd(t.Context(), data, "--ring", "blind"); err == nil || !strings.Contains(err.Error(), "go with --partition") {
		t.Errorf("--ring without --partition: %v", err)
	}
}

// keyLike finds base64 or hex text of 32 bytes, the shape of every key
// Kiln holds.
var keyLike = regexp.MustCompile(`[A-Za-z0-9+/_-]{43}=?|[0-9a-fA-F]{64}`)

func noKeyLike(t *testing.T, what, text string) {
	t.Helper()
	for _, m := range keyLike.FindAllString(text, -1) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(m); err == nil && len(b) == 32 {
				t.Fatalf("%s holds what looks like a key: %q", what, m)
			}
		}
		if len(m) == 64 {
			t.Fatalf("%s holds what looks like a key in hex: %q", what, m)
		}
	}
}

// noMasterKey: the master key (which opens the partition's keys) is in
// none of text.
func noMasterKey(t *testing.T, data, text string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if _, key, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.Contains(text, key) {
			t.Fatal("the output holds the master key")
		}
	}
}

const rotateChildEnv = "KILN_ROTATE_CHILD_DATA"

// TestKeysRotateKilledAndResumed: the rotation command, a process of its
// own beside kill serve, is killed (SIGKILL) half way through its
// re-wrap while readers query the server. A second command is refused
// while the dead one's lease runs, --status shows where it stopped, and
// once the lease lapsed the command carries the rotation on from there
// to the end. Every read succeeded and every worker is still read and
// found.
func TestKeysRotateKilledAndResumed(t *testing.T) {
	data := t.TempDir()
	c, ids, _ := startWorkforceServe(t, data, 50)
	rd := startReaders(c, ids)

	killedAt := runRotateChild(t, data)
	if _, _, err := rotateCmd(t.Context(), data, "--partition", "workforce"); err == nil || !strings.Contains(err.Error(), "running in another command") {
		t.Fatalf("a command while the killed one's lease runs: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		stdout, _, err := rotateCmd(t.Context(), data, "--partition", "workforce", "--status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout, "phase rewrap") {
			t.Fatalf("--status after the kill:\n%s", stdout)
		}
		if strings.Contains(stdout, "lapsed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed command's lease did not lapse:\n%s", stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stdout, stderr, err := rotateCmd(t.Context(), data, "--partition", "workforce", "--page", "2")
	if err != nil {
		t.Fatalf("the resumed rotation: %v\n%s%s", err, stdout, stderr)
	}
	rd.end(t)
	m := progressRE.FindStringSubmatch(stdout)
	if m == nil || m[1] != "rewrap" {
		t.Fatalf("the resumed rotation printed:\n%s", stdout)
	}
	if first, _ := strconv.Atoi(m[2]); first <= killedAt {
		t.Errorf("the resumed re-wrap started at %d; the killed one had reached %d", first, killedAt)
	}
	if !strings.Contains(stdout, "done: key 2 is current; key 1 retired") {
		t.Errorf("the resumed rotation printed:\n%s", stdout)
	}
	for emp, id := range ids {
		if err := c.check(id, emp); err != nil {
			t.Error(err)
		}
	}
}

// runRotateChild starts the rotation in a child process (this test
// binary, TestKeysRotateChild), slowed down so that it is killed with
// SIGKILL in the middle of its re-wrap; it returns how far the child had
// reported.
func runRotateChild(t *testing.T, data string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeysRotateChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), rotateChildEnv+"="+data)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	progressed := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := progressRE.FindStringSubmatch(sc.Text()); m != nil && m[1] == "rewrap" {
				if n, _ := strconv.Atoi(m[2]); n > 0 {
					select {
					case progressed <- n:
					default:
					}
				}
			}
		}
	}()
	var at int
	select {
	case at = <-progressed:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the rotation child printed no re-wrap progress within 60 s")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: the lease is not released
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the rotation child finished before it was killed")
	}
	return at
}

// TestKeysRotateChild is the process TestKeysRotateKilledAndResumed
// kills: the rotation command, re-wrapping 2 values a step at 20 a
// second, with a 3-second lease.
func TestKeysRotateChild(t *testing.T) {
	data := os.Getenv(rotateChildEnv)
	if data == "" {
		t.Skip("runs only as the child process of TestKeysRotateKilledAndResumed, which sets " + rotateChildEnv)
	}
	err := run(context.Background(), []string{"admin", "keys", "rotate", "--data", data, "--partition", "workforce",
		"--page", "2", "--rate", "20", "--lease", "5s"}, nil, os.Stdout, os.Stderr)
	fmt.Fprintln(os.Stderr, "rotation child: the rotation ended before it was killed:", err)
	os.Exit(3)
}
