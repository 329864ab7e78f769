package legacyapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
	"github.com/kiln-fhir/kiln/internal/httpserver"
	"github.com/kiln-fhir/kiln/profiles"
	"github.com/kiln-fhir/kiln/profiles/national"
	"github.com/kiln-fhir/kiln/profiles/validate"
)

const profileURL = "https://fhir.health.example/StructureDefinition"

var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// The national profiles, loaded once for every test.
var nationalValidation = sync.OnceValues(func() (validation.Config, error) {
	set, err := profiles.NewSet(profiles.SetOptions{ProfileURL: profileURL, National: national.Files})
	if err != nil {
		return validation.Config{}, err
	}
	v := validate.New(set, validate.Options{})
	return validation.Config{
		Mode:      validation.Profiles,
		Validator: v,
		Known:     func(u string) bool { _, ok := set.StructureDefinition(u); return ok },
		TypeProfiles: map[string][]string{
			"Patient": {profileURL + "/Patient"}, "Observation": {profileURL + "/Observation"}, "Encounter": {profileURL + "/Encounter"},
		},
	}, nil
})

// fakeSequence numbers from 1 in memory.
type fakeSequence struct{ n atomic.Int64 }

func (f *fakeSequence) NextValue(_ context.Context, name string) (int64, error) {
	if name != patientSequence {
		return 0, fmt.Errorf("unexpected sequence %q", name)
	}
	return f.n.Add(1), nil
}

// fakeEraser anonymizes the Patient in the store (a new version made by
// adapters.AnonymizePatient), enough for the handler's contract; the real
// erasure lives in fhirserver.
type fakeEraser struct {
	st    store.Store
	mu    sync.Mutex
	at    map[string]time.Time
	calls int
}

func (f *fakeEraser) ErasePatient(ctx context.Context, id string) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if at, ok := f.at[id]; ok {
		return at, nil
	}
	v, err := f.st.Read(ctx, "Patient", id)
	if err != nil {
		return time.Time{}, err
	}
	var m map[string]any
	if err := json.Unmarshal(v.Body, &m); err != nil {
		return time.Time{}, err
	}
	at := v.LastUpdated.Add(time.Second)
	m = adapters.AnonymizePatient(m, at)
	m["meta"].(map[string]any)["lastUpdated"] = at.Format(time.RFC3339Nano)
	m["meta"].(map[string]any)["versionId"] = fmt.Sprint(v.Version + 1)
	body, _ := json.Marshal(m)
	if err := f.st.Put(ctx, store.Write{Type: "Patient", ID: id, Version: v.Version + 1, LastUpdated: at, Method: store.MethodUpdate, Body: body}); err != nil {
		return time.Time{}, err
	}
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	f.at[id] = at
	return at, nil
}

type testEnv struct {
	t      *testing.T
	api    *API
	fhir   *fhirserver.Server
	st     *sqlite.Store
	srv    *httptest.Server
	eraser *fakeEraser
	// The workforce partition: its own store and FHIR service.
	wfFHIR  *fhirserver.Server
	wfStore *sqlite.Store
	now     *testClock
}

// testClock is the API's clock; tests move it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

type envOption func(*Config, *testEnv)

func withStoreSequence(c *Config, e *testEnv) { c.Sequence = e.st }
func withoutEraser(c *Config, _ *testEnv)     { c.Eraser = nil }
func withFHIREraser(c *Config, e *testEnv) {
	c.Eraser = FHIREraser{FHIR: e.fhir, Now: func() time.Time { return testNow }}
}

