package audit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// KeyedQuery keeps the structure of a query (names, order, empty values,
// lists) and replaces every value by its tag, so that no value can be read
// from a record and each one can be confirmed with ValueTag.
func TestKeyedQuery(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	tag := func(v string) string { return ValueTag(key, v) }
	for _, tc := range []struct {
		name, raw, want string
		absent          []string // substrings (values) that must not remain
	}{
		{"empty", "", "", nil},
		{"names kept, values tagged", "family=Okafor&_count=10",
			"family=" + tag("Okafor") + "&_count=" + tag("10"), []string{"Okafor"}},
		{"percent-decoded before tagging", "email=amina.haddad%40example.org&phone=0412+345+678",
			"email=" + tag("amina.haddad@example.org") + "&phone=" + tag("0412 345 678"), []string{"amina", "0412", "345"}},
		{"one tag per item of a list", "family=Okafor,Haddad",
			"family=" + tag("Okafor") + "," + tag("Haddad"), []string{"Okafor", "Haddad"}},
		{"an escaped comma is part of the item", `name=a\,b`, "name=" + tag(`a\,b`), nil},
		{"modifiers and chains are names", "subject:Patient.family:exact=Okafor",
			"subject%3APatient.family%3Aexact=" + tag("Okafor"), []string{"Okafor"}},
		{"no value, empty value", "_summary&family=", "_summary&family=", nil},
		{"broken escapes are tagged as sent", "family=Oka%zzfor", "family=" + tag("Oka%zzfor"), []string{"Oka"}},
		{"a name cannot forge a separator", "a%3Db=c", "a%3Db=" + tag("c"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := KeyedQuery(key, tc.raw)
			if got != tc.want {
				t.Errorf("KeyedQuery(%q) = %q, want %q", tc.raw, got, tc.want)
			}
			for _, v := range tc.absent {
				if strings.Contains(strings.ToLower(got), strings.ToLower(v)) {
					t.Errorf("%q still holds %q", got, v)
				}
			}
		})
	}
	if ValueTag(key, "Okafor") == ValueTag([]byte("another key of thirty-two bytes!"), "Okafor") {
		t.Error("the tag does not depend on the key")
	}
	if ValueTag(key, "Okafor") == ValueTag(key, "okafor") {
		t.Error("the tag should be exact")
	}
}

// What a Recorder stores for a search holds the names and the tags under
// its QueryKey, never a value, raw or in the base64 of entity.query; with
// no key, the values are still tagged (under a key nobody holds).
func TestRecordedQueryHoldsNoValue(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		name    string
		key     []byte
		confirm bool
	}{
		{"with the server's key", key, true},
		{"without a key", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openLog(t)
			opts := testOptions(t, nil)
			opts.QueryKey = tc.key
			r := newRecorder(t, l, opts)
			ev := Event{Subtype: SubtypeSearch, Status: 200, Agent: Agent{Who: "user/1"},
				Entity: Entity{ResourceType: "Patient", Query: "family=Okafor&email=ada.okafor%40example.org"}}
			if err := r.Record(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			body := bodyOf(t, l, 1)
			var rec struct {
				Entity []struct {
					Query string `json:"query"`
				} `json:"entity"`
			}
			if err := json.Unmarshal(body, &rec); err != nil || len(rec.Entity) != 1 {
				t.Fatalf("record %s: %v", body, err)
			}
			q, err := base64.StdEncoding.DecodeString(rec.Entity[0].Query)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"Okafor", "ada.okafor", "b2thZm9y" /* base64 of "okafor"'s middle */} {
				if bytes.Contains(bytes.ToLower(body), bytes.ToLower([]byte(v))) || strings.Contains(strings.ToLower(string(q)), strings.ToLower(v)) {
					t.Errorf("the record holds %q: %s (query %s)", v, body, q)
				}
			}
			if !strings.HasPrefix(string(q), "family="+TagPrefix) || !strings.Contains(string(q), "&email="+TagPrefix) {
				t.Errorf("entity.query = %s, want the names with tags", q)
			}
			if got := strings.Contains(string(q), "family="+ValueTag(key, "Okafor")); got != tc.confirm {
				t.Errorf("the tag under the server's key found: %v, want %v (%s)", got, tc.confirm, q)
			}
		})
	}
}
