package search

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary query strings to Parse on a type (or a system
// search when typ is empty): it must not panic, must fail only with a
// *search.Error naming a parameter, and must give the same result twice.
func FuzzParse(f *testing.F) {
	seeds := [][2]string{
		{"Patient", "name=peter&birthdate=ge2020-01-01&_count=10&_sort=-birthdate"},
		{"Patient", "family=a%5C,b,c&gender:not=male,female&_summary=count"},
		{"Patient", "_has:Observation:patient:_has:AuditEvent:entity:agent=Practitioner/1"},
		{"Patient", "gender:in=http://hl7.org/fhir/ValueSet/administrative-gender&_elements=id,name"},
		{"Observation", "subject:Patient.organization.name=acme&subject.name=x&patient=1"},
		{"Observation", "code-value-quantity=http://loinc.org|8480-6$gt100|http://unitsofmeasure.org|mm[Hg]"},
		{"Observation", "value-quantity=ap5.4|http://unitsofmeasure.org|mg&status:below=http://hl7.org/fhir/observation-status|amended"},
		{"Observation", "date=ap2024-03-05T10:00:00+01:00&_include=Observation:subject:Patient&_revinclude:iterate=*"},
		{"RiskAssessment", "probability=1e2,gt0.8,le-5&probability:missing=true"},
		{"ValueSet", "url:above=http://a.org/fhir/ValueSet/x&url:below=http://a.org"},
		{"", "_type=Patient,Observation&_id=1&_lastUpdated=lt2024&_sort=_id"},
		{"", "_text=x&foo=bar&_contained=true&_format=json&_total=accurate"},
		{"Patient", "birthdate=1e999&probability=1/2&_count=-1"},
		{"Observation", "subject=https://kiln.test/fhir/Patient/1/_history/2&subject:identifier=a|b"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], false)
	}
	r := testRegistry(f)
	f.Fuzz(func(t *testing.T, typ, query string, strict bool) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		var types []string
		if typ != "" {
			types = []string{typ}
		}
		opt := testOpts()
		opt.Strict = strict
		timer := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Parse hangs on %s?%s", typ, query)) })
		defer timer.Stop()
		a, errA := r.Parse(types, v, opt)
		b, errB := r.Parse(types, v, opt)
		if errA != nil {
			var se *Error
			if !errors.As(errA, &se) || se.Message == "" {
				t.Fatalf("error %v is not a *search.Error with a message", errA)
			}
			if errB == nil || errA.Error() != errB.Error() {
				t.Fatalf("not deterministic: %v then %v", errA, errB)
			}
			return
		}
		if errB != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("not deterministic:\n%+v\n%+v (%v)", a, b, errB)
		}
		if a.Query.Count < 0 || a.Query.Count > opt.MaxCount {
			t.Fatalf("Count %d outside [0, %d]", a.Query.Count, opt.MaxCount)
		}
	})
}
