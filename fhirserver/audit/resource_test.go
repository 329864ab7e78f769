package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestResourceShape(t *testing.T) {
	lu := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	src := Source{Observer: "kiln", Site: "node-1"}
	tests := []struct {
		name    string
		ev      Event
		typ     string
		subtype string
		action  string
		outcome string
		check   func(t *testing.T, m map[string]any)
	}{
		{
			name: "search with query",
			ev: Event{
				Time: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Subtype: SubtypeSearch, Status: 200,
				Agent:  Agent{Who: "user/42", Role: "provider", FHIRUser: "Practitioner/7", Address: "192.0.2.1"},
				Entity: Entity{ResourceType: "Patient", Query: "name=Smith&_count=10"}, RequestID: "r1",
			},
			typ: "rest", subtype: "search", action: "E", outcome: "0",
			check: func(t *testing.T, m map[string]any) {
				ent := m["entity"].([]any)[0].(map[string]any)
				q, err := base64.StdEncoding.DecodeString(ent["query"].(string))
				if err != nil || string(q) != "name=Smith&_count=10" {
					t.Errorf("entity.query = %v (%v)", ent["query"], err)
				}
				if ent["type"].(map[string]any)["code"] != "Patient" {
					t.Errorf("entity.type = %v", ent["type"])
				}
				agent := m["agent"].([]any)[0].(map[string]any)
				who := agent["who"].(map[string]any)
				if who["reference"] != "Practitioner/7" || who["identifier"].(map[string]any)["value"] != "user/42" {
					t.Errorf("agent.who = %v", who)
				}
				if agent["network"].(map[string]any)["address"] != "192.0.2.1" {
					t.Errorf("agent.network = %v", agent["network"])
				}
				if m["recorded"] != "2026-01-02T03:04:05.123456Z" {
					t.Errorf("recorded = %v", m["recorded"])
				}
			},
		},
		{
			name: "read not found",
			ev:   Event{Time: lu, Subtype: SubtypeRead, Status: 404, Entity: Entity{What: "Patient/123"}},
			typ:  "rest", subtype: "read", action: "R", outcome: "4",
			check: func(t *testing.T, m map[string]any) {
				ent := m["entity"].([]any)[0].(map[string]any)
				if ent["what"].(map[string]any)["reference"] != "Patient/123" {
					t.Errorf("entity.what = %v", ent["what"])
				}
				if m["outcomeDesc"] != "HTTP 404" {
					t.Errorf("outcomeDesc = %v", m["outcomeDesc"])
				}
			},
		},
		{
			name: "platform create fails",
			ev:   Event{Time: lu, Subtype: SubtypeCreate, Status: 503, Entity: Entity{Path: "/patients"}},
			typ:  "rest", subtype: "create", action: "C", outcome: "8",
			check: func(t *testing.T, m map[string]any) {
				what := m["entity"].([]any)[0].(map[string]any)["what"].(map[string]any)
				if what["identifier"].(map[string]any)["value"] != "/patients" {
					t.Errorf("entity.what = %v", what)
				}
			},
		},
		{
			name: "failed login of an unknown user",
			ev:   Event{Time: lu, Subtype: SubtypeLogin, Status: 401, Agent: Agent{Who: "someone@example.org", Address: "198.51.100.7"}},
			typ:  "110114", subtype: "login", action: "E", outcome: "4",
			check: func(t *testing.T, m map[string]any) {
				b, _ := json.Marshal(m)
				if bytes.Contains(b, []byte("example.org")) {
					t.Errorf("an email address was recorded: %s", b)
				}
				if _, ok := m["entity"]; ok {
					t.Errorf("unexpected entity: %v", m["entity"])
				}
			},
		},
		{
			name: "client secret rotation",
			ev:   Event{Time: lu, Subtype: SubtypeClientRotate, Status: 200, Agent: Agent{Who: "user/1", Role: "admin"}, Entity: Entity{Path: "client/abc"}},
			typ:  "110137", subtype: "client-rotate", action: "U", outcome: "0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, hash := tt.ev.seal(lu, src, 3, strings.Repeat("ab", 32))
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			if m["resourceType"] != "AuditEvent" || m["id"] != "ae-000000000003" {
				t.Errorf("resourceType/id = %v/%v", m["resourceType"], m["id"])
			}
			if m["type"].(map[string]any)["code"] != tt.typ {
				t.Errorf("type = %v", m["type"])
			}
			if c := m["subtype"].([]any)[0].(map[string]any)["code"]; c != tt.subtype {
				t.Errorf("subtype = %v", c)
			}
			if m["action"] != tt.action || m["outcome"] != tt.outcome {
				t.Errorf("action/outcome = %v/%v", m["action"], m["outcome"])
			}
			if m["recorded"] == nil {
				t.Error("no recorded")
			}
			if m["meta"].(map[string]any)["lastUpdated"] != "2026-01-02T03:04:06.000000Z" {
				t.Errorf("meta = %v", m["meta"])
			}
			agent := m["agent"].([]any)[0].(map[string]any)
			if agent["requestor"] != true {
				t.Errorf("agent.requestor = %v", agent["requestor"])
			}
			if m["source"].(map[string]any)["observer"].(map[string]any)["display"] != "kiln" {
				t.Errorf("source = %v", m["source"])
			}
			rec, err := parseRecord(body)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Seq != 3 || rec.Prev != strings.Repeat("ab", 32) || rec.Hash != hash || rec.Computed != hash {
				t.Errorf("chain = %+v, want hash %s", rec, hash)
			}
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

func TestCanonicalBytes(t *testing.T) {
	// The hash is SHA-256 over prev's raw bytes and the body with an empty
	// hash value: check against an independent computation.
	ev := Event{Time: time.Unix(1, 0), Subtype: SubtypeRead, Entity: Entity{What: "Patient/1"}}
	lu := time.Unix(2, 0)
	body, hash := ev.seal(lu, Source{Observer: "kiln"}, 1, zeroHash)
	canonical := ev.resource("ae-000000000001", lu, Source{Observer: "kiln"}, chainFields{Seq: 1, Prev: zeroHash})
	if !bytes.Contains(canonical, []byte(`{"url":"hash","valueString":""}`)) {
		t.Fatalf("canonical bytes: %s", canonical)
	}
	want, _ := chainHash(zeroHash, canonical)
	if hash != want || !bytes.Equal(bytes.Replace(body, []byte(hash), nil, 1), canonical) {
		t.Errorf("hash %s, want %s", hash, want)
	}
	// An event whose strings imitate the hash element cannot confuse it.
	ev.Entity.What = `x{"url":"hash","valueString":""}`
	body, hash = ev.seal(lu, Source{Observer: "kiln"}, 1, zeroHash)
	if rec, err := parseRecord(body); err != nil || rec.Computed != hash {
		t.Errorf("parse: %+v, %v", rec, err)
	}
}

func TestIDs(t *testing.T) {
	for _, tt := range []struct {
		id  string
		seq int64
		ok  bool
	}{
		{"ae-000000000001", 1, true},
		{"ae-000000000042", 42, true},
		{"ae-1234567890123", 1234567890123, true},
		{"ae-000000000000", 0, false},
		{"ae-00000000042", 0, false},
		{"ae-0000000000042", 0, false},
		{"ae-00000000004x", 0, false},
		{"Patient/1", 0, false},
	} {
		seq, ok := seqOf(tt.id)
		if seq != tt.seq || ok != tt.ok {
			t.Errorf("seqOf(%q) = %d, %v", tt.id, seq, ok)
		}
		if ok && idFor(seq) != tt.id {
			t.Errorf("idFor(%d) = %s", seq, idFor(seq))
		}
	}
}
