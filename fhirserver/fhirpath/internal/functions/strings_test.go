package functions

import (
	"encoding/json"
	"strings"
	"testing"
)

// encode, decode, escape and unescape are bounded by the string length
// limit (see TestFixStringCodecLimits in package fhirpath).
func TestFixStringCodecLimits(t *testing.T) {
	// The precomputed lengths agree with the escapers.
	for _, s := range []string{"", "plain", `&<>"'`, "a\"b\\c\nd\te\x01f\u2028g\xffh\u00e9"} {
		if got, want := htmlEscapedLen(s), len(htmlEscaper.Replace(s)); got != want {
			t.Errorf("htmlEscapedLen(%q) = %d, want %d", s, got, want)
		}
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		body := strings.TrimSpace(buf.String())
		if n, actual := jsonEscapedLen(s), len(body)-2; n < actual {
			t.Errorf("jsonEscapedLen(%q) = %d < %d", s, n, actual)
		}
	}
}