// newEnv serves the platform API over a FHIR service with the national
// profiles on an embedded store. The caller's principal comes from the
// test headers X-Scopes and X-Role (X-Subject, default user/u1); no
// X-Scopes means no principal.
func newEnv(t *testing.T, opts ...envOption) *testEnv {
	t.Helper()
	validation, err := nationalValidation()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "clinical.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	fs, err := fhirserver.New(fhirserver.Config{BaseURL: "https://kiln.test/fhir", Logger: logger, Validation: validation,
		Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionClinical}}, st)
	if err != nil {
		t.Fatal(err)
	}
	wst, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "workforce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wst.Close() })
	wfs, err := fhirserver.New(fhirserver.Config{BaseURL: "https://kiln.test/workforce/fhir", Logger: logger, Validation: validation,
		Authorizer: fhirserver.ScopeAuthorizer{Partition: auth.PartitionWorkforce}}, wst)
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, fhir: fs, st: st, eraser: &fakeEraser{st: st}, wfFHIR: wfs, wfStore: wst, now: &testClock{t: testNow}}
	cfg := Config{FHIR: fs, Sequence: &fakeSequence{}, Records: st, Eraser: e.eraser, ProfileURL: profileURL,
		Workforce: &Workforce{FHIR: wfs, Records: wst, Tag: testTag, Requirements: testRequirements()},
		Now:       e.now.Now, Logger: logger}
	for _, o := range opts {
		o(&cfg, e)
	}
	e.api, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter()
	for _, rt := range e.api.Routes() {
		r.Handle(rt.Path, rt.Handler).Methods(rt.Method)
	}
	if cfg.Auth != nil { // as cmd/kiln registers them
		cfg.Auth.Routes(func(method, path string, h http.Handler) { r.Handle(path, h).Methods(method) })
	}
	principal := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sc, ok := r.Header["X-Scopes"]; ok {
				g, _ := auth.ParseScopes(sc[0])
				sub := r.Header.Get("X-Subject")
				if sub == "" {
					sub = "user/u1"
				}
				r = r.WithContext(auth.WithPrincipal(r.Context(), &auth.Principal{Subject: sub, Role: r.Header.Get("X-Role"), Grant: g}))
			}
			next.ServeHTTP(w, r)
		})
	}
	e.srv = httptest.NewServer(httpserver.Chain(principal(r), httpserver.Options{Logger: logger, MaxBody: 1 << 20}))
	t.Cleanup(e.srv.Close)
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("not JSON (%d): %s", r.status, r.body)
	}
	return m
}

// do sends a request; headers come in pairs. A nil body sends none.
func (e *testEnv) do(method, path string, body []byte, headers ...string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Content-Type" && headers[i+1] == "" {
			req.Header.Del("Content-Type")
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

var (
	writer  = []string{"X-Scopes", "patients:write", "X-Role", "provider"}
	reader  = []string{"X-Scopes", "patients:read", "X-Role", "provider"}
	privacy = []string{"X-Scopes", "patients:write", "X-Role", "privacy_officer"}
)

const amina = `{"first_name":"Amina","last_name":"Haddad","phone":"0412 345 678","date_of_birth":"1987-04-12","email":"amina.haddad@example.org","address":"12 Harbour Street, 4006 Stavanger"}`

// conforms checks a body against one of the API's schemas.
func (e *testEnv) conforms(name string, body []byte) {
	e.t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		e.t.Fatalf("%s: %v", body, err)
	}
	if p := e.api.schemas.check(name, v); len(p) > 0 {
		e.t.Errorf("the answer does not match the %s schema: %v\n%s", name, p, body)
	}
}

// expectError asserts the platform's error shape with status and code,
// and a details entry for field when field is not "".
func (e *testEnv) expectError(r resp, status int, code, field string) {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	e.conforms(schemaError, r.body)
	var b httpserver.ErrorBody
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code != code || b.Error.Message == "" {
		e.t.Errorf("error body %s, want code %q", r.body, code)
	}
	if field != "" {
		found := false
		for _, d := range b.Error.Details {
			found = found || d.Field == field && d.Problem != ""
		}
		if !found {
			e.t.Errorf("no detail for %q: %s", field, r.body)
		}
	}
}

