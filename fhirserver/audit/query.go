package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strings"
)

// Audit records outlive erasure (they are hash-chained and kept for
// years), so a search's query string is never recorded as sent: its
// values name people (family=, phone=, email=). KeyedQuery keeps the
// parameter names and replaces each value by a keyed HMAC-SHA256 under a
// secret of the server (the audit query key, kept beside the other keys):
// the record cannot be read back into the value, not even by trying
// likely names without the key, yet an investigator who holds the key can
// confirm that a given value was searched (ValueTag, `kiln admin audit
// hmac`) by looking for its tag.

// TagPrefix starts every value tag, so that a tag is never mistaken for a
// value (and records from before this version, which hold raw values, can
// be told apart).
const TagPrefix = "hmac-sha256:"

// ValueTag is the tag a value is recorded as: TagPrefix and the base64url
// (unpadded) HMAC-SHA256 of the value under key. The value is taken as the
// server received it, percent-decoded: exact, case and all.
func ValueTag(key []byte, value string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(value))
	return TagPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// KeyedQuery is raw (a URL query string) with every value replaced by its
// tag, parameter names and order kept. A value that is a comma-separated
// list (FHIR's "or"; "\," is an escaped comma) gets one tag per item, so
// that each item can be confirmed on its own. A parameter without a value
// stays as it is; one whose percent-encoding is broken is tagged as sent.
// The result is ASCII, so nothing of a value survives in it.
func KeyedQuery(key []byte, raw string) string {
	if raw == "" {
		return ""
	}
	var b strings.Builder
	for i, part := range strings.Split(raw, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		name, value, hasValue := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		// The name is structure (a parameter, its modifier, a chain), but
		// it is the client's text: escaped again so it cannot forge a
		// separator.
		b.WriteString(url.QueryEscape(name))
		if !hasValue {
			continue
		}
		b.WriteByte('=')
		if value == "" {
			continue
		}
		if v, err := url.QueryUnescape(value); err == nil {
			value = v
		}
		for j, item := range splitList(value) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(ValueTag(key, item))
		}
	}
	return b.String()
}

// splitList splits a parameter value at the commas that are not escaped
// with a backslash (FHIR search §2.1.1.3), keeping the escapes in items.
func splitList(v string) []string {
	var out []string
	start := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++ // the escaped character, whatever it is
		case ',':
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}
