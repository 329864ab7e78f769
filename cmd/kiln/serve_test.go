package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/internal/syncbuf"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs `kiln serve` in-process on a loopback port with a fresh
// data folder, and returns a client that trusts its self-signed certificate.
// A free port can be taken by another test binary between freeAddr and the
// server's bind, so the server counts as up only when the port presents its
// own certificate, and a lost bind is retried on another port.
func startServe(t *testing.T, extra ...string) (addr string, client *http.Client, out *syncbuf.Buffer, stop func() error) {
	t.Helper()
	chosen := ""
	if i := slices.Index(extra, "--data"); i >= 0 && i+1 < len(extra) {
		chosen = extra[i+1] // a test that needs the folder chose it
	}
	var (
		cancel context.CancelFunc
		done   chan error
		pool   *x509.CertPool
	)
	for attempt := 0; ; attempt++ {
		addr = freeAddr(t)
		data := chosen
		if data == "" {
			data = t.TempDir() // fresh per attempt: the first admin is printed once per folder
		}
		out = &syncbuf.Buffer{}
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		done = make(chan error, 1)
		go func(out *syncbuf.Buffer, done chan error) {
			done <- run(ctx, append([]string{"serve", "--addr", addr, "--data", data, "--log-level", "warn"}, extra...), nil, out, out)
		}(out, done)
		var err error
		pool, err = awaitOwnServer(addr, filepath.Join(data, "tls", "cert.pem"), done)
		if err == nil {
			break
		}
		cancel()
		if attempt < 3 && errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		t.Fatalf("server did not start: %v\n%s", err, out.String())
	}
	client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true,
	}}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		// An idle HTTP/2 connection holds a graceful stop for net/http's
		// one-second GOAWAY wait; the test's own are closed first
		// (TestServeEndToEnd keeps one open on purpose).
		client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("server did not stop")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return addr, client, out, stop
}

// awaitOwnServer waits until addr presents the certificate of certFile, and
// returns a pool that trusts it; it fails when the server exits first.
func awaitOwnServer(addr, certFile string, done <-chan error) (*x509.CertPool, error) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return nil, fmt.Errorf("serve exited early: %w", err)
		default:
		}
		if pem, err := os.ReadFile(certFile); err == nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			if err == nil {
				conn.Close()
				return pool, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.New("no answer with its certificate in 20 s")
}

func TestServeEndToEnd(t *testing.T) {
	addr, client, out, stop := startServe(t)
	base := "https://" + addr

	banner := out.String()
	for _, want := range []string{base + "/fhir", "cert.pem", "SHA-256"} {
		if !strings.Contains(banner, want) {
			t.Errorf("start-up output lacks %q:\n%s", want, banner)
		}
	}

	for _, path := range []string{"/livez", "/readyz", "/fhir/metadata"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
			t.Errorf("GET %s: not TLS 1.3", path)
		}
		if resp.ProtoMajor != 2 {
			t.Errorf("GET %s: %s, want HTTP/2 over ALPN", path, resp.Proto)
		}
		if resp.Header.Get("Strict-Transport-Security") == "" {
			t.Errorf("GET %s: no HSTS header", path)
		}
	}
	resp, err := client.Get(base + "/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Without a token nothing but the public endpoints answers, not even
	// with a 404 that would reveal which paths exist; the challenge has no
	// error code, since no token was tried (RFC 6750 §3.1).
	if resp.StatusCode != 401 || !strings.Contains(string(body), `"error"`) || resp.Header.Get("WWW-Authenticate") != `Bearer realm="kiln"` {
		t.Errorf("unknown path without a token: %d %s (WWW-Authenticate %q)", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
	}

	// A client that keeps its HTTP/2 connection open does not stop the
	// stop (stop closes only the connections of client).
	idle := &http.Client{Transport: client.Transport.(*http.Transport).Clone()}
	resp, err = idle.Get(base + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("GET /livez: %s, want an HTTP/2 connection left idle", resp.Proto)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("still accepting connections after shutdown")
	}
}

func TestServeRefusesOldTLSAndPlainHTTP(t *testing.T) {
	addr, _, _, _ := startServe(t)

	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})
	if err == nil {
		conn.Close()
		t.Error("a TLS 1.2 handshake succeeded")
	}

	// Plain HTTP gets no HTTP response at all: the connection just closes.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil || strings.HasPrefix(line, "HTTP/") {
		t.Errorf("plain HTTP got a response: %q (err %v)", line, err)
	}
}

// A second start reuses the certificate made by the first.
func TestDevCertificateIsKept(t *testing.T) {
	dir := t.TempDir()
	cfg := serveConfig{DataDir: dir}
	_, f1, self, err := loadCertificate(cfg)
	if err != nil || !self {
		t.Fatalf("first: %v self-signed=%v", err, self)
	}
	before, _ := os.ReadFile(f1)
	_, _, _, err = loadCertificate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(f1)
	if !bytes.Equal(before, after) {
		t.Error("the certificate was regenerated on the second start")
	}
	if info, err := os.Stat(filepath.Join(dir, "tls", "key.pem")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", info.Mode(), err)
	}
}

// The TLS private key is held to the master key's rule: a key file other
// users can read is refused at start, whether generated or configured.
func TestTLSKeyModeIsChecked(t *testing.T) {
	dir := t.TempDir()
	cfg := serveConfig{DataDir: dir}
	if _, _, _, err := loadCertificate(cfg); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "tls", "key.pem")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]serveConfig{
		"self-signed": cfg,
		"configured":  {DataDir: t.TempDir(), TLSCert: filepath.Join(dir, "tls", "cert.pem"), TLSKey: key},
	} {
		if _, _, _, err := loadCertificate(c); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("%s: a key readable by others was accepted: %v", name, err)
		}
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := loadCertificate(cfg); err != nil {
		t.Errorf("mode 600: %v", err)
	}
}