func (e *testEnv) patientCount() int {
	e.t.Helper()
	vs, err := e.fhir.SearchAll(auth.WithPrincipal(e.t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.PatientsRead}}), "Patient", nil, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(vs)
}

func TestCreatePatient(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/patients", []byte(amina), writer...)
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
	e.conforms(schemaPatientCreated, r.body)
	m := r.json(t)
	if m["patient_id"] != "PT-1" || m["status"] != "active" || r.header.Get("Location") != "/patients/PT-1" {
		t.Errorf("%s (Location %q)", r.body, r.header.Get("Location"))
	}
	if _, err := time.Parse(time.RFC3339, m["created_at"].(string)); err != nil || !strings.HasSuffix(m["created_at"].(string), "Z") {
		t.Errorf("created_at %v", m["created_at"])
	}
	// The FHIR Patient: national profile, platform identifier.
	v, err := e.fhir.Read(auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.PatientsRead}}), "Patient", "PT-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"profile":["` + profileURL + `/Patient"]`, `"system":"https://fhir.health.example/sid/patient-id","value":"PT-1"`, `"family":"Haddad"`, `"active":true`} {
		if !bytes.Contains(v.Body, []byte(want)) {
			t.Errorf("the Patient lacks %s: %s", want, v.Body)
		}
	}
	// The minimal body.
	r = e.do("POST", "/patients", []byte(`{"first_name":"Chidi","last_name":"Okafor","date_of_birth":"2026-11-22"}`), writer...)
	if r.status != http.StatusCreated || r.json(t)["patient_id"] != "PT-2" {
		t.Errorf("minimal: %d %s", r.status, r.body)
	}
}

func TestCreatePatientErrors(t *testing.T) {
	e := newEnv(t)
	big := `{"first_name":"` + strings.Repeat("a", maxPatientBytes) + `","last_name":"X","date_of_birth":"1990-01-01"}`
	tests := []struct {
		name    string
		body    string
		headers []string
		status  int
		code    string
		field   string
	}{
		{"bad JSON", `{"first_name":`, nil, 400, "invalid_json", ""},
		{"two values", amina + amina, nil, 400, "invalid_json", ""},
		{"not an object", `[]`, nil, 400, "invalid_body", ""},
		{"unknown field", `{"first_name":"A","last_name":"B","date_of_birth":"1990-01-01","gender":"female"}`, nil, 400, "invalid_body", "gender"},
		{"missing first_name", `{"last_name":"B","date_of_birth":"1990-01-01"}`, nil, 400, "invalid_body", "first_name"},
		{"missing date_of_birth", `{"first_name":"A","last_name":"B"}`, nil, 400, "invalid_body", "date_of_birth"},
		{"blank last_name", `{"first_name":"A","last_name":"  ","date_of_birth":"1990-01-01"}`, nil, 400, "invalid_body", "last_name"},
		{"wrong type", `{"first_name":1,"last_name":"B","date_of_birth":"1990-01-01"}`, nil, 400, "invalid_body", "first_name"},
		{"too long", `{"first_name":"` + strings.Repeat("a", 101) + `","last_name":"B","date_of_birth":"1990-01-01"}`, nil, 400, "invalid_body", "first_name"},
		{"future birth date", `{"first_name":"A","last_name":"B","date_of_birth":"2026-11-24"}`, nil, 400, "invalid_body", "date_of_birth"},
		{"no such date", `{"first_name":"A","last_name":"B","date_of_birth":"1990-02-30"}`, nil, 400, "invalid_body", "date_of_birth"},
		{"a dateTime", `{"first_name":"A","last_name":"B","date_of_birth":"1990-02-03T00:00:00Z"}`, nil, 400, "invalid_body", "date_of_birth"},
		{"before 1900", `{"first_name":"A","last_name":"B","date_of_birth":"1899-12-31"}`, nil, 400, "invalid_body", "date_of_birth"},
		{"bad email", `{"first_name":"A","last_name":"B","date_of_birth":"1990-01-01","email":"a@localhost"}`, nil, 400, "invalid_body", "email"},
		{"bad phone", `{"first_name":"A","last_name":"B","date_of_birth":"1990-01-01","phone":"call me"}`, nil, 400, "invalid_body", "phone"},
		{"short phone", `{"first_name":"A","last_name":"B","date_of_birth":"1990-01-01","phone":"12"}`, nil, 400, "invalid_body", "phone"},
		{"wrong content type", amina, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
		{"no content type", amina, []string{"Content-Type", ""}, 415, "unsupported_media_type", ""},
		{"too large", big, nil, 413, "too_large", ""},
		{"bad Idempotency-Key", amina, []string{"Idempotency-Key", ""}, 400, "invalid_request", "Idempotency-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			e.expectError(e.do("POST", "/patients", []byte(tt.body), append(append([]string{}, writer...), tt.headers...)...), tt.status, tt.code, tt.field)
		})
	}
	e.t = t
	// Every problem is reported, without echoing values.
	r := e.do("POST", "/patients", []byte(`{"first_name":"","email":"secret@nowhere","extra":1}`), writer...)
	e.expectError(r, 400, "invalid_body", "extra")
	for _, f := range []string{"first_name", "last_name", "date_of_birth", "email"} {
		if !bytes.Contains(r.body, []byte(`"field":"`+f+`"`)) {
			t.Errorf("no detail for %s: %s", f, r.body)
		}
	}
	if bytes.Contains(r.body, []byte("secret@nowhere")) {
		t.Errorf("the error echoes a value: %s", r.body)
	}
	// Authorization: the policy table decides, answered in the JSON shape.
	e.expectError(e.do("POST", "/patients", []byte(amina)), 401, "unauthorized", "")
	e.expectError(e.do("POST", "/patients", []byte(amina), reader...), 403, "forbidden", "")
	e.expectError(e.do("POST", "/patients", []byte(amina), "X-Scopes", "user/Patient.cruds"), 403, "forbidden", "")
	if n := e.patientCount(); n != 0 {
		t.Errorf("%d patients created by refused requests", n)
	}
}

