package reference

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

var errTestRef = errors.New("test: refused reference")

// tableTargets maps the references the table tests replace; "bad" fails.
func tableTargets(ref string) (string, error) {
	switch ref {
	case "bad":
		return "", errTestRef
	case "same":
		return "same", nil
	}
	return map[string]string{
		"urn:uuid:a":       "Patient/1",
		"urn:uuid:b":       "Practitioner/2",
		`a"b\c é 😀`:        "Organization/3",
		"urn:uuid:escapes": "X/\"q\"\\<&>\u2028\x01\n",
	}[ref], nil
}

// tableLinks maps the urn links the table tests replace.
func tableLinks(link string) string {
	to, _ := tableTargets(link)
	return to
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func TestRewriteReferences(t *testing.T) {
	for _, c := range []struct {
		name, in, want string // want "" means the input comes back as is
	}{
		{"order kept, resourceType first",
			`{"resourceType":"Observation","status":"final","code":{"text":"w"},"subject":{"reference":"urn:uuid:a"},"id":"x"}`,
			`{"resourceType":"Observation","status":"final","code":{"text":"w"},"subject":{"reference":"Patient/1"},"id":"x"}`},
		{"whitespace kept",
			"{\n  \"resourceType\" : \"Observation\",\n\t\"subject\" : {  \"reference\"\r\n :\n \"urn:uuid:a\" } ,\"n\": [ 1 , 2.5e-3 ]\n}\n",
			"{\n  \"resourceType\" : \"Observation\",\n\t\"subject\" : {  \"reference\"\r\n :\n \"Patient/1\" } ,\"n\": [ 1 , 2.5e-3 ]\n}\n"},
		{"extension valueReference",
			`{"extension":[{"url":"u","valueReference":{"reference":"urn:uuid:b","display":"d"}},{"url":"v","extension":[{"url":"w","valueReference":{"reference":"urn:uuid:a"}}]}]}`,
			`{"extension":[{"url":"u","valueReference":{"reference":"Practitioner/2","display":"d"}},{"url":"v","extension":[{"url":"w","valueReference":{"reference":"Patient/1"}}]}]}`},
		{"contained resources",
			`{"resourceType":"Observation","contained":[{"resourceType":"Specimen","id":"s","subject":{"reference":"urn:uuid:a"}}],"specimen":{"reference":"#s"}}`,
			`{"resourceType":"Observation","contained":[{"resourceType":"Specimen","id":"s","subject":{"reference":"Patient/1"}}],"specimen":{"reference":"#s"}}`},
		{"array of references",
			`{"performer":[{"reference":"urn:uuid:b"},{"reference":"urn:uuid:a"},{"reference":"keep"}]}`,
			`{"performer":[{"reference":"Practitioner/2"},{"reference":"Patient/1"},{"reference":"keep"}]}`},
		{"reference whose value is an object is descended",
			`{"reference":{"reference":"urn:uuid:a","x":true}}`,
			`{"reference":{"reference":"Patient/1","x":true}}`},
		{"reference whose value is a number, null or array is left", `{"reference":1,"a":{"reference":null},"b":{"reference":["urn:uuid:a"]},"c":{"reference":false}}`, ""},
		{"escaped key", `{"refer\u0065nce":"urn:uuid:a"}`, `{"refer\u0065nce":"Patient/1"}`},
		{"escaped key, upper-case hex", `{"\u0072eference":"urn:uuid:a"}`, `{"\u0072eference":"Patient/1"}`},
		{"escaped value", `{"reference":"urn:uuid:\u0061"}`, `{"reference":"Patient/1"}`},
		{"value with quotes, backslashes and unicode", `{"reference":"a\"b\\c \u00e9 \ud83d\ude00"}`, `{"reference":"Organization/3"}`},
		{"raw unicode value", `{"reference":"a\"b\\c é 😀"}`, `{"reference":"Organization/3"}`},
		{"replacement needing escapes", `{"reference":"urn:uuid:escapes"}`, `{"reference":"X/\"q\"\\<&>\u2028\u0001\n"}`},
		{"a string value equal to reference is no key", `{"display":"reference","x":"urn:uuid:a","y":["reference","urn:uuid:a"]}`, ""},
		{"a near key is no key", `{"references":"urn:uuid:a","Reference":"urn:uuid:a","refer\u0065nc":"urn:uuid:a"}`, ""},
		{"unchanged target", `{"reference":"same","b":{"reference":"other"}}`, ""},
		{"no reference at all", `{"resourceType":"Patient","name":[{"family":"X"}]}`, ""},
		{"top-level array", `[{"reference":"urn:uuid:a"}, {"reference":"urn:uuid:b"}]`, `[{"reference":"Patient/1"}, {"reference":"Practitioner/2"}]`},
		{"empty containers", `{"a":{},"b":[],"c":[{}],"reference":"urn:uuid:a"}`, `{"a":{},"b":[],"c":[{}],"reference":"Patient/1"}`},
		// Elements named reference that are uris, not a Reference's.
		{"DetectedIssue.reference", `{"resourceType":"DetectedIssue","status":"final","reference":"urn:uuid:a"}`, ""},
		{"a contained DetectedIssue's reference",
			`{"resourceType":"Observation","contained":[{"reference":"urn:uuid:a","resourceType":"DetectedIssue"}],"subject":{"reference":"urn:uuid:a"}}`,
			`{"resourceType":"Observation","contained":[{"reference":"urn:uuid:a","resourceType":"DetectedIssue"}],"subject":{"reference":"Patient/1"}}`},
		{"Expression.reference, language before or after",
			`{"extension":[{"url":"u","valueExpression":{"language":"text/fhirpath","reference":"urn:uuid:a"}},{"url":"v","valueExpression":{"reference":"urn:uuid:a","language":"x"}}]}`, ""},
		{"Immunization.education.reference",
			`{"resourceType":"Immunization","education":[{"reference":"urn:uuid:a"},{"documentType":"x","reference":"urn:uuid:b"}],"patient":{"reference":"urn:uuid:b"}}`,
			`{"resourceType":"Immunization","education":[{"reference":"urn:uuid:a"},{"documentType":"x","reference":"urn:uuid:b"}],"patient":{"reference":"Practitioner/2"}}`},
		{"a Reference inside an education element is one",
			`{"education":[{"extension":[{"url":"u","valueReference":{"reference":"urn:uuid:a"}}]}]}`,
			`{"education":[{"extension":[{"url":"u","valueReference":{"reference":"Patient/1"}}]}]}`},
		{"truncated", `{"reference":"urn:uuid:a"`, ""},
		{"truncated string", `{"reference":"urn:uuid:a`, ""},
		{"truncated escape", `{"reference":"urn:uuid:a\u00`, ""},
		{"unbalanced", `{"reference":"urn:uuid:a"}}`, ""},
		{"mismatched bracket", `{"a":[{"reference":"urn:uuid:a"}}}`, ""},
		{"unclosed array", `[{"reference":"urn:uuid:a"}`, ""},
		{"trailing comma", `{"reference":"urn:uuid:a",}`, ""},
		{"missing colon", `{"reference" "urn:uuid:a"}`, ""},
		{"bad escape", `{"reference":"urn:uuid:a\x"}`, ""},
		{"short unicode escape", `{"reference":"\u12","x":"urn:uuid:a"}`, ""},
		{"control character in string", "{\"reference\":\"urn:uuid:a\x01\"}", ""},
		{"trailing garbage", `{"reference":"urn:uuid:a"} x`, ""},
		{"bare word", `{"a":urn,"reference":"urn:uuid:a"}`, ""},
		{"leading zero", `{"a":01,"reference":"urn:uuid:a"}`, ""},
		{"bad literal", `{"a":tru,"reference":"urn:uuid:a"}`, ""},
		{"bad number", `{"a":-,"b":1.,"reference":"urn:uuid:a"}`, ""},
		{"non-string key", `{1:"x","reference":"urn:uuid:a"}`, ""},
		{"error after the syntax error is not reached", `{"reference":"bad",`, ""},
		{"empty", ``, ""},
		{"whitespace only", " \n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.in)
			out, err := Rewrite(in, tableTargets, nil)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if c.want == "" {
				if !sameSlice(out, in) {
					t.Fatalf("changed to %q, want the input slice", out)
				}
				return
			}
			if string(out) != c.want {
				t.Fatalf("got  %s\nwant %s", out, c.want)
			}
		})
	}
}

