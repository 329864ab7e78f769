package fhirjson

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

func newValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := NewValidator(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// nestExt builds a Patient whose extensions nest k levels; the innermost
// holds tail. JSON depth is 1 (root) + 2 per level (array and object) + the
// depth of tail.
func nestExt(k int, tail string) string {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Patient"`)
	for i := 0; i < k; i++ {
		b.WriteString(`,"extension":[{"url":"http://example.org/x"`)
	}
	b.WriteString(tail)
	for i := 0; i < k; i++ {
		b.WriteString(`}]`)
	}
	b.WriteString(`}`)
	return b.String()
}

// TestCheckRejects holds inputs the FHIR R4 JSON rules reject, with where
// and why; the expectations come from the spec, not from the code.
func TestCheckRejects(t *testing.T) {
	v := newValidator(t)
	tests := []struct {
		name   string
		body   string
		code   string // issue-type code of the matching issue ("" = any)
		expr   string // expression of the matching issue ("" = any)
		msg    string // substring of its diagnostics
		status int    // 0 = 400
	}{
		{"unknown element", `{"resourceType":"Patient","foo":1}`, "structure", "Patient.foo", `unknown element "foo"`, 0},
		{"unknown nested element", `{"resourceType":"Patient","name":[{"family":"X","foo":true}]}`, "structure", "Patient.name[0].foo", `unknown element "foo"`, 0},
		{"duplicate key top-level", `{"resourceType":"Patient","gender":"male","gender":"female"}`, "structure", "Patient.gender", `duplicate key "gender"`, 0},
		{"duplicate key nested", `{"resourceType":"Patient","name":[{"family":"A","family":"B"}]}`, "structure", "Patient.name[0].family", `duplicate key "family"`, 0},
		{"duplicate key via escape", `{"resourceType":"Patient","gender":"male","gend\u0065r":"male"}`, "structure", "Patient.gender", `duplicate key "gender"`, 0},
		{"duplicate resourceType", `{"resourceType":"Patient","resourceType":"Patient"}`, "structure", "Patient.resourceType", `duplicate key "resourceType"`, 0},
		{"null member", `{"resourceType":"Patient","gender":null}`, "structure", "Patient.gender", "null is not allowed", 0},
		{"null in array without _ sibling", `{"resourceType":"Patient","name":[{"given":["A",null]}]}`, "structure", "Patient.name[0].given[1]", "null is not allowed", 0},
		{"null in array of objects", `{"resourceType":"Patient","name":[null,{"family":"A"}]}`, "structure", "Patient.name[0]", "null is not allowed", 0},
		{"array of only nulls", `{"resourceType":"Patient","name":[{"given":["A"],"_given":[null]}]}`, "structure", "Patient.name[0]._given", "only nulls", 0},
		{"invalid date", `{"resourceType":"Patient","birthDate":"2020-13-01"}`, "value", "Patient.birthDate", `invalid date "2020-13-01"`, 0},
		{"invalid day", `{"resourceType":"Patient","birthDate":"2021-02-29"}`, "value", "Patient.birthDate", `invalid date "2021-02-29"`, 0},
		// gender has a required binding to AdministrativeGender.
		{"code outside required binding", `{"resourceType":"Patient","gender":"mal"}`, "code-invalid", "Patient.gender", `"mal"`, 0},
		{"string for boolean", `{"resourceType":"Patient","active":"yes"}`, "value", "Patient.active", `invalid boolean "yes"`, 0},
		{"number for string", `{"resourceType":"Patient","name":[{"family":1}]}`, "value", "Patient.name[0].family", "invalid string 1", 0},
		{"decimal for integer", `{"resourceType":"Patient","multipleBirthInteger":1.5}`, "value", "Patient.multipleBirthInteger", "invalid integer 1.5", 0},
		{"object for array", `{"resourceType":"Patient","name":{"family":"A"}}`, "structure", "Patient.name", "expected an array", 0},
		{"string for object", `{"resourceType":"Patient","name":["A"]}`, "structure", "Patient.name[0]", "expected a JSON object", 0},
		{"invalid id", `{"resourceType":"Patient","id":"a b"}`, "value", "Patient.id", `invalid id "a b"`, 0},
		{"id too long", `{"resourceType":"Patient","id":"` + strings.Repeat("a", 65) + `"}`, "value", "Patient.id", "invalid id", 0},
		{"unknown resourceType", `{"resourceType":"Nope"}`, "", "", `unknown resourceType "Nope"`, 0},
		{"missing resourceType", `{"id":"x"}`, "required", "", `missing required element "resourceType"`, 0},
		{"empty object", `{}`, "required", "", `"resourceType"`, 0},
		{"resourceType not a string", `{"resourceType":7}`, "structure", "resourceType", "must be a string", 0},
		{"top-level array", `[{"resourceType":"Patient"}]`, "structure", "", "must be a JSON object", 0},
		{"top-level string", `"Patient"`, "structure", "", "must be a JSON object", 0},
		{"empty body", ``, "structure", "", "empty", 0},
		{"whitespace body", " \n\t ", "structure", "", "empty", 0},
		{"invalid UTF-8", "{\"resourceType\":\"Patient\",\"name\":[{\"family\":\"Q\xffill\"}]}", "structure", "Patient.name[0].family", "invalid UTF-8", 0},
		{"invalid UTF-8 in key", "{\"resourceType\":\"Patient\",\"n\xc3\":1}", "structure", "Patient", "invalid UTF-8", 0},
		{"UTF-8 encoded surrogate", "{\"resourceType\":\"Patient\",\"name\":[{\"family\":\"\xed\xa0\x80\"}]}", "structure", "", "invalid UTF-8", 0},
		{"unpaired surrogate escape", `{"resourceType":"Patient","name":[{"family":"\ud800x"}]}`, "value", "Patient.name[0].family", "unpaired surrogate", 0},
		{"byte order mark", "\xef\xbb\xbf{\"resourceType\":\"Patient\"}", "structure", "", "byte order mark", 0},
		{"trailing comma", `{"resourceType":"Patient","active":true,}`, "structure", "Patient", "invalid JSON", 0},
		{"trailing data", `{"resourceType":"Patient"} {}`, "structure", "", "after the end", 0},
		{"single quotes", `{'resourceType':'Patient'}`, "structure", "", "invalid JSON", 0},
		{"unterminated", `{"resourceType":"Patient","active":tru`, "structure", "Patient.active", "invalid JSON", 0},
		{"raw control character", "{\"resourceType\":\"Patient\",\"name\":[{\"family\":\"a\tb\"}]}", "structure", "Patient.name[0].family", "control character", 0},
		{"escaped control character", `{"resourceType":"Patient","name":[{"family":"a\u0001b"}]}`, "value", "Patient.name[0].family", "invalid characters", 0},
		{"leading zero", `{"resourceType":"Patient","multipleBirthInteger":01}`, "structure", "Patient.multipleBirthInteger", "leading zero", 0},
		{"number too large", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1e400}}`, "value", "Observation.valueQuantity.value", "too large", 0},
		{"empty string", `{"resourceType":"Patient","gender":""}`, "value", "Patient.gender", "empty string", 0},
		{"empty string in array", `{"resourceType":"Patient","name":[{"given":[""]}]}`, "value", "Patient.name[0].given[0]", "empty string", 0},
		{"empty object", `{"resourceType":"Patient","name":[{}]}`, "structure", "Patient.name[0]", "empty object", 0},
		{"empty array", `{"resourceType":"Patient","name":[]}`, "structure", "Patient.name", "empty array", 0},
		{"upper-case element name", `{"resourceType":"Patient","Gender":"male"}`, "structure", "Patient.Gender", `unknown element "Gender"`, 0},
		{"_x holding a value", `{"resourceType":"Patient","_birthDate":"2020-01-01"}`, "structure", "Patient._birthDate", "must hold an object", 0},
		{"x holding an object beside _x", `{"resourceType":"Patient","birthDate":{"id":"a"},"_birthDate":{"id":"b"}}`, "structure", "Patient.birthDate", "must hold a primitive", 0},
		{"misaligned _x array", `{"resourceType":"Patient","name":[{"given":["A"],"_given":[{"id":"a"},{"id":"b"}]}]}`, "structure", "Patient.name[0].given", "same number of items", 0},
		{"two choice types", `{"resourceType":"Patient","deceasedBoolean":true,"deceasedDateTime":"2020"}`, "structure", "Patient.deceased", "only one deceased[x] element is allowed", 0},
		{"unknown choice type", `{"resourceType":"Patient","deceasedString":"yes"}`, "structure", "Patient.deceasedString", `unknown element "deceasedString"`, 0},
		{"missing required element", `{"resourceType":"Observation","code":{"text":"x"}}`, "required", "Observation.status", `missing required element "status"`, 0},
		{"missing required choice", `{"resourceType":"MedicationRequest","status":"active","intent":"order","subject":{"reference":"Patient/1"}}`, "required", "MedicationRequest.medication", `"medication[x]"`, 0},
		{"missing required in extension", `{"resourceType":"Patient","extension":[{"valueString":"x"}]}`, "required", "Patient.extension[0].url", `missing required element "url"`, 0},
		// managingOrganization may only reference an Organization.
		{"reference of wrong type", `{"resourceType":"Patient","managingOrganization":{"reference":"Patient/1"}}`, "value", "Patient.managingOrganization", "Patient", 0},
		{"reference of wrong type in array", `{"resourceType":"Patient","generalPractitioner":[{"reference":"Group/1"}]}`, "value", "Patient.generalPractitioner[0]", "allowed: Organization, Practitioner, PractitionerRole", 0},
		{"invalid code format in choice", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1,"code":" mg"}}`, "value", "Observation.valueQuantity.code", `invalid code " mg"`, 0},
		{"invalid uuid in primitive extension", `{"resourceType":"Patient","_birthDate":{"extension":[{"url":"http://example.org/x","valueUuid":"nope"}]}}`, "value", "Patient._birthDate.extension[0].valueUuid", `invalid uuid "nope"`, 0},
		{"contained: required element missing", `{"resourceType":"Patient","contained":[{"resourceType":"Observation","id":"o","code":{"text":"x"}}]}`, "required", "Patient.contained[0].status", `missing required element "status"`, 0},
		{"contained: unknown element", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","foo":1}]}`, "structure", "Patient.contained[0].foo", `unknown element "foo"`, 0},
		{"contained: invalid id", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"a b","name":"x"}]}`, "value", "Patient.contained[0].id", `invalid id "a b"`, 0},
		{"contained: wrong reference type", `{"resourceType":"Patient","contained":[{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Organization/1"}}]}`, "value", "Patient.contained[0].subject", "Organization", 0},
		{"contained: unknown resource type", `{"resourceType":"Patient","contained":[{"resourceType":"Nope","id":"n"}]}`, "value", "Patient.contained[0]", `unknown resourceType "Nope"`, 0},
		{"contained: missing resourceType", `{"resourceType":"Patient","contained":[{"id":"n"}]}`, "required", "Patient.contained[0].resourceType", `"resourceType"`, 0},
		{"contained: nested contained (dom-2)", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","contained":[{"resourceType":"Organization","id":"p"}]}]}`, "invariant", "Patient.contained[0].contained", "dom-2", 0},
		{"contained: meta.versionId (dom-4)", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","meta":{"versionId":"1"}}]}`, "invariant", "Patient.contained[0].meta.versionId", "dom-4", 0},
		{"contained: security label (dom-5)", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","meta":{"security":[{"code":"R"}]}}]}`, "invariant", "Patient.contained[0].meta.security", "dom-5", 0},
		{"contained in a bundle entry", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","contained":[{"resourceType":"Observation","id":"o","code":{"text":"x"}}]}}]}`, "required", "Bundle.entry[0].resource.contained[0].status", `missing required element "status"`, 0},
		{"bundle: entry unknown element", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","foo":1}}]}`, "structure", "Bundle.entry[0].resource.foo", `unknown element "foo"`, 0},
		{"bundle: entry required element", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient"}},{"resource":{"resourceType":"Observation","code":{"text":"x"}}}]}`, "required", "Bundle.entry[1].resource.status", `missing required element "status"`, 0},
		{"bundle: unknown entry resourceType", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Nope"}}]}`, "value", "Bundle.entry[0].resource", `unknown resourceType "Nope"`, 0},
		{"bundle: missing type", `{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Patient"}}]}`, "required", "Bundle.type", `missing required element "type"`, 0},
		{"bundle: entry choice path", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"code":"a  b"}}}]}`, "value", "Bundle.entry[0].resource.valueQuantity.code", "invalid code", 0},
		{"odd key is quoted", `{"resourceType":"Patient","a b":1}`, "structure", "Patient.`a b`", `unknown element "a b"`, 0},
		{"depth 101", nestExt(50, `,"valueString":"x"`), "structure", "", "deeper than the limit of 100", 0},
		{"too large", `{"resourceType":"Patient","name":[{"family":"` + strings.Repeat("x", 5<<20) + `"}]}`, "too-costly", "", "5 MiB", http.StatusRequestEntityTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Check([]byte(tc.body))
			oe, ok := outcome.As(err)
			if !ok {
				t.Fatalf("Check = %v, want an *outcome.Error", err)
			}
			want := tc.status
			if want == 0 {
				want = http.StatusBadRequest
			}
			if oe.Status != want {
				t.Errorf("status = %d, want %d (%v)", oe.Status, want, oe)
			}
			if !hasIssue(oe, tc.code, tc.expr, tc.msg) {
				t.Errorf("no issue with code %q, expression %q, message containing %q; got:\n%s", tc.code, tc.expr, tc.msg, dump(oe))
			}
			for _, is := range oe.Issues {
				if is.Severity != "error" || is.Diagnostics == "" {
					t.Errorf("bad issue %+v", is)
				}
			}
		})
	}
}

func hasIssue(oe *outcome.Error, code, expr, msg string) bool {
	for _, is := range oe.Issues {
		if code != "" && is.Code != code {
			continue
		}
		if expr != "" && (len(is.Expression) != 1 || is.Expression[0] != expr) {
			continue
		}
		if strings.Contains(is.Diagnostics, msg) {
			return true
		}
	}
	return false
}

func dump(oe *outcome.Error) string {
	var b strings.Builder
	for _, is := range oe.Issues {
		fmt.Fprintf(&b, "  [%s] %v: %s\n", is.Code, is.Expression, is.Diagnostics)
	}
	return b.String()
}

func TestCheckAccepts(t *testing.T) {
	v := newValidator(t)
	patient, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		body   string
		rt, id string
	}{
		{"patient fixture", string(patient), "Patient", "kiln-demo-1"},
		{"minimal", `{"resourceType":"Patient"}`, "Patient", ""},
		{"id with escape", `{"resourceType":"Patient","id":"a\u002db"}`, "Patient", "a-b"},
		{"observation with valueQuantity", `{
			"resourceType": "Observation", "id": "bp1", "status": "final",
			"code": {"coding": [{"system": "http://loinc.org", "code": "29463-7", "display": "Body weight"}]},
			"subject": {"reference": "Patient/kiln-demo-1"},
			"effectiveDateTime": "2024-05-01T10:30:00Z",
			"valueQuantity": {"value": 71.50, "unit": "kg", "system": "http://unitsofmeasure.org", "code": "kg"}
		}`, "Observation", "bp1"},
		{"decimal with exponent", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1e3}}`, "Observation", ""},
		{"bundle with entries", `{
			"resourceType": "Bundle", "type": "transaction",
			"entry": [
				{"fullUrl": "urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0",
				 "resource": {"resourceType": "Patient", "name": [{"family": "Quill"}]},
				 "request": {"method": "POST", "url": "Patient"}},
				{"resource": {"resourceType": "Observation", "status": "final", "code": {"text": "weight"},
				              "subject": {"reference": "urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0"}},
				 "request": {"method": "POST", "url": "Observation"}}
			]
		}`, "Bundle", ""},
		{"contained resources", `{
			"resourceType": "Patient", "id": "p1",
			"contained": [
				{"resourceType": "Organization", "id": "org1", "name": "Riverside Clinic"},
				{"resourceType": "Practitioner", "id": "pr1", "name": [{"family": "Moss"}]}
			],
			"managingOrganization": {"reference": "#org1"},
			"generalPractitioner": [{"reference": "#pr1"}]
		}`, "Patient", "p1"},
		{"null placeholders aligned with _x", `{"resourceType":"Patient","name":[{"given":["A","B",null],"_given":[null,{"id":"b"},{"id":"c"}]}]}`, "Patient", ""},
		{"primitive with only an extension", `{"resourceType":"Patient","_birthDate":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}}`, "Patient", ""},
		{"unicode", `{"resourceType":"Patient","name":[{"family":"Ωmega \u00e9\ud83d\ude00 日本"}]}`, "Patient", ""},
		{"depth 100", nestExt(49, `,"valueCodeableConcept":{"text":"x"}`), "Patient", ""},
		{"many members", manyExtensions(200), "Patient", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := v.Check([]byte(tc.body))
			if err != nil {
				oe, _ := outcome.As(err)
				t.Fatalf("Check: %v\n%s", err, dump(oe))
			}
			if info.ResourceType != tc.rt || info.ID != tc.id {
				t.Errorf("Info = %+v, want {%s %s}", info, tc.rt, tc.id)
			}
		})
	}
}

func manyExtensions(n int) string {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Patient","extension":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"url":"http://example.org/e%d","valueInteger":%d}`, i, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// Issues are collected, not just the first, and come in a stable order.
func TestCheckReportsAllIssues(t *testing.T) {
	v := newValidator(t)
	body := `{"resourceType":"Patient","name":[{"given":["a",null]},{"given":[null]}],"gender":null,"x":"","x":""}`
	_, err := v.Check([]byte(body))
	oe, ok := outcome.As(err)
	if !ok {
		t.Fatalf("Check = %v", err)
	}
	var got []string
	for _, is := range oe.Issues {
		got = append(got, is.Expression[0])
	}
	// The two identical empty-string issues for "x" are reported once.
	want := []string{"Patient.gender", "Patient.name[0].given[1]", "Patient.name[1].given", "Patient.x", "Patient.x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("expressions = %v, want %v\n%s", got, want, dump(oe))
	}
	// Several google/fhir problems are all reported too.
	_, err = v.Check([]byte(`{"resourceType":"Patient","foo":1,"bar":2,"birthDate":"x"}`))
	oe, _ = outcome.As(err)
	if oe == nil || len(oe.Issues) != 3 {
		t.Fatalf("want 3 issues, got %v", err)
	}
	if e := oe.Issues[0].Expression[0]; e != "Patient.bar" {
		t.Errorf("first issue at %s, want Patient.bar (sorted)", e)
	}
}

// Duplicate detection switches to a map for large objects; it must still
// find duplicates, and many distinct keys must not be slow.
func TestGuardLargeObjects(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Patient"`)
	for i := 0; i < 50000; i++ {
		fmt.Fprintf(&b, `,"k%d":1,"_k%d":{"id":"x"}`, i, i)
	}
	b.WriteString(`,"k7":2}`)
	s := scanDoc([]byte(b.String()), 100)
	if s.fatal {
		t.Fatalf("fatal: %+v", s.issues)
	}
	found := false
	for _, is := range s.issues {
		if is.path == ".k7" && strings.Contains(is.msg, "duplicate") {
			found = true
		}
	}
	if !found {
		t.Errorf("duplicate k7 not found: %d issues, first %+v", len(s.issues), s.issues[:min(3, len(s.issues))])
	}
}

func TestCheckSizeLimits(t *testing.T) {
	v, err := NewValidator(Limits{MaxResourceBytes: 100, MaxBundleBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 120)
	_, err = v.Check([]byte(`{"resourceType":"Patient","name":[{"family":"` + pad + `"}]}`))
	if oe, ok := outcome.As(err); !ok || oe.Status != http.StatusRequestEntityTooLarge || !strings.Contains(oe.Issues[0].Diagnostics, "100 bytes") {
		t.Errorf("resource over limit: %v", err)
	}
	bundle := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","name":[{"family":"` + pad + `"}]}}]}`
	if _, err := v.Check([]byte(bundle)); err != nil {
		t.Errorf("bundle under the bundle limit: %v", err)
	}
	_, err = v.Check([]byte(strings.Replace(bundle, pad, pad+pad, 1)))
	if oe, ok := outcome.As(err); !ok || oe.Status != http.StatusRequestEntityTooLarge || !strings.Contains(oe.Issues[0].Diagnostics, "300 bytes") {
		t.Errorf("bundle over limit: %v", err)
	}
}

func TestNewValidatorLimits(t *testing.T) {
	if _, err := NewValidator(Limits{MaxDepth: -1}); err == nil {
		t.Error("negative depth accepted")
	}
	if _, err := NewValidator(Limits{MaxDepth: 5000}); err == nil {
		t.Error("depth 5000 accepted")
	}
	v, err := NewValidator(Limits{MaxDepth: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check([]byte(`{"resourceType":"Patient","name":[{"given":["a"]}]}`)); err == nil || !strings.Contains(err.Error(), "limit of 3") {
		t.Errorf("depth 4 with MaxDepth 3: %v", err)
	}
	if v.lim.MaxResourceBytes != 5<<20 || v.lim.MaxBundleBytes != 20<<20 {
		t.Errorf("defaults not applied: %+v", v.lim)
	}
}

// One Validator serves concurrent requests; run with -race.
func TestCheckConcurrent(t *testing.T) {
	v := newValidator(t)
	patient, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte(`{"resourceType":"Patient","contained":[{"resourceType":"Observation","code":{"text":"x"}}],"foo":1}`)
	_, wantErr := v.Check(bad)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if info, err := v.Check(patient); err != nil || info.ID != "kiln-demo-1" {
					t.Errorf("patient: %+v %v", info, err)
					return
				}
				if _, err := v.Check(bad); err == nil || err.Error() != wantErr.Error() {
					t.Errorf("bad: %v, want %v", err, wantErr)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A contained resource's problems are reported once, at the same place,
// although both the container's parse and the contained resource's own run
// see them.
func TestContainedIssuesNotDoubled(t *testing.T) {
	v := newValidator(t)
	for _, body := range []string{
		`{"resourceType":"Patient","contained":[{"id":"n"}]}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","foo":1}]}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Nope"}]}`,
	} {
		_, err := v.Check([]byte(body))
		oe, ok := outcome.As(err)
		if !ok || len(oe.Issues) != 1 {
			t.Errorf("%s: want exactly one issue, got %v", body, err)
		}
	}
}

// google/fhir walks JSON objects in map order; the issues must not depend on it.
func TestCheckDeterministic(t *testing.T) {
	v := newValidator(t)
	for _, body := range []string{
		`{"resourceType":"Patient","name":[{"given":["A","B"],"_given":[{"id":"a"}]}],"deceasedBoolean":true,"deceasedDateTime":"2020","foo":1,"birthDate":"x","gender":"mal"}`,
		`{"resourceType":"Observation","code":{"text":"x"},"valueString":"a","valueBoolean":true,"subject":{"reference":"Organization/1"},"component":[{"code":{"text":"c"},"valueInteger":1.5}]}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Observation","id":"o","foo":1},{"resourceType":"Organization","id":"a b"}],"bar":2}`,
	} {
		_, first := v.Check([]byte(body))
		if first == nil {
			t.Fatalf("%s accepted", body)
		}
		for i := 0; i < 30; i++ {
			if _, err := v.Check([]byte(body)); err.Error() != first.Error() {
				t.Fatalf("run %d differs:\n%v\n%v", i, err, first)
			}
		}
	}
}

// The structural check holds no tree: what Check allocates does not grow
// with the body (a count of allocations, not a timing).
func TestCheckAllocationsDoNotGrowWithTheBody(t *testing.T) {
	v := newValidator(t)
	small, large := namesPatient(100), namesPatient(20_000)
	for _, body := range [][]byte{small, large} {
		if _, err := v.Check(body); err != nil {
			t.Fatal(err)
		}
	}
	a := testing.AllocsPerRun(5, func() { v.Check(small) })
	b := testing.AllocsPerRun(5, func() { v.Check(large) })
	if b > a+2 {
		t.Errorf("Check allocates %.0f times for 100 names, %.0f for 20,000", a, b)
	}
}
