package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// An admin command beside a running server appends to the same audit
// chain: both writers' records land, neither logs a warning about the
// other, and the chain verifies afterwards.
func TestAdminBesideServerKeepsTheAuditChain(t *testing.T) {
	data := t.TempDir()
	addr, client, out, stop := startServe(t, "--data", data)
	base := "https://" + addr
	tok := adminLogin(t, client, base, out.String())

	// The server records an event per request while admin commands run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var requests int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil && requests < 2000 {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/fhir/Patient?_count=1", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			requests++
		}
	}()
	var adminErr bytes.Buffer
	for i := range 4 {
		var stdout bytes.Buffer
		args := []string{"admin", "client", "add", "--data", data, "--name", "node-" + string(rune('a'+i)), "--scopes", "system/Observation.rs"}
		if err := run(ctx, args, nil, &stdout, &adminErr); err != nil {
			t.Fatalf("admin client add beside the server: %v\n%s", err, adminErr.String())
		}
		time.Sleep(300 * time.Millisecond) // let the server flush between commands
	}
	cancel()
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for name, logs := range map[string]string{"server": out.String(), "admin": adminErr.String()} {
		if strings.Contains(logs, `"level":"WARN"`) || strings.Contains(logs, "audit:") {
			t.Errorf("the %s logged about the audit chain:\n%s", name, logs)
		}
	}
	var verify bytes.Buffer
	if err := run(context.Background(), []string{"admin", "audit", "verify", "--data", data}, nil, &verify, &verify); err != nil ||
		!strings.Contains(verify.String(), "intact") {
		t.Fatalf("audit verify: %v\n%s", err, verify.String())
	}
	if requests < 10 {
		t.Errorf("only %d requests were made beside the admin commands", requests)
	}
}
