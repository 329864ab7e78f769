package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
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
	// Every event of both writers is in the chain once: the 4 clients
	// issued, and one search per request (a last request may have been
	// answered after the count stopped).
	issued, searches := 0, 0
	for _, body := range auditBodies(t, data) {
		switch {
		case bytes.Contains(body, []byte(`"code":"client-issue"`)):
			issued++
		case bytes.Contains(body, []byte(`"code":"search"`)):
			searches++
		}
	}
	if issued != 4 || searches < requests || searches > requests+1 {
		t.Errorf("%d client-issue and %d search records; want 4 and %d", issued, searches, requests)
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

// kiln admin client add --introspect registers a resource server: it may
// introspect another client's token; a plain client learns nothing.
func TestAdminClientIntrospectFlag(t *testing.T) {
	data := t.TempDir()
	addr, client, _, _ := startServe(t, "--data", data)
	base := "https://" + addr
	add := func(name string, extra ...string) (id, secret string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"admin", "client", "add", "--data", data, "--name", name, "--scopes", "system/Observation.rs"}, extra...)
		if err := run(context.Background(), args, nil, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		m := regexp.MustCompile(`client_id:\s+(\S+)\s+client_secret:\s+(\S+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no credentials printed:\n%s", out.String())
		}
		return m[1], m[2]
	}
	holderID, holderSecret := add("lab-node")
	rsID, rsSecret := add("resource-server", "--introspect")
	plainID, plainSecret := add("other-node")

	form := func(id, secret, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/auth/"+strings.Fields(body)[0], strings.NewReader(strings.Fields(body)[1]))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v %v", body, resp.StatusCode, m, err)
		}
		return m
	}
	tok, _ := form(holderID, holderSecret, "token grant_type=client_credentials")["access_token"].(string)
	if got := form(rsID, rsSecret, "introspect token="+tok); got["active"] != true || got["scope"] != "system/Observation.rs" {
		t.Errorf("the resource server's introspection: %v", got)
	}
	if got := form(plainID, plainSecret, "introspect token="+tok); len(got) != 1 || got["active"] != false {
		t.Errorf("a plain client's introspection: %v", got)
	}
	var list bytes.Buffer
	if err := run(context.Background(), []string{"admin", "client", "list", "--data", data}, nil, &list, &list); err != nil ||
		!regexp.MustCompile(rsID+`\s+resource-server\s+1\s+true`).MatchString(list.String()) {
		t.Errorf("client list: %v\n%s", err, list.String())
	}
	// The right can be given and taken back later.
	for _, args := range [][]string{{"--id", plainID}, {"--id", rsID, "--off"}} {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"admin", "client", "introspect", "--data", data}, args...), nil, &out, &out); err != nil {
			t.Fatalf("client introspect %v: %v\n%s", args, err, out.String())
		}
	}
	if got := form(plainID, plainSecret, "introspect token="+tok); got["active"] != true {
		t.Errorf("a client made a resource server later: %v", got)
	}
	if got := form(rsID, rsSecret, "introspect token="+tok); len(got) != 1 || got["active"] != false {
		t.Errorf("a resource server whose right was taken back: %v", got)
	}
	// A sub-command has only its own flags.
	if err := run(context.Background(), []string{"admin", "client", "rotate", "--data", data, "--id", rsID, "--introspect"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("client rotate accepted --introspect")
	}
}
