package profiles

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

func TestNewSetCoreOnly(t *testing.T) {
	s, err := NewSet(SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("Warnings = %q", s.Warnings)
	}
	core, _ := StructureDefinitions()
	if got := len(s.StructureDefinitions()); got != len(core) {
		t.Errorf("StructureDefinitions() = %d, want %d", got, len(core))
	}
	for _, url := range []string{
		"http://hl7.org/fhir/StructureDefinition/Patient",
		"http://hl7.org/fhir/StructureDefinition/Patient|4.0.1",
		"http://hl7.org/fhir/StructureDefinition/SimpleQuantity",
	} {
		if _, ok := s.StructureDefinition(url); !ok {
			t.Errorf("StructureDefinition(%s) not found", url)
		}
	}
	if sd, ok := s.TypeDefinition("Quantity"); !ok || sd.Derivation == "constraint" {
		t.Errorf("TypeDefinition(Quantity) = %v, %v", sd, ok)
	}
	if _, ok := s.ValueSet("http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1"); !ok {
		t.Error("ValueSet(administrative-gender) not found")
	}
	if _, ok := s.CodeSystem("http://hl7.org/fhir/administrative-gender"); !ok {
		t.Error("CodeSystem(administrative-gender) not found")
	}
	if _, ok := s.Resource("StructureDefinition", "Patient"); ok {
		t.Error("Resource serves a trimmed core definition")
	}
	if n := len(s.Resources("StructureDefinition")); n != 0 {
		t.Errorf("Resources(StructureDefinition) = %d, want 0", n)
	}
}

func TestNationalPlaceholders(t *testing.T) {
	tests := []struct {
		profileURL    string
		wantProfile   string // URL of the national Patient
		wantCanonical string
	}{
		{"https://fhir.health.example/StructureDefinition", "https://fhir.health.example/StructureDefinition/Patient", "https://fhir.health.example"},
		{"https://fhir.health.example/StructureDefinition/", "https://fhir.health.example/StructureDefinition/Patient", "https://fhir.health.example"},
		{"https://fhir.health.example/fhir/profiles", "https://fhir.health.example/fhir/profiles/Patient", "https://fhir.health.example/fhir/profiles"},
		{`https://odd.example/a"b\c`, `https://odd.example/a"b\c/Patient`, `https://odd.example/a"b\c`},
	}
	for _, tt := range tests {
		t.Run(tt.profileURL, func(t *testing.T) {
			s, err := NewSet(SetOptions{ProfileURL: tt.profileURL, National: os.DirFS("testdata/national")})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Warnings) != 0 {
				t.Errorf("Warnings = %q", s.Warnings)
			}
			sd, ok := s.StructureDefinition(tt.wantProfile)
			if !ok {
				t.Fatalf("StructureDefinition(%s) not found", tt.wantProfile)
			}
			if !sd.SnapshotGenerated || len(sd.Elements) == 0 {
				t.Fatal("no generated snapshot")
			}
			if _, ok := s.StructureDefinition(tt.wantProfile + "|0.1.0"); !ok {
				t.Error("not found with its version")
			}
			if _, ok := s.StructureDefinition(tt.wantProfile + "|9.9.9"); ok {
				t.Error("found with another version")
			}
			sys := findID(sd, "Patient.identifier:nationalId.system")
			if sys == nil {
				t.Fatal("no Patient.identifier:nationalId.system")
			}
			if want := quoteJSON(tt.wantCanonical + "/NamingSystem/national-id"); string(sys.Fixed) != want {
				t.Errorf("fixed system = %s, want %s", sys.Fixed, want)
			}
			gender, _ := sd.Element("Patient.gender")
			vsURL := tt.wantCanonical + "/ValueSet/national-gender"
			if gender.Binding == nil || gender.Binding.ValueSet != vsURL || gender.Binding.Strength != "required" {
				t.Errorf("gender binding = %+v", gender.Binding)
			}
			vs, ok := s.ValueSet(vsURL)
			if !ok {
				t.Fatalf("ValueSet(%s) not found", vsURL)
			}
			if _, ok := s.CodeSystem(vs.Compose.Include[0].System); !ok {
				t.Errorf("CodeSystem(%s) not found", vs.Compose.Include[0].System)
			}
			raw, ok := s.Resource("StructureDefinition", "NationalPatient")
			if !ok || bytes.Contains(raw, []byte("{{")) || !bytes.Contains(raw, []byte(quoteJSON(tt.wantProfile))) {
				t.Errorf("Resource(StructureDefinition, NationalPatient) = %.200s, %v", raw, ok)
			}
			if n := len(s.Resources("CodeSystem")); n != 1 {
				t.Errorf("Resources(CodeSystem) = %d, want 1", n)
			}
		})
	}
}

