package fhirjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The encoding/json implementations that BundleEntries and ResourceInfo
// replaced, kept as the oracle of the tests below.

type oldBundleIn struct {
	Entry []struct {
		FullURL  string          `json:"fullUrl"`
		Resource json.RawMessage `json:"resource"`
		Request  *struct {
			Method          string `json:"method"`
			URL             string `json:"url"`
			IfNoneMatch     string `json:"ifNoneMatch"`
			IfModifiedSince string `json:"ifModifiedSince"`
			IfMatch         string `json:"ifMatch"`
			IfNoneExist     string `json:"ifNoneExist"`
		} `json:"request"`
	} `json:"entry"`
}

func oldBundleEntries(body []byte) ([]BundleEntry, error) {
	var in oldBundleIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	var out []BundleEntry
	for _, e := range in.Entry {
		be := BundleEntry{FullURL: e.FullURL, Resource: e.Resource}
		if e.Request != nil {
			rq := EntryRequest(*e.Request)
			be.Request = &rq
		}
		out = append(out, be)
	}
	return out, nil
}

func oldResourceInfo(body []byte) (Info, bool) {
	var info Info
	if json.Unmarshal(body, &struct {
		ResourceType *string `json:"resourceType"`
		ID           *string `json:"id"`
	}{&info.ResourceType, &info.ID}) != nil {
		return info, false
	}
	return info, true
}

const splitCases = `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`

