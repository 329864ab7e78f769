package synth

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
)

func validator(t *testing.T) *fhirjson.Validator {
	t.Helper()
	v, err := fhirjson.NewValidator(fhirjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Every generated resource passes the server's structural R4 check.
func TestResourcesAreValidR4(t *testing.T) {
	v := validator(t)
	seenCodes := map[string]bool{}
	for n := 1; n <= 60; n++ {
		info, err := v.Check(Patient(n))
		if err != nil {
			t.Fatalf("Patient %d: %v\n%s", n, err, Patient(n))
		}
		if info.ResourceType != "Patient" || info.ID != PatientID(n) {
			t.Fatalf("Patient %d: %+v", n, info)
		}
		for k := 1; k <= 5; k++ {
			body := Observation(n, k)
			info, err := v.Check(body)
			if err != nil {
				t.Fatalf("Observation %d/%d: %v\n%s", n, k, err, body)
			}
			if info.ResourceType != "Observation" || info.ID != ObservationID(n, k) {
				t.Fatalf("Observation %d/%d: %+v", n, k, info)
			}
			seenCodes[Codes[ObservationCode(n, k)].Code] = true
		}
	}
	// Every code, including the blood pressure panel, is exercised.
	for i := 1; len(seenCodes) < len(Codes) && i < 10000; i++ {
		c := Codes[ObservationCode(1000+i, 1)].Code
		if !seenCodes[c] {
			if _, err := v.Check(Observation(1000+i, 1)); err != nil {
				t.Fatalf("code %s: %v\n%s", c, err, Observation(1000+i, 1))
			}
			seenCodes[c] = true
		}
	}
	if len(seenCodes) != len(Codes) {
		t.Errorf("only %d of %d codes generated", len(seenCodes), len(Codes))
	}
}

type obsDoc struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Category []struct {
		Coding []struct{ System, Code string } `json:"coding"`
	} `json:"category"`
	Code struct {
		Coding []struct{ System, Code, Display string } `json:"coding"`
	} `json:"code"`
	Subject struct {
		Reference string `json:"reference"`
	} `json:"subject"`
	Effective     string `json:"effectiveDateTime"`
	Issued        string `json:"issued"`
	ValueQuantity *struct {
		Value  json.Number `json:"value"`
		System string      `json:"system"`
		Code   string      `json:"code"`
	} `json:"valueQuantity"`
	Component []struct {
		Code struct {
			Coding []struct{ System, Code string } `json:"coding"`
		} `json:"code"`
		ValueQuantity *struct {
			System string `json:"system"`
		} `json:"valueQuantity"`
	} `json:"component"`
}

var zoned = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)$`)

func TestObservationContent(t *testing.T) {
	loinc := regexp.MustCompile(`^\d{1,5}-\d$`)
	for n := 1; n <= 40; n++ {
		birth := BirthDate(n)
		for k := 1; k <= 10; k++ {
			var o obsDoc
			if err := json.Unmarshal(Observation(n, k), &o); err != nil {
				t.Fatal(err)
			}
			c := Codes[ObservationCode(n, k)]
			if o.ID != ObservationID(n, k) || o.Status != "final" || o.Subject.Reference != "Patient/"+PatientID(n) {
				t.Fatalf("%d/%d: %+v", n, k, o)
			}
			if len(o.Category) != 1 || o.Category[0].Coding[0].System != CategorySystem || o.Category[0].Coding[0].Code != c.Category {
				t.Errorf("%d/%d category: %+v", n, k, o.Category)
			}
			cd := o.Code.Coding[0]
			if cd.System != LOINC || cd.Code != c.Code || cd.Display == "" || !loinc.MatchString(cd.Code) {
				t.Errorf("%d/%d code: %+v", n, k, cd)
			}
			if !zoned.MatchString(o.Effective) || !zoned.MatchString(o.Issued) {
				t.Errorf("%d/%d times without a zone: %q %q", n, k, o.Effective, o.Issued)
			}
			eff, _ := time.Parse(time.RFC3339, o.Effective)
			iss, _ := time.Parse(time.RFC3339, o.Issued)
			if !iss.After(eff) || eff.Before(birth) {
				t.Errorf("%d/%d: effective %s issued %s birth %s", n, k, eff, iss, birth)
			}
			if len(c.Components) > 0 {
				if o.ValueQuantity != nil || len(o.Component) != len(c.Components) {
					t.Errorf("%d/%d panel: %+v", n, k, o)
				}
				continue
			}
			if o.ValueQuantity == nil || o.ValueQuantity.System != UCUM || o.ValueQuantity.Code != c.Unit {
				t.Errorf("%d/%d value: %+v", n, k, o.ValueQuantity)
			}
		}
	}
}

func TestPatientContent(t *testing.T) {
	var accented bool
	for n := 1; n <= 300; n++ {
		var p struct {
			ID         string                           `json:"id"`
			Identifier []struct{ System, Value string } `json:"identifier"`
			Name       []struct {
				Family string
				Given  []string
			} `json:"name"`
			Gender    string `json:"gender"`
			BirthDate string `json:"birthDate"`
		}
		if err := json.Unmarshal(Patient(n), &p); err != nil {
			t.Fatal(err)
		}
		if p.ID != PatientID(n) || p.Identifier[0].System != MRNSystem || p.Identifier[0].Value == "" {
			t.Fatalf("%d: %+v", n, p)
		}
		if !slices.Contains(Surnames, p.Name[0].Family) || len(p.Name[0].Given) == 0 || p.Name[0].Family != New(DefaultSeed).Family(n) {
			t.Errorf("%d name: %+v", n, p.Name)
		}
		b, err := time.Parse(time.DateOnly, p.BirthDate)
		if err != nil || b.Before(MinBirthDate) || b.After(MaxBirthDate) || !b.Equal(BirthDate(n)) {
			t.Errorf("%d birthDate %q", n, p.BirthDate)
		}
		if !slices.Contains([]string{"male", "female", "other", "unknown"}, p.Gender) {
			t.Errorf("%d gender %q", n, p.Gender)
		}
		for _, r := range p.Name[0].Family {
			if r >= utf8.RuneSelf {
				accented = true
			}
		}
	}
	if !accented {
		t.Error("no accented family name in 300 patients")
	}
}

func TestListsAndDeterminism(t *testing.T) {
	if len(Surnames) < 450 || len(Codes) < 20 {
		t.Errorf("%d surnames, %d codes", len(Surnames), len(Codes))
	}
	seen := map[string]bool{}
	for _, s := range Surnames {
		if seen[s] || utf8.RuneCountInString(s) < 2 {
			t.Errorf("surname %q duplicated or too short", s)
		}
		seen[s] = true
	}
	if !bytes.Equal(Patient(7), New(DefaultSeed).Patient(7)) || !bytes.Equal(Observation(7, 3), Observation(7, 3)) {
		t.Error("not deterministic")
	}
	if bytes.Equal(New(2).Patient(7), Patient(7)) {
		t.Error("the seed changes nothing")
	}
	if bytes.Equal(Observation(7, 3), Observation(7, 4)) {
		t.Error("two observations are equal")
	}
}

func TestTransactionBundle(t *testing.T) {
	entries := append(Record(1, 3), Record(2, 2)...)
	body := TransactionBundle(entries...)
	if _, err := validator(t).Check(body); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var b struct {
		ResourceType, Type string
		Entry              []struct {
			FullURL  string          `json:"fullUrl"`
			Resource json.RawMessage `json:"resource"`
			Request  struct{ Method, URL string }
		}
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if b.ResourceType != "Bundle" || b.Type != "transaction" || len(b.Entry) != 7 {
		t.Fatalf("%+v", b)
	}
	urls := map[string]bool{}
	for i, e := range b.Entry {
		want := entries[i].Type + "/" + entries[i].ID
		if e.Request.Method != "PUT" || e.Request.URL != want || !bytes.Equal(e.Resource, entries[i].Resource) {
			t.Errorf("entry %d: %s %s", i, e.Request.Method, e.Request.URL)
		}
		if !strings.HasPrefix(e.FullURL, "urn:uuid:") || urls[e.FullURL] || e.FullURL != "urn:uuid:"+NameUUID(want) {
			t.Errorf("entry %d fullUrl %q", i, e.FullURL)
		}
		urls[e.FullURL] = true
	}
	if !bytes.Equal(body, TransactionBundle(entries...)) {
		t.Error("bundle not deterministic")
	}
	if u := NameUUID("Patient/pat-1"); !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u) {
		t.Errorf("uuid %q", u)
	}
}
