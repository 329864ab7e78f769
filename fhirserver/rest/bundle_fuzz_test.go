package rest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// FuzzBundle posts arbitrary batch and transaction Bundles (entry methods,
// URLs, conditional headers, references) and arbitrary search query strings
// to one server: nothing panics, and no input is a 5xx.
func FuzzBundle(f *testing.F) {
	f.Add(`{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}},`+
		`{"resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:1"}},"request":{"method":"PUT","url":"Observation?code=x"}}]}`, "name=a,b&_sort=-birthdate&_count=2")
	f.Add(`{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"Patient?_has:Observation:subject:code=x"}},{"request":{"method":"DELETE","url":"Patient?identifier=a|b"}},`+
		`{"resource":{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"delete"},{"name":"path","valueString":"Patient.name"}]}]},"request":{"method":"PATCH","url":"Patient/x"}}]}`, "_include=*&_revinclude=Observation:subject:iterate")
	f.Add(`{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Patient","link":[{"other":{"reference":"Patient?identifier=x"},"type":"seealso"}]},"request":{"method":"POST","url":"Patient","ifNoneExist":"identifier=q|1"}}]}`, "birthdate=ap2020&_summary=count")
	st, err := sqlite.Open(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	s, err := fhirserver.New(fhirserver.Config{BaseURL: "https://fuzz.example/fhir", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		f.Fatal(err)
	}
	r := mux.NewRouter().SkipClean(true)
	Register(r, "/fhir", s)
	f.Fuzz(func(t *testing.T, bundle, query string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/fhir", bytes.NewReader([]byte(bundle)))
		req.Header.Set("Content-Type", "application/fhir+json")
		r.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("bundle: %d %s", rec.Code, rec.Body.Bytes())
		}
		for _, path := range []string{"/fhir/Patient?", "/fhir?_type=Patient,Observation&", "/fhir/Patient/x/Observation?"} {
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, httptest.NewRequest("GET", "https://fuzz.example"+path+escapeQuery(query), nil))
			if rec.Code >= 500 {
				t.Fatalf("search %s%s: %d %s", path, query, rec.Code, rec.Body.Bytes())
			}
		}
	})
}

// escapeQuery keeps a fuzzed query string parseable as a request target:
// spaces and control characters would make the request line invalid.
func escapeQuery(q string) string {
	var b bytes.Buffer
	for _, c := range []byte(q) {
		if c <= ' ' || c >= 0x7f || c == '#' {
			b.WriteString("%")
			b.WriteString("0123456789ABCDEF"[c>>4 : c>>4+1])
			b.WriteString("0123456789ABCDEF"[c&15 : c&15+1])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
