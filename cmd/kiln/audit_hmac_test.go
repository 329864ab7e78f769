package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A search's values reach the audit trail only as tags under the data
// folder's audit query key, and `kiln admin audit hmac` prints the tag an
// investigator looks for: the tag of a searched value is in the record,
// that of a value never searched is not.
func TestAuditRecordsSearchValuesAsTags(t *testing.T) {
	data := t.TempDir()
	addr, client, out, stop := startServe(t, "--data", data)
	base := "https://" + addr
	token := adminLogin(t, client, base, out.String())
	const family, email = "Zqxvbnoctal", "zq.vbn@example.org"
	q := "family=" + url.QueryEscape(family) + "&email=" + url.QueryEscape(email) + "&_count=5"
	if status, m, _ := send(t, client, "GET", base+"/fhir/Patient?"+q, token, "", nil); status != http.StatusOK {
		t.Fatalf("search: %d %v", status, m)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, body := range auditBodies(t, data) {
		for _, v := range []string{family, strings.ToLower(family), email, base64.StdEncoding.EncodeToString([]byte("family=" + family))[:12]} {
			if bytes.Contains(body, []byte(v)) {
				t.Errorf("an audit record holds %q: %s", v, body)
			}
		}
		var rec struct {
			Entity []struct {
				Query string `json:"query"`
			} `json:"entity"`
		}
		_ = json.Unmarshal(body, &rec)
		for _, e := range rec.Entity {
			if e.Query != "" {
				b, _ := base64.StdEncoding.DecodeString(e.Query)
				queries = append(queries, string(b))
			}
		}
	}
	if len(queries) != 1 {
		t.Fatalf("recorded queries %q, want the one search", queries)
	}
	tags := func(args ...string) []string {
		t.Helper()
		var o, e bytes.Buffer
		if err := run(context.Background(), append([]string{"admin", "audit", "hmac", "--data", data}, args...), strings.NewReader(family+"\n"), &o, &e); err != nil {
			t.Fatalf("audit hmac: %v\n%s", err, e.String())
		}
		return strings.Fields(o.String())
	}
	got := tags(family, email, "Someone Else")
	if len(got) != 3 {
		t.Fatalf("audit hmac printed %q", got)
	}
	if !strings.Contains(queries[0], "family="+got[0]+"&") || !strings.Contains(queries[0], "email="+got[1]+"&") {
		t.Errorf("recorded %q, the tags printed are %q", queries[0], got[:2])
	}
	if strings.Contains(queries[0], got[2]) {
		t.Errorf("a value never searched matched")
	}
	if fromStdin := tags(); len(fromStdin) != 1 || fromStdin[0] != got[0] {
		t.Errorf("from standard input: %q, want %q", fromStdin, got[0])
	}
	var e bytes.Buffer
	if err := run(context.Background(), []string{"admin", "audit", "hmac", "--data", t.TempDir(), "x"}, nil, &e, &e); err == nil {
		t.Errorf("a folder without the key printed a tag: %s", e.String())
	}
}