// The R4 transaction rules ask that links to an entry be replaced
// "whether they are found in the resource ids, resource references,
// elements of type uri, url, oid, uuid, and <a href="" & <img src="" in
// the narrative". Names that merely look like links (ids, identifier
// values, the resource's own canonical url) are kept.
func TestRewriteLinks(t *testing.T) {
	for _, c := range []struct {
		name, in, want string // want "" means the input comes back as is
	}{
		{"attachment url",
			`{"resourceType":"DocumentReference","content":[{"attachment":{"contentType":"text/plain","url":"urn:uuid:a"}}]}`,
			`{"resourceType":"DocumentReference","content":[{"attachment":{"contentType":"text/plain","url":"Patient/1"}}]}`},
		{"uri array and extension valueUri",
			`{"instantiatesUri":["urn:uuid:a","http://keep"],"extension":[{"url":"http://x","valueUri":"urn:uuid:b"}]}`,
			`{"instantiatesUri":["Patient/1","http://keep"],"extension":[{"url":"http://x","valueUri":"Practitioner/2"}]}`},
		{"narrative href and src",
			`{"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><a href=\"urn:uuid:a\">p</a><img src='urn:uuid:b'/><a href=\"urn:uuid:zz\">x</a> urn:uuid:a</div>"}}`,
			`{"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><a href=\"Patient/1\">p</a><img src='Practitioner/2'/><a href=\"urn:uuid:zz\">x</a> urn:uuid:a</div>"}}`},
		{"narrative link whose replacement would need escaping is kept",
			`{"text":{"div":"<div><a href=\"urn:uuid:escapes\">x</a></div>"}}`, ""},
		{"a canonical is a link wherever it is", `{"resourceType":"OperationDefinition","base":"urn:uuid:a"}`, `{"resourceType":"OperationDefinition","base":"Patient/1"}`},
		{"escaped link", `{"valueUri":"urn:uuid:\u0061"}`, `{"valueUri":"Patient/1"}`},
		{"free text and codes are not links",
			`{"code":{"text":"urn:uuid:a","coding":[{"system":"urn:uuid:b","code":"urn:uuid:a","display":"urn:uuid:a"}]},"item":[{"linkId":"urn:uuid:a"}],"note":[{"text":"urn:uuid:a"}]}`,
			`{"code":{"text":"urn:uuid:a","coding":[{"system":"Practitioner/2","code":"urn:uuid:a","display":"urn:uuid:a"}]},"item":[{"linkId":"urn:uuid:a"}],"note":[{"text":"urn:uuid:a"}]}`},
		{"names are kept",
			`{"resourceType":"ValueSet","id":"urn:uuid:a","url":"urn:uuid:a","identifier":[{"system":"urn:ietf:rfc:3986","value":"urn:uuid:a"}],"fullUrl":"urn:uuid:a"}`, ""},
		{"a contained resource's url is a link",
			`{"resourceType":"Library","url":"urn:uuid:a","contained":[{"resourceType":"Library","url":"urn:uuid:b"}]}`,
			`{"resourceType":"Library","url":"urn:uuid:a","contained":[{"resourceType":"Library","url":"Practitioner/2"}]}`},
		{"unknown urn and other strings are kept", `{"x":"urn:uuid:zz","y":"see urn:uuid:a","z":"urn:isbn:1"}`, ""},
		{"uris named reference are links",
			`{"resourceType":"DetectedIssue","reference":"urn:uuid:a","extension":[{"url":"u","valueExpression":{"language":"x","reference":"urn:uuid:b"}}]}`,
			`{"resourceType":"DetectedIssue","reference":"Patient/1","extension":[{"url":"u","valueExpression":{"language":"x","reference":"Practitioner/2"}}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.in)
			out, err := Rewrite(in, tableTargets, tableLinks)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if c.want == "" {
				if !sameSlice(out, in) {
					t.Fatalf("changed to %s, want the input slice", out)
				}
				return
			}
			if string(out) != c.want {
				t.Fatalf("got  %s\nwant %s", out, c.want)
			}
		})
	}
}

func TestRewriteReferencesErrors(t *testing.T) {
	in := []byte(`{"a":{"reference":"urn:uuid:a"},"b":[{"reference":"bad"}]}`)
	if _, err := Rewrite(in, tableTargets, tableLinks); !errors.Is(err, errTestRef) {
		t.Fatalf("error %v, want the callback's", err)
	}
	// Malformed input is left to the handler: no callback, no error.
	called := false
	out, err := Rewrite([]byte(`{"reference":"bad","x":"urn:uuid:a"`), func(string) (string, error) {
		called = true
		return "", errTestRef
	}, func(string) string {
		called = true
		return "X/1"
	})
	if err != nil || called || string(out) != `{"reference":"bad","x":"urn:uuid:a"` {
		t.Fatalf("malformed: %q %v (called %v)", out, err, called)
	}
}

// rewriteAny is the former implementation, the fuzz oracle: decode into
// maps, replace, and report whether anything changed. A failing
// replacement anywhere is an error, whatever the map order.
func rewriteAny(res []byte, replace func(string) (string, error), urn func(string) string) (doc any, changed bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(res))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, false, err
	}
	// link is what a string that may be a urn link becomes.
	link := func(s string, narrative bool) string {
		switch {
		case urn == nil:
			return s
		case narrative:
			if to := narrativeLinks(s, urn); to != "" {
				return to
			}
		default:
			if to := urn(s); to != "" {
				return to
			}
		}
		return s
	}
	// An array of links, at any depth of arrays.
	var linkArray func([]any)
	linkArray = func(a []any) {
		for i, e := range a {
			switch e := e.(type) {
			case string:
				if to := link(e, false); to != e {
					a[i], changed = to, true
				}
			case []any:
				linkArray(e)
			}
		}
	}
	// edu: node is an Immunization.education element, or an array of them.
	var walk func(node any, top, edu bool)
	walk = func(node any, top, edu bool) {
		switch n := node.(type) {
		case map[string]any:
			// A "reference" of a resource, an Expression or an education
			// element is a uri (see scanReferences).
			uri := edu
			for k := range n {
				uri = uri || notReference[k]
			}
			for k, v := range n {
				if ref, ok := v.(string); ok && k == "reference" && uri {
					if to := link(ref, false); to != ref {
						n[k], changed = to, true
					}
					continue
				}
				if ref, ok := v.(string); ok && k == "reference" {
					to, e := replace(ref)
					if e != nil {
						err = e
					} else if to != "" && to != ref {
						n[k] = to
						changed = true
					}
					continue
				}
				if k != "div" && !linkNames()[k] || k == "id" || k == "value" || k == "fullUrl" || k == "url" && top {
					walk(v, false, k == "education")
					continue
				}
				switch v := v.(type) {
				case string:
					if to := link(v, k == "div"); to != v {
						n[k], changed = to, true
					}
				case []any:
					if k != "div" {
						linkArray(v)
					}
				}
				walk(v, false, false)
			}
		case []any:
			for _, v := range n {
				walk(v, false, edu)
			}
		}
	}
	walk(doc, true, false)
	return doc, changed, err
}

// fuzzTargets replaces some references, keeps others, and refuses those
// with a '!', with replacements that need escaping.
func fuzzTargets(ref string) (string, error) {
	if strings.Contains(ref, "!") {
		return "", errTestRef
	}
	switch len(ref) % 3 {
	case 0:
		return "", nil
	case 1:
		return ref, nil
	}
	return "T/" + ref + "\"\\<\u2028\x01", nil
}

// fuzzLinks replaces some urn links, by the same rule as fuzzTargets.
func fuzzLinks(link string) string {
	to, _ := fuzzTargets(strings.ReplaceAll(link, "!", ""))
	return to
}

func FuzzRewriteReferences(f *testing.F) {
	for _, s := range []string{
		`{"resourceType":"Observation","status":"final","subject":{"reference":"urn:uuid:ab"},"performer":[{"reference":"xy"},{"reference":"abcd"}]}`,
		`{"refer\u0065nce":"urn:uuid:\u0061b","contained":[{"reference":{"reference":"q!"}}]}`,
		`{"display":"reference","reference":null,"x":[1,-2.5e+3,true,false,null,"reference"]}`,
		"{\n \"reference\" : \"a\\\"b\\\\c\\ud83d\\ude00\" }",
		`{"reference":"\ud800","reference":"ok"}`,
		`{"reference":"urn:uuid:ab"`,
		`[{"reference":"ab"}]`,
		`{"url":"urn:uuid:ab","instantiatesUri":["urn:oid:1.2",["urn:uuid:abcd"]],"text":{"div":"<a href='urn:uuid:abc'>x</a>"},"c":[{"url":"urn:uuid:ab","display":"urn:uuid:ab"}]}`,
	} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile(filepath.Join("..", "testdata", "bundles", "transaction-references.json")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, err := Rewrite(in, fuzzTargets, fuzzLinks)
		if !bytes.Equal(in, orig) {
			t.Fatalf("the input was modified")
		}
		if !json.Valid(in) {
			if err != nil || !sameSlice(out, in) {
				t.Fatalf("invalid JSON: got %q, %v; want the input unchanged", out, err)
			}
			return
		}
		want, changed, wantErr := rewriteAny(in, fuzzTargets, fuzzLinks)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("no error, want %v", wantErr)
			}
			return
		}
		if err != nil {
			// A refused reference shadowed by a duplicate key is seen by
			// the scanner only.
			return
		}
		if changed && sameSlice(out, in) {
			t.Fatalf("nothing replaced, want a change")
		}
		if !sameSlice(out, in) && bytes.Equal(out, in) {
			t.Fatalf("unchanged output is a copy")
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		var got any
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("output %q is invalid: %v", out, err)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q is invalid", out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("in  %q\nout %q\ngot  %#v\nwant %#v", in, out, got, want)
		}
	})
}

// benchObservation is a typical transaction entry: an Observation with
// two references to other entries.
var benchObservation = []byte(`{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs","display":"Vital Signs"}]}],"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body weight"}],"text":"Body weight"},"subject":{"reference":"urn:uuid:9e1c7d20-1111-4a6b-8c3d-4d5e6f7a8b01"},"effectiveDateTime":"2024-03-01T10:30:00Z","performer":[{"reference":"urn:uuid:9e1c7d20-3333-4a6b-8c3d-4d5e6f7a8b03"}],"valueQuantity":{"value":70.5,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`)

func benchTargets(ref string) (string, error) {
	switch ref {
	case "urn:uuid:9e1c7d20-1111-4a6b-8c3d-4d5e6f7a8b01":
		return "Patient/0190a1b2c3d4e5f6", nil
	case "urn:uuid:9e1c7d20-3333-4a6b-8c3d-4d5e6f7a8b03":
		return "Practitioner/0190a1b2c3d4e5f7", nil
	}
	return "", nil
}

func benchLinks(link string) string {
	to, _ := benchTargets(link)
	return to
}

func BenchmarkRewriteReferences(b *testing.B) {
	b.Run("any", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchObservation)))
		for b.Loop() {
			doc, _, err := rewriteAny(benchObservation, benchTargets, nil)
			if err != nil {
				b.Fatal(err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchObservation)))
		for b.Loop() {
			if _, err := Rewrite(benchObservation, benchTargets, benchLinks); err != nil {
				b.Fatal(err)
			}
		}
	})
}