// fhirCreate writes a resource through the FHIR service, as /fhir would.
func (e *testEnv) fhirCreate(typ, id, body string) {
	e.t.Helper()
	ctx := auth.WithPrincipal(e.t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.PatientsWrite}})
	if _, err := e.fhir.CreateWithID(ctx, typ, id, []byte(body)); err != nil {
		e.t.Fatalf("%s/%s: %v", typ, id, err)
	}
}

func condition(id, status, text, onset string) string {
	return fmt.Sprintf(`{"resourceType":"Condition","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"%s"}]},`+
		`"code":{"text":"%s"},"subject":{"reference":"Patient/%s"},"onsetDateTime":"%s"}`, status, text, id, onset)
}

func TestGetPatient(t *testing.T) {
	e := newEnv(t)
	if r := e.do("POST", "/patients", []byte(amina), writer...); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r := e.do("GET", "/patients/PT-1", nil, reader...)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	e.conforms(schemaPatientSummary, r.body)
	want := `{"patient_id":"PT-1","first_name":"Amina","last_name":"Haddad","date_of_birth":"1987-04-12","phone":"0412 345 678","medical_history":[],"compliance_status":"unknown"}`
	if string(r.body) != want {
		t.Errorf("summary\n got %s\nwant %s", r.body, want)
	}

	e.fhirCreate("Condition", "c1", condition("PT-1", "resolved", "Fracture of radius", "2021-06-05"))
	e.fhirCreate("Condition", "c2", condition("PT-1", "active", "Asthma", "1995-03-10T14:00:00+01:00"))
	e.fhirCreate("Condition", "other", condition("PT-2", "active", "Not hers", "2000-01-01"))
	ffw := strings.NewReplacer("{{profile_url}}", profileURL, "{{canonical}}", "https://fhir.health.example", "PT-2040", "PT-1").Replace(
		string(mustRead(t, "../profiles/national/examples/Observation-example-fitness-for-work.json")))
	e.fhirCreate("Observation", "ffw1", ffw)
	r = e.do("GET", "/patients/PT-1", nil, reader...)
	e.conforms(schemaPatientSummary, r.body)
	m := r.json(t)
	hist, _ := json.Marshal(m["medical_history"])
	if string(hist) != `[{"condition":"Asthma","diagnosed_date":"1995-03-10","status":"managed"},{"condition":"Fracture of radius","diagnosed_date":"2021-06-05","status":"resolved"}]` {
		t.Errorf("medical_history %s", hist)
	}
	if m["compliance_status"] != "compliant-with-restrictions" {
		t.Errorf("compliance_status %v", m["compliance_status"])
	}

	e.expectError(e.do("GET", "/patients/PT-404", nil, reader...), 404, "not_found", "")
	e.expectError(e.do("GET", "/patients/not%20an%20id", nil, reader...), 404, "not_found", "")
	e.expectError(e.do("GET", "/patients/PT-1", nil, writer...), 403, "forbidden", "")
	e.expectError(e.do("GET", "/patients/PT-1", nil), 401, "unauthorized", "")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestErasePatient(t *testing.T) {
	e := newEnv(t)
	if r := e.do("POST", "/patients", []byte(amina), writer...); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	// The role is required besides the scope; the policy table decides.
	e.expectError(e.do("DELETE", "/patients/PT-1", nil, writer...), 403, "forbidden", "")
	e.expectError(e.do("DELETE", "/patients/PT-1", nil, "X-Scopes", "patients:read", "X-Role", "admin"), 403, "forbidden", "")
	e.expectError(e.do("DELETE", "/patients/PT-1", nil), 401, "unauthorized", "")
	if e.eraser.calls != 0 {
		t.Fatal("the eraser ran for a refused request")
	}
	r := e.do("DELETE", "/patients/PT-1", nil, privacy...)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	e.conforms(schemaPatientErased, r.body)
	first := r.json(t)
	if first["patient_id"] != "PT-1" || first["status"] != "anonymized" {
		t.Errorf("%s", r.body)
	}
	// Idempotent, for an admin too.
	r = e.do("DELETE", "/patients/PT-1", nil, "X-Scopes", "patients:write", "X-Role", "admin")
	if r.status != 200 || r.json(t)["anonymized_at"] != first["anonymized_at"] {
		t.Errorf("second erasure: %d %s", r.status, r.body)
	}
	// The erased summary.
	r = e.do("GET", "/patients/PT-1", nil, reader...)
	e.conforms(schemaPatientErased, r.body)
	if r.status != 200 || !bytes.Equal(r.body, []byte(`{"patient_id":"PT-1","status":"anonymized","anonymized_at":"`+first["anonymized_at"].(string)+`"}`)) {
		t.Errorf("erased summary: %d %s", r.status, r.body)
	}
	e.expectError(e.do("DELETE", "/patients/PT-404", nil, privacy...), 404, "not_found", "")

	off := newEnv(t, withoutEraser)
	off.expectError(off.do("DELETE", "/patients/PT-1", nil, privacy...), 501, "not_implemented", "")
}

// 32 concurrent creates get 32 distinct ids, with the in-memory fake and
// with the store's own sequence.
func TestConcurrentCreates(t *testing.T) {
	for name, opts := range map[string][]envOption{"fake": nil, "store": {withStoreSequence}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, opts...)
			const n = 32
			ids := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					req, _ := http.NewRequest("POST", e.srv.URL+"/patients", strings.NewReader(amina))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Scopes", "patients:write")
					res, err := e.srv.Client().Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					defer res.Body.Close()
					var m map[string]any
					_ = json.NewDecoder(res.Body).Decode(&m)
					if res.StatusCode != 201 {
						t.Errorf("%d %v", res.StatusCode, m)
					}
					ids[i], _ = m["patient_id"].(string)
				})
			}
			wg.Wait()
			seen := map[string]bool{}
			for _, id := range ids {
				if id == "" || seen[id] {
					t.Errorf("duplicate or missing id %q in %v", id, ids)
				}
				seen[id] = true
			}
			for i := 1; i <= n; i++ {
				if !seen[fmt.Sprintf("PT-%d", i)] {
					t.Errorf("PT-%d was not handed out: %v", i, ids)
				}
			}
			if c := e.patientCount(); c != n {
				t.Errorf("%d patients stored", c)
			}
		})
	}
}