func TestBundleEntries(t *testing.T) {
	req := func(method, url string) *EntryRequest { return &EntryRequest{Method: method, URL: url} }
	for _, tc := range []struct {
		name, body string
		want       []BundleEntry
		err        bool
	}{
		{"no entry", `{"resourceType":"Bundle","type":"batch"}`, nil, false},
		{"null entry", `{"resourceType":"Bundle","entry":null}`, nil, false},
		{"empty entry array", `{"resourceType":"Bundle","entry":[]}`, []BundleEntry{}, false},
		{"full", `{"resourceType":"Bundle","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient"},"request":{"method":"PUT","url":"Patient/1","ifNoneMatch":"*","ifModifiedSince":"2020-01-01T00:00:00Z","ifMatch":"W/\"1\"","ifNoneExist":"identifier=a|b"}}]}`,
			[]BundleEntry{{FullURL: "urn:uuid:1", Resource: []byte(`{"resourceType":"Patient"}`),
				Request: &EntryRequest{"PUT", "Patient/1", "*", "2020-01-01T00:00:00Z", `W/"1"`, "identifier=a|b"}}}, false},
		{"whitespace", "\t{ \"entry\" :\n[ { \"request\" : { \"url\" : \"Patient\" , \"method\" : \"GET\" } , \"resource\" :\r\n[ 1 , 2 ] } ] , \"resourceType\" : \"Bundle\" } ",
			[]BundleEntry{{Resource: []byte("[ 1 , 2 ]"), Request: req("GET", "Patient")}}, false},
		{"escapes", `{"resourceType":"Bundle","\u0065ntry":[{"full\u0055rl":"urn:uuid:\u00e9\ud83d\ude00","r\u0065quest":{"m\u0065thod":"P\u004fST","url":"Patient?name=a\/b\"c"}}]}`,
			[]BundleEntry{{FullURL: "urn:uuid:é😀", Request: req("POST", `Patient?name=a/b"c`)}}, false},
		{"resource nested", `{"resourceType":"Bundle","entry":[{"search":{"resource":{"request":{"method":"DELETE"}}},"resource":{"resourceType":"Basic","resource":"x","request":{"method":"PUT"}},"request":{"method":"POST","url":"Basic"}}]}`,
			[]BundleEntry{{Resource: []byte(`{"resourceType":"Basic","resource":"x","request":{"method":"PUT"}}`), Request: req("POST", "Basic")}}, false},
		{"no resource, no request", `{"resourceType":"Bundle","entry":[{"fullUrl":"a"},{}]}`, []BundleEntry{{FullURL: "a"}, {}}, false},
		{"nulls", `{"resourceType":"Bundle","entry":[null,{"fullUrl":null,"request":null},{"request":{"method":null,"url":"x"}}]}`,
			[]BundleEntry{{}, {}, {Request: req("", "x")}}, false},
		{"empty request", `{"resourceType":"Bundle","entry":[{"request":{}}]}`, []BundleEntry{{Request: &EntryRequest{}}}, false},
		{"other request members", `{"resourceType":"Bundle","entry":[{"request":{"_method":{"id":"a"},"method":"GET","extension":[{"url":"x"}]}}]}`,
			[]BundleEntry{{Request: req("GET", "")}}, false},
		{"string entry element", `{"resourceType":"Bundle","entry":["x"]}`, nil, true},
		{"array entry element", `{"resourceType":"Bundle","entry":[[]]}`, nil, true},
		{"number entry element", `{"resourceType":"Bundle","entry":[{},1]}`, nil, true},
		{"object entry", `{"resourceType":"Bundle","entry":{}}`, nil, true},
		{"number fullUrl", `{"resourceType":"Bundle","entry":[{"fullUrl":1}]}`, nil, true},
		{"string request", `{"resourceType":"Bundle","entry":[{"request":"GET"}]}`, nil, true},
		{"array method", `{"resourceType":"Bundle","entry":[{"request":{"method":["GET"]}}]}`, nil, true},
		{"bool url", `{"resourceType":"Bundle","entry":[{"request":{"url":true}}]}`, nil, true},
		{"not an object", `[{"entry":[]}]`, nil, true},
		{"truncated", `{"resourceType":"Bundle","entry":[{"request":{"method":"GET"}`, nil, true},
		{"bad string", `{"resourceType":"Bundle","entry":[{"fullUrl":"a\`, nil, true},
		{"trailing data", `{"resourceType":"Bundle"} x`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BundleEntries([]byte(tc.body))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error: %v", err, tc.err)
			}
			if tc.err {
				if _, oerr := oldBundleEntries([]byte(tc.body)); oerr == nil {
					t.Errorf("the old decode accepted it")
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", dumpEntries(got), dumpEntries(tc.want))
			}
			old, oerr := oldBundleEntries([]byte(tc.body))
			if oerr != nil || !sameEntries(got, old) {
				t.Errorf("got %s\nold %s (%v)", dumpEntries(got), dumpEntries(old), oerr)
			}
		})
	}
}

// FHIR JSON is case-sensitive, while encoding/json matched struct fields
// case-insensitively. The scanners read only the exact names; the
// validator rejects the other spellings before the scanners run.
func TestEntriesCaseSensitive(t *testing.T) {
	body := `{"resourceType":"Bundle","type":"batch","Entry":[{"request":{"method":"GET","url":"Patient"}}],"entry":[{"fullURL":"a","rEsource":{"resourceType":"Patient"},"request":{"Method":"GET","uRL":"Patient"}}]}`
	got, err := BundleEntries([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if want := []BundleEntry{{Request: &EntryRequest{}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %s", dumpEntries(got))
	}
	info, ok := ResourceInfo([]byte(`{"ResourceType":"Patient","resourceType":"Basic","iD":"x"}`))
	if !ok || info != (Info{ResourceType: "Basic"}) {
		t.Errorf("ResourceInfo = %+v, %v", info, ok)
	}
	v, err := NewValidator(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{
		`{"resourceType":"Bundle","type":"batch","Entry":[{"request":{"method":"GET","url":"Patient"}}]}`,
		`{"resourceType":"Bundle","type":"batch","entry":[{"fullURL":"a","request":{"method":"GET","url":"Patient"}}]}`,
		`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","uRL":"Patient"}}]}`,
		`{"resourceType":"Bundle","type":"batch","entry":[{"rEsource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`,
		`{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Patient","iD":"x"},"request":{"method":"POST","url":"Patient"}},{"resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`,
	} {
		if _, err := v.CheckBundle([]byte(b)); err == nil {
			t.Errorf("CheckBundle accepted %s", b)
		}
	}
}

func TestResourceInfo(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Info
		ok   bool
	}{
		{`{"resourceType":"Patient","id":"p1"}`, Info{ResourceType: "Patient", ID: "p1"}, true},
		{" {\n \"id\" : \"p1\" ,\t\"resourceType\" : \"Patient\" } \n", Info{ResourceType: "Patient", ID: "p1"}, true},
		{`{"resourceType":"Patient"}`, Info{ResourceType: "Patient"}, true},
		{`{"r\u0065sourceType":"Pati\u0065nt","\u0069d":"a\u002db"}`, Info{ResourceType: "Patient", ID: "a-b"}, true},
		{`{"contained":[{"resourceType":"Basic","id":"c"}],"meta":{"id":"m"},"resourceType":"Patient"}`, Info{ResourceType: "Patient"}, true},
		{`{"resourceType":"Bundle","type":"batch"}`, Info{ResourceType: "Bundle"}, true},
		{`{"resourceType":null,"id":null}`, Info{}, true},
		{`{}`, Info{}, true},
		{`{"resourceType":"Patient","id":1}`, Info{}, false},
		{`{"resourceType":["Patient"]}`, Info{}, false},
		{`{"resourceType":{"x":1}}`, Info{}, false},
		{`{"resourceType":"Patient","id":true}`, Info{}, false},
		{`"Patient"`, Info{}, false},
		{`[{"resourceType":"Patient"}]`, Info{}, false},
		{`12`, Info{}, false},
		{``, Info{}, false},
		{`{"resourceType":"Patient"`, Info{}, false},
		{`{"resourceType":"Patient"}}`, Info{}, false},
		{`{"resourceType":"Patient" "id":"x"}`, Info{}, false},
	} {
		got, ok := ResourceInfo([]byte(tc.body))
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("ResourceInfo(%s) = %+v, %v; want %+v, %v", tc.body, got, ok, tc.want, tc.ok)
		}
		if old, ook := oldResourceInfo([]byte(tc.body)); ook != ok || (ok && old != got) {
			t.Errorf("ResourceInfo(%s) = %+v, %v; the old one said %+v, %v", tc.body, got, ok, old, ook)
		}
	}
	// The one deliberate difference: null is not a JSON object (it cannot
	// reach ResourceInfo: the guard refuses a null resource).
	if _, ok := ResourceInfo([]byte(`null`)); ok {
		t.Error("ResourceInfo accepted null")
	}
}

