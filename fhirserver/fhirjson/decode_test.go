package fhirjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// stdDecode is what Decode must match: encoding/json with UseNumber, into a
// map, of a body that holds one JSON object and nothing else.
func stdDecode(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if !json.Valid(data) { // Decoder.Decode ignores what follows the value
		return nil, errors.New("data after the value")
	}
	if m == nil {
		return nil, errors.New("null")
	}
	return m, nil
}

// checkDecode fails the test unless Decode and stdDecode agree on data.
func checkDecode(t *testing.T, data []byte) (map[string]any, error) {
	t.Helper()
	got, err := Decode(data)
	want, wantErr := stdDecode(data)
	switch {
	case err != nil && wantErr == nil:
		t.Fatalf("Decode(%q) failed: %v; encoding/json gives %#v", data, err, want)
	case err == nil && wantErr != nil:
		t.Fatalf("Decode(%q) = %#v; encoding/json fails: %v", data, got, wantErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("Decode(%q)\n got %#v\nwant %#v", data, got, want)
	}
	return got, err
}

var decodeCases = []struct {
	name string
	in   string
	want map[string]any // nil: an error is expected
}{
	{"empty object", `{}`, map[string]any{}},
	{"whitespace", " \t\r\n{ \t\r\n\"a\" \n:\t1 \r, \"b\":[ 1 , 2 ] } \n\t\r ", map[string]any{"a": json.Number("1"), "b": []any{json.Number("1"), json.Number("2")}}},
	{"kinds", `{"s":"x","n":-1.5e+3,"t":true,"f":false,"z":null,"o":{"p":{}},"a":[[],{},null,"",0]}`, map[string]any{
		"s": "x", "n": json.Number("-1.5e+3"), "t": true, "f": false, "z": nil,
		"o": map[string]any{"p": map[string]any{}}, "a": []any{[]any{}, map[string]any{}, nil, "", json.Number("0")},
	}},
	{"numbers keep their text", `{"a":1.50,"b":-0,"c":1E400,"d":123456789012345678901234567890,"e":0.0000000000000000000001,"f":1e-7}`, map[string]any{
		"a": json.Number("1.50"), "b": json.Number("-0"), "c": json.Number("1E400"),
		"d": json.Number("123456789012345678901234567890"), "e": json.Number("0.0000000000000000000001"), "f": json.Number("1e-7"),
	}},
	{"duplicate keys: last wins", `{"a":1,"b":2,"a":{"x":1,"x":[2]}}`, map[string]any{"a": map[string]any{"x": []any{json.Number("2")}}, "b": json.Number("2")}},
	{"escapes", `{"a\"b\\c":"\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC"}`, map[string]any{"a\"b\\c": "\"\\/\b\f\n\r\tAé€"}},
	{"surrogate pair", `{"a":"\ud83d\ude00x"}`, map[string]any{"a": "😀x"}},
	{"unpaired high surrogate", `{"a":"\ud83dx"}`, map[string]any{"a": "\uFFFDx"}},
	{"high surrogate at the end", `{"a":"\ud83d"}`, map[string]any{"a": "\uFFFD"}},
	{"unpaired low surrogate", `{"a":"\ude00\ud83d\ude00"}`, map[string]any{"a": "\uFFFD😀"}},
	{"two high surrogates", `{"a":"\ud83d\ud83d\ude00"}`, map[string]any{"a": "\uFFFD😀"}},
	{"high surrogate then escape", `{"a":"\ud83d\n"}`, map[string]any{"a": "\uFFFD\n"}},
	{"high surrogate then non-surrogate", `{"a":"\ud83d\u0041"}`, map[string]any{"a": "\uFFFDA"}},
	{"escaped U+FFFD", `{"a":"\ufffd"}`, map[string]any{"a": "\uFFFD"}},
	{"UTF-8", `{"é":"ß😀€"}`, map[string]any{"é": "ß😀€"}},
	{"invalid UTF-8", "{\"a\":\"x\xffy\xc3\"}", map[string]any{"a": "x\uFFFDy\uFFFD"}},
	{"invalid UTF-8 in a key", "{\"\xed\xa0\x80\":1}", map[string]any{"\uFFFD\uFFFD\uFFFD": json.Number("1")}},
	{"invalid UTF-8 and escapes", "{\"a\":\"\\n\xff\"}", map[string]any{"a": "\n\uFFFD"}},
	{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", map[string]any{"a": "\uFFFD\uFFFD"}},
	{"DEL is allowed", "{\"a\":\"\x7f\"}", map[string]any{"a": "\x7f"}},

	{"empty", ``, nil},
	{"only whitespace", " \n", nil},
	{"null", `null`, nil},
	{"array", `[]`, nil},
	{"string", `"x"`, nil},
	{"number", `1`, nil},
	{"true", `true`, nil},
	{"BOM", "\xef\xbb\xbf{}", nil},
	{"trailing data", `{} x`, nil},
	{"second value", `{}{}`, nil},
	{"trailing comma", `{"a":1,}`, nil},
	{"trailing comma in array", `{"a":[1,]}`, nil},
	{"missing comma", `{"a":1 "b":2}`, nil},
	{"missing colon", `{"a" 1}`, nil},
	{"unquoted key", `{a:1}`, nil},
	{"single quotes", `{'a':1}`, nil},
	{"unterminated", `{"a":1`, nil},
	{"unterminated string", `{"a":"x}`, nil},
	{"unterminated escape", `{"a":"\`, nil},
	{"unterminated array", `{"a":[1`, nil},
	{"control character", "{\"a\":\"x\ny\"}", nil},
	{"NUL in a string", "{\"a\":\"\x00\"}", nil},
	{"bad escape", `{"a":"\x"}`, nil},
	{"escaped apostrophe", `{"a":"\'"}`, nil},
	{"short unicode escape", `{"a":"\u12"}`, nil},
	{"bad hex", `{"a":"\u12g4"}`, nil},
	{"leading zero", `{"a":01}`, nil},
	{"plus sign", `{"a":+1}`, nil},
	{"bare minus", `{"a":-}`, nil},
	{"point without digits", `{"a":1.}`, nil},
	{"leading point", `{"a":.5}`, nil},
	{"exponent without digits", `{"a":1e}`, nil},
	{"exponent sign only", `{"a":1e+}`, nil},
	{"hex number", `{"a":0x1}`, nil},
	{"NaN", `{"a":NaN}`, nil},
	{"Infinity", `{"a":-Infinity}`, nil},
	{"bad literal", `{"a":tru}`, nil},
	{"literal with junk", `{"a":truex}`, nil},
	{"capitalised literal", `{"a":True}`, nil},
	{"vertical tab", "{\"a\":1\v}", nil},
	{"non-breaking space", "{\"a\":1\u00a0}", nil},
	{"comment", `{"a":1 /* x */}`, nil},
	{"number key", `{1:1}`, nil},
}

func TestDecode(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkDecode(t, []byte(c.in))
			if c.want == nil {
				if err == nil {
					t.Fatalf("Decode(%q) = %#v, want an error", c.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Decode(%q)\n got %#v\nwant %#v", c.in, got, c.want)
			}
		})
	}
}

// TestDecodeDepth: encoding/json's nesting limit, and no stack overflow
// far beyond it.
func TestDecodeDepth(t *testing.T) {
	nest := func(n int) []byte {
		// n levels: the root object, then arrays and objects in turn.
		var b strings.Builder
		b.WriteString(`{"a":`)
		for i := 1; i < n; i++ {
			if i%2 == 1 {
				b.WriteString(`[`)
			} else {
				b.WriteString(`{"a":`)
			}
		}
		b.WriteString(`1`)
		for i := n - 1; i >= 1; i-- {
			if i%2 == 1 {
				b.WriteString(`]`)
			} else {
				b.WriteString(`}`)
			}
		}
		b.WriteString(`}`)
		return []byte(b.String())
	}
	for _, n := range []int{1, 2, 100, 1000, DecodeMaxDepth - 1, DecodeMaxDepth, DecodeMaxDepth + 1} {
		_, err := checkDecode(t, nest(n))
		if (err == nil) != (n <= DecodeMaxDepth) {
			t.Errorf("depth %d: err %v", n, err)
		}
	}
	// Unclosed and very deep: an error, not a stack overflow.
	deep := []byte(`{"a":` + strings.Repeat(`[`, 1<<20))
	if _, err := Decode(deep); err == nil {
		t.Error("1M-deep input accepted")
	}
}

// TestDecodeFixtures compares every JSON fixture of the package.
func TestDecodeFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	more, _ := filepath.Glob("testdata/setmeta/*.json")
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkDecode(t, b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestDecodeIndependent: the results of two calls share nothing (callers
// edit one copy and compare it with another).
func TestDecodeIndependent(t *testing.T) {
	in := []byte(`{"a":{"b":[1,{"c":"d"}]},"e":[]}`)
	x, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := Decode(in)
	x["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] = "changed"
	if y["a"].(map[string]any)["b"].([]any)[1].(map[string]any)["c"] != "d" {
		t.Fatal("results share memory")
	}
	// An error leaves nothing behind that a later call would see.
	if _, err := Decode([]byte(`{"a":[1,2,{"b":3,`)); err == nil {
		t.Fatal("accepted truncated input")
	}
	z, err := Decode(in)
	if err != nil || !reflect.DeepEqual(z, y) {
		t.Fatalf("after an error: %#v, %v", z, err)
	}
}

// FuzzDecode: Decode agrees with encoding/json (UseNumber) on every input.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	for _, c := range decodeCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

func BenchmarkDecode(b *testing.B) {
	for _, fixture := range []string{"observation", "patient"} {
		body, err := os.ReadFile("testdata/" + fixture + ".json")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fixture+"/fhirjson", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fixture+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.UseNumber()
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
