package jsonquote

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAppend: every string round-trips through encoding/json (invalid
// UTF-8 as U+FFFD) and is written byte for byte as encoding/json writes it
// with HTML escaping off.
func TestAppend(t *testing.T) {
	for _, s := range []string{"", "plain", `"\`, "<&>", "\x00\b\f\n\r\t\x1f\x7f", "é😀", "\u2028\u2029", "bad\xffutf8\xc3", "\ud7ff\ue000"} {
		b := Append(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encodes to invalid %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); back != want {
			t.Errorf("%q round-trips to %q, want %q", s, back, want)
		}
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		_ = e.Encode(s)
		if got := string(b); got != strings.TrimSuffix(enc.String(), "\n") {
			t.Errorf("%q encodes to %s, encoding/json to %s", s, got, enc.String())
		}
	}
}