// quoteJSON returns s as a JSON string.
func quoteJSON(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func findID(sd *StructureDefinition, id string) *ElementDefinition {
	for i := range sd.Elements {
		if sd.Elements[i].ID == id {
			return &sd.Elements[i]
		}
	}
	return nil
}

func TestNationalErrors(t *testing.T) {
	tests := []struct {
		name       string
		profileURL string
		files      fstest.MapFS
		wantErr    string
		wantWarn   string
	}{
		{
			name:    "placeholder without profile URL",
			files:   fstest.MapFS{"vs.json": {Data: []byte(`{"resourceType":"ValueSet","id":"a","url":"{{canonical}}/ValueSet/a"}`)}},
			wantErr: "placeholders need a profile URL",
		},
		{
			name:       "redefines core",
			profileURL: "http://x.example/StructureDefinition",
			files:      fstest.MapFS{"vs.json": {Data: []byte(`{"resourceType":"ValueSet","id":"a","url":"http://hl7.org/fhir/ValueSet/administrative-gender"}`)}},
			wantErr:    "redefines a core definition",
		},
		{
			name:    "invalid JSON",
			files:   fstest.MapFS{"bad.json": {Data: []byte(`{"resourceType":`)}},
			wantErr: "invalid JSON",
		},
		{
			name:     "not a resource",
			files:    fstest.MapFS{"sub/notes.json": {Data: []byte(`{"a":1}`)}, "readme.md": {Data: []byte("#")}},
			wantWarn: "sub/notes.json: not a FHIR conformance resource",
		},
		{
			name:  "examples skipped",
			files: fstest.MapFS{"examples/bad.json": {Data: []byte(`{`)}, ".git/x.json": {Data: []byte(`{`)}},
		},
		{
			name:       "unknown placeholder",
			profileURL: "http://x.example/StructureDefinition",
			files:      fstest.MapFS{"vs.json": {Data: []byte(`{"resourceType":"ValueSet","id":"a","url":"{{canonical}}/ValueSet/{{name}}"}`)}},
			wantWarn:   "unknown placeholder {{name}}",
		},
		{
			name:     "StructureDefinition without url",
			files:    fstest.MapFS{"sd.json": {Data: []byte(`{"resourceType":"StructureDefinition","id":"a"}`)}},
			wantWarn: "StructureDefinition without url",
		},
		{
			name: "duplicate URL",
			files: fstest.MapFS{
				"a.json": {Data: []byte(`{"resourceType":"ValueSet","id":"a","url":"http://x.example/ValueSet/v"}`)},
				"b.json": {Data: []byte(`{"resourceType":"ValueSet","id":"b","url":"http://x.example/ValueSet/v"}`)},
			},
			wantWarn: "the later wins",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSet(SetOptions{ProfileURL: tt.profileURL, National: tt.files})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(s.Warnings, "\n"), tt.wantWarn) {
				t.Errorf("Warnings = %q, want %q", s.Warnings, tt.wantWarn)
			}
		})
	}
}

func TestSetConcurrentUse(t *testing.T) {
	s, err := NewSet(SetOptions{
		ProfileURL: "https://fhir.health.example/StructureDefinition",
		National:   os.DirFS("testdata/national"),
		Packages:   []string{basePkgDir, depPkgDir},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, ok := s.StructureDefinition("https://fhir.health.example/StructureDefinition/Patient"); !ok {
					t.Error("national Patient not found")
					return
				}
				s.TypeDefinition("Patient")
				s.ValueSet("http://example.org/fhir/base/ValueSet/color")
				s.CodeSystem("http://example.org/fhir/base/CodeSystem/color")
				s.Resource("StructureDefinition", "dep-patient")
				_ = s.Resources("ValueSet")
				_ = s.StructureDefinitions()
			}
		})
	}
	wg.Wait()
}
