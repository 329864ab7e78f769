package fhirjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson/internal/xhtml"
)

func BenchmarkCheckPatient(b *testing.B) {
	body := benchPatient(b)
	benchCheck(b, body)
}

// benchCheck measures Check on one valid body.
func benchCheck(b *testing.B, body []byte) {
	v := newValidator(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Check(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardPatient measures the guard pass alone.
func BenchmarkGuardPatient(b *testing.B) {
	body := benchPatient(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if s := scanDoc(body, 100); len(s.issues) > 0 {
			b.Fatal(s.issues)
		}
	}
}

func BenchmarkSetMeta(b *testing.B) {
	body := benchPatient(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SetMeta(body, "kiln-demo-1", "2", goldenTime); err != nil {
			b.Fatal(err)
		}
	}
}

// benchNarrative is a generated-style Patient narrative of about 1 KB.
const benchNarrative = `<div xmlns="http://www.w3.org/1999/xhtml"><div class="hapiHeaderText">Ada <b>QUILL </b></div>` +
	`<table class="hapiPropertyTable"><tbody>` +
	`<tr><td>Identifier</td><td>MRN-100234 (usual)</td></tr>` +
	`<tr><td>Address</td><td><span>12 Harbour Lane </span><br/><span>Riverside </span><span>CA </span><span>94016 </span><span>US </span></td></tr>` +
	`<tr><td>Date of birth</td><td><span>12 March 1984</span></td></tr>` +
	`<tr><td>Telecom</td><td><ul><li>phone: +1 555 0100 (home)</li><li>email: <a href="mailto:ada.quill@example.org">ada.quill@example.org</a></li></ul></td></tr>` +
	`<tr><td>Managing organization</td><td><a href="Organization/riverside-clinic" title="Riverside Clinic">Riverside Clinic</a></td></tr>` +
	`<tr><td>Language</td><td><span lang="en-GB">English (United Kingdom) &#8212; preferred</span></td></tr>` +
	`<tr><td>Contact</td><td><p style="margin: 0; font-style: italic">Jonah Quill (brother) &amp; emergency contact, +1 555 0199</p></td></tr>` +
	`</tbody></table><p class="note"><em>Generated</em> from the resource data on 2024-05-01; see <a href="#details">details</a>.</p></div>`

func patientWithNarrative(b *testing.B) []byte {
	body := benchPatient(b)
	old := `"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Ada Quill, born 12 March 1984</p></div>"`
	div, err := json.Marshal(benchNarrative)
	if err != nil {
		b.Fatal(err)
	}
	out := bytes.Replace(body, []byte(old), div, 1)
	if bytes.Equal(out, body) {
		b.Fatal("narrative not found in the fixture")
	}
	return out
}

func BenchmarkCheckPatientWithNarrative(b *testing.B) {
	benchCheck(b, patientWithNarrative(b))
}

// BenchmarkNarrative measures the XHTML check of that narrative alone.
func BenchmarkNarrative(b *testing.B) {
	div := []byte(benchNarrative)
	b.SetBytes(int64(len(div)))
	b.ReportAllocs()
	for b.Loop() {
		if _, msg := xhtml.Check(div); msg != "" {
			b.Fatal(msg)
		}
	}
}

// benchPatient is the 2.6 KB Patient fixture the benchmarks share.
func benchPatient(b *testing.B) []byte {
	body, err := os.ReadFile("testdata/patient.json")
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// namesPatient is a Patient with n names (about 48 bytes each), the shape
// of the large writes of issue 22.
func namesPatient(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Patient","id":"large","name":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"family":"Family%d","given":["Given%d"]}`, i, i)
	}
	b.WriteString(`],"gender":"female","birthDate":"1970-01-01"}`)
	return b.Bytes()
}

// BenchmarkCheckNames measures Check on Patients of growing size: time per
// byte stays flat (one pass) and B/op does not grow with the body (no tree).
func BenchmarkCheckNames(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 80_000} {
		b.Run(fmt.Sprintf("names=%d", n), func(b *testing.B) {
			benchCheck(b, namesPatient(n))
		})
	}
}