// A Patient created through /fhir with a PT-<n> id is skipped, not
// overwritten.
func TestCreateSkipsTakenIDs(t *testing.T) {
	e := newEnv(t)
	e.fhirCreate("Patient", "PT-1", string(adapters.Pack{ProfileURL: profileURL}.PatientResource(adapters.NewPatient{FirstName: "X", LastName: "Y", DateOfBirth: "1990-01-01"}, "PT-1")))
	r := e.do("POST", "/patients", []byte(amina), writer...)
	if r.status != 201 || r.json(t)["patient_id"] != "PT-2" {
		t.Errorf("%d %s", r.status, r.body)
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	key := []string{"Idempotency-Key", "3f1c9a52-retry-1"}
	first := e.do("POST", "/patients", []byte(amina), append(append([]string{}, writer...), key...)...)
	if first.status != 201 {
		t.Fatalf("%d %s", first.status, first.body)
	}
	// The same body, fields in another order and spaced: the first answer.
	reordered := `{ "address":"12 Harbour Street, 4006 Stavanger", "email":"amina.haddad@example.org","date_of_birth":"1987-04-12","phone":"0412 345 678","last_name":"Haddad","first_name":"Amina"}`
	for _, body := range []string{amina, reordered} {
		r := e.do("POST", "/patients", []byte(body), append(append([]string{}, writer...), key...)...)
		if r.status != first.status || !bytes.Equal(r.body, first.body) || r.header.Get("Idempotent-Replayed") != "true" || r.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("retry: %d %s %v, want %s", r.status, r.body, r.header, first.body)
		}
	}
	if n := e.patientCount(); n != 1 {
		t.Errorf("%d patients", n)
	}
	// Another body with the key: 422.
	other := strings.Replace(amina, "Amina", "Sara", 1)
	e.expectError(e.do("POST", "/patients", []byte(other), append(append([]string{}, writer...), key...)...), 422, "idempotency_key_reused", "")
	// Keys are per caller.
	r := e.do("POST", "/patients", []byte(amina), append([]string{"X-Scopes", "patients:write", "X-Subject", "user/u2"}, key...)...)
	if r.status != 201 || bytes.Equal(r.body, first.body) {
		t.Errorf("another caller's key: %d %s", r.status, r.body)
	}
	// A failed request releases its key.
	bad := []string{"Idempotency-Key", "k-bad"}
	e.expectError(e.do("POST", "/patients", []byte(`{"first_name":"A"}`), append(append([]string{}, writer...), bad...)...), 400, "invalid_body", "last_name")
	if r := e.do("POST", "/patients", []byte(amina), append(append([]string{}, writer...), bad...)...); r.status != 201 {
		t.Errorf("after a refused body: %d %s", r.status, r.body)
	}
	if n := e.patientCount(); n != 3 {
		t.Errorf("%d patients, want 3", n)
	}
}