func sameEntries(a, b []BundleEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.FullURL != y.FullURL || !bytes.Equal(x.Resource, y.Resource) || (x.Resource == nil) != (y.Resource == nil) ||
			(x.Request == nil) != (y.Request == nil) || (x.Request != nil && *x.Request != *y.Request) {
			return false
		}
	}
	return true
}

func dumpEntries(es []BundleEntry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("{" + e.FullURL + " | " + string(e.Resource) + " | ")
		if e.Request != nil {
			b.WriteString(e.Request.Method + " " + e.Request.URL)
		} else {
			b.WriteString("<nil>")
		}
		b.WriteString("} ")
	}
	return b.String()
}

// caseFolded reports whether body has a member name that encoding/json
// would have matched to one of the names the scanners read although it is
// spelt differently: the scanners are case-sensitive, the old code was not.
func caseFolded(body []byte) bool {
	names := []string{"entry", "fullUrl", "resource", "request", "method", "url", "ifNoneMatch", "ifModifiedSince", "ifMatch", "ifNoneExist", "resourceType", "id"}
	d := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if k, ok := tok.(string); ok {
			for _, n := range names {
				if k != n && strings.EqualFold(k, n) {
					return true
				}
			}
		}
	}
}

// FuzzBundleEntries compares BundleEntries and ResourceInfo with their
// encoding/json predecessors on every input the guard lets
// through without a syntax error or a duplicate key, and checks that no
// input makes them panic.
func FuzzBundleEntries(f *testing.F) {
	fuzzSeeds(f)
	for _, s := range []string{
		splitCases,
		`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"Patient"}},{"fullUrl":"x","resource":{"resourceType":"Basic","id":"b","resource":{"request":1}},"request":{"method":"PUT","url":"Basic/b","ifMatch":"W/\"1\""}}]}`,
		" {\"resourceType\" : \"Bundle\" , \"entr\\u0079\" : [ {\"resourc\\u0065\" : {\"resourceType\":\"Patient\"} } , null ] } ",
		`{"resourceType":"Bundle","entry":[{"fullUrl":"a<b&c\u2028","search":{"score":1.50e+1}}]}`,
		`{"resourceType":"Bundle","entry":[{"resource":"x"},{"resource":null},{"resource":1},{"resource":[]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := BundleEntries(body)
		info, infoOK := ResourceInfo(body)
		s := scanDoc(body, maxSupportedDepth)
		if s.fatal {
			return // malformed: only must not panic
		}
		for _, is := range s.issues {
			if strings.HasPrefix(is.msg, "duplicate key") {
				return // the guard refuses these; the old code kept the last
			}
		}
		if caseFolded(body) {
			return
		}

		old, oerr := oldBundleEntries(body)
		if (err != nil) != (oerr != nil) {
			t.Fatalf("BundleEntries error %v, old %v", err, oerr)
		}
		if err == nil && !sameEntries(entries, old) {
			t.Fatalf("entries %s\n    old %s", dumpEntries(entries), dumpEntries(old))
		}

		check := func(b []byte, info Info, ok bool) {
			oinfo, ook := oldResourceInfo(b)
			if string(bytes.TrimSpace(b)) == "null" {
				ook = false // the old decode took null for an empty object
			}
			if ok != ook || (ok && info != oinfo) {
				t.Fatalf("ResourceInfo(%s) = %+v, %v; old %+v, %v", b, info, ok, oinfo, ook)
			}
		}
		check(body, info, infoOK)
		for _, e := range entries {
			if e.Resource != nil {
				info, ok := ResourceInfo(e.Resource)
				check(e.Resource, info, ok)
			}
		}
	})
}