// Concurrent first uses of one key create one patient; every answer is
// the first one (or 409 while it was in progress).
func TestIdempotencyKeyConcurrent(t *testing.T) {
	e := newEnv(t)
	const n = 8
	res := make([]resp, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", e.srv.URL+"/patients", strings.NewReader(amina))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Scopes", "patients:write")
			req.Header.Set("Idempotency-Key", "same")
			r, err := e.srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Body.Close()
			b, _ := io.ReadAll(r.Body)
			res[i] = resp{r.StatusCode, r.Header, b}
		})
	}
	wg.Wait()
	var body []byte
	for _, r := range res {
		switch r.status {
		case 201:
			if body != nil && !bytes.Equal(body, r.body) {
				t.Errorf("two answers: %s and %s", body, r.body)
			}
			body = r.body
		case 409:
		default:
			t.Errorf("%d %s", r.status, r.body)
		}
	}
	if c := e.patientCount(); c != 1 {
		t.Errorf("%d patients", c)
	}
}

// The real erasure (the FHIR service's mechanism with the adapters'
// policy): nothing finds the old name, phone or e-mail, in search or
// history; the Condition is kept, its display and narrative scrubbed.
func TestErasePatientThroughFHIR(t *testing.T) {
	e := newEnv(t, withFHIREraser)
	if r := e.do("POST", "/patients", []byte(amina), writer...); r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	e.fhirCreate("Condition", "c1", `{"resourceType":"Condition","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Asthma of Amina Haddad</div>"},`+
		`"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},`+
		`"code":{"text":"Asthma"},"subject":{"reference":"Patient/PT-1","display":"Amina Haddad"},"onsetDateTime":"1995-03-10",`+
		`"note":[{"text":"Amina reports night cough; call 0412 345 678"}]}`)
	r := e.do("DELETE", "/patients/PT-1", nil, privacy...)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	e.conforms(schemaPatientErased, r.body)
	at := r.json(t)["anonymized_at"]
	if r := e.do("DELETE", "/patients/PT-1", nil, privacy...); r.status != 200 || r.json(t)["anonymized_at"] != at {
		t.Errorf("second erasure: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/patients/PT-1", nil, reader...); r.status != 200 || string(r.body) != `{"patient_id":"PT-1","status":"anonymized","anonymized_at":"`+at.(string)+`"}` {
		t.Errorf("erased summary: %d %s", r.status, r.body)
	}
	e.expectError(e.do("DELETE", "/patients/PT-404", nil, privacy...), 404, "not_found", "")

	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.PatientsRead}})
	for _, q := range []url.Values{{"name": {"Haddad"}}, {"given": {"amina"}}, {"phone": {"0412 345 678"}}, {"email": {"amina.haddad@example.org"}},
		{"address": {"Harbour"}}, {"birthdate": {"1987-04-12"}}} {
		if vs, err := e.fhir.SearchAll(ctx, "Patient", q, 10); err != nil || len(vs) != 0 {
			t.Errorf("%v finds %d (%v)", q, len(vs), err)
		}
	}
	page, err := e.st.History(ctx, store.HistoryQuery{Type: "Patient", ID: "PT-1", Count: 100})
	if err != nil || len(page.Versions) < 2 {
		t.Fatalf("history: %v", err)
	}
	for _, v := range page.Versions {
		for _, s := range []string{"Haddad", "Amina", "0412 345 678", "amina.haddad", "Harbour", "1987-04-12"} {
			if bytes.Contains(v.Body, []byte(s)) {
				t.Errorf("version %d holds %q: %s", v.Version, s, v.Body)
			}
		}
	}
	conds, err := e.fhir.SearchAll(ctx, "Condition", url.Values{"subject": {"Patient/PT-1"}}, 10)
	if err != nil || len(conds) != 1 {
		t.Fatalf("the Condition: %v %v", conds, err)
	}
	body := string(conds[0].Body)
	if strings.Contains(body, "Haddad") || strings.Contains(body, "Amina") || strings.Contains(body, "0412") || !strings.Contains(body, `"text":"Asthma"`) {
		t.Errorf("the Condition after erasure: %s", body)
	}
}
