package profiles

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// testProfile returns the JSON of a constraint StructureDefinition named
// name on base (a core type), with the given differential elements.
func testProfile(name, typ, base, elements string) string {
	if base == "" {
		base = "http://hl7.org/fhir/StructureDefinition/" + typ
	}
	return fmt.Sprintf(`{"resourceType":"StructureDefinition","id":%q,"url":"http://example.org/fhir/StructureDefinition/%s",
"name":%q,"status":"draft","kind":"resource","abstract":false,"type":%q,"baseDefinition":%q,"derivation":"constraint",
"differential":{"element":[%s]}}`, name, name, name, typ, base, elements)
}

// colorExtension is an extension profile other test profiles use.
var colorExtension = `{"resourceType":"StructureDefinition","id":"color","url":"http://example.org/fhir/StructureDefinition/color",
"name":"Color","status":"draft","kind":"complex-type","abstract":false,"type":"Extension",
"baseDefinition":"http://hl7.org/fhir/StructureDefinition/Extension","derivation":"constraint",
"context":[{"type":"element","expression":"Patient"}],
"differential":{"element":[
 {"id":"Extension","path":"Extension"},
 {"id":"Extension.url","path":"Extension.url","fixedUri":"http://example.org/fhir/StructureDefinition/color"},
 {"id":"Extension.value[x]","path":"Extension.value[x]","type":[{"code":"code"}]}]}}`

// elementSummary describes an element compactly for comparisons:
// "id min..max types".
func elementSummary(e *ElementDefinition) string {
	return fmt.Sprintf("%s %d..%s %s", e.ID, e.Min, e.Max, typeCodesOf(e.Type))
}

func TestSnapshotGeneration(t *testing.T) {
	tests := []struct {
		name    string
		typ     string
		base    string
		diff    string
		wantErr string
		// want maps element ids to "min..max types" (types joined by ", ").
		want  map[string]string
		order []string // ids that must appear in this order, consecutively
		check func(t *testing.T, sd *StructureDefinition)
	}{
		{
			name: "cardinality",
			typ:  "Patient",
			diff: `{"id":"Patient","path":"Patient"},
				{"id":"Patient.birthDate","path":"Patient.birthDate","min":1,"mustSupport":true},
				{"id":"Patient.name","path":"Patient.name","min":1,"max":"1"},
				{"id":"Patient.gender","path":"Patient.gender","max":"0"}`,
			want: map[string]string{
				"Patient.birthDate": "1..1 date",
				"Patient.name":      "1..1 HumanName",
				"Patient.gender":    "0..0 code",
				"Patient.active":    "0..1 boolean",
			},
			check: func(t *testing.T, sd *StructureDefinition) {
				core, _ := TypeDefinition("Patient")
				if len(sd.Elements) != len(core.Elements) {
					t.Errorf("%d elements, want %d", len(sd.Elements), len(core.Elements))
				}
				if e, _ := sd.Element("Patient.birthDate"); !e.MustSupport {
					t.Error("birthDate not mustSupport")
				}
				if e, _ := core.Element("Patient.birthDate"); e.Min != 0 || e.MustSupport {
					t.Error("core Patient modified")
				}
			},
		},
		{
			name: "slice with children",
			typ:  "Patient",
			diff: `{"id":"Patient.identifier","path":"Patient.identifier","min":1,
					"slicing":{"discriminator":[{"type":"value","path":"system"}],"rules":"open"}},
				{"id":"Patient.identifier:nationalId","path":"Patient.identifier","sliceName":"nationalId","min":1,"max":"1"},
				{"id":"Patient.identifier:nationalId.system","path":"Patient.identifier.system","min":1,"fixedUri":"urn:oid:1.2.3"},
				{"id":"Patient.identifier:nationalId.value","path":"Patient.identifier.value","min":1,
					"constraint":[{"key":"nat-1","severity":"error","human":"digits","expression":"matches('^[0-9]+$')"}]},
				{"id":"Patient.identifier:platformId","path":"Patient.identifier","sliceName":"platformId","max":"1"},
				{"id":"Patient.identifier:platformId.value","path":"Patient.identifier.value","patternString":"PT-"}`,
			want: map[string]string{
				"Patient.identifier":                     "1..* Identifier",
				"Patient.identifier:nationalId":          "1..1 Identifier",
				"Patient.identifier:nationalId.system":   "1..1 uri",
				"Patient.identifier:nationalId.value":    "1..1 string",
				"Patient.identifier:nationalId.assigner": "0..1 Reference",
				"Patient.identifier:platformId":          "0..1 Identifier",
				"Patient.identifier:platformId.value":    "0..1 string",
			},
			order: []string{
				"Patient.identifier", "Patient.identifier:nationalId", "Patient.identifier:nationalId.id",
				"Patient.identifier:nationalId.extension", "Patient.identifier:nationalId.use",
				"Patient.identifier:nationalId.type", "Patient.identifier:nationalId.system",
				"Patient.identifier:nationalId.value", "Patient.identifier:nationalId.period",
				"Patient.identifier:nationalId.assigner", "Patient.identifier:platformId",
			},
			check: func(t *testing.T, sd *StructureDefinition) {
				sys := findID(sd, "Patient.identifier:nationalId.system")
				if sys.Path != "Patient.identifier.system" || sys.FixedKey != "fixedUri" || string(sys.Fixed) != `"urn:oid:1.2.3"` {
					t.Errorf("system = %+v", sys)
				}
				slice := findID(sd, "Patient.identifier:nationalId")
				if slice.SliceName != "nationalId" || slice.Slicing != nil || slice.Path != "Patient.identifier" {
					t.Errorf("slice = %+v", slice)
				}
				if e, _ := sd.Element("Patient.identifier"); e.Slicing == nil || e.Slicing.Discriminator[0].Path != "system" {
					t.Errorf("slicing = %+v", e.Slicing)
				}
				v := findID(sd, "Patient.identifier:nationalId.value")
				if !slices.ContainsFunc(v.Constraint, func(c Constraint) bool { return c.Key == "nat-1" }) {
					t.Error("constraint nat-1 not added")
				}
				if len(v.Constraint) < 2 {
					t.Error("base constraints dropped")
				}
				if p := findID(sd, "Patient.identifier:platformId.value"); p.PatternKey != "patternString" {
					t.Errorf("pattern = %s", p.PatternKey)
				}
				// The slice's children come after the platformId slice, the
				// element after identifier follows.
				i := slices.IndexFunc(sd.Elements, func(e ElementDefinition) bool { return e.ID == "Patient.active" })
				if prev := sd.Elements[i-1].ID; !strings.HasPrefix(prev, "Patient.identifier:platformId.") {
					t.Errorf("element before Patient.active = %s", prev)
				}
			},
		},
		{
			name: "child path into a complex type",
			typ:  "Patient",
			diff: `{"id":"Patient.identifier","path":"Patient.identifier","min":1},
				{"id":"Patient.identifier.system","path":"Patient.identifier.system","min":1},
				{"id":"Patient.identifier.value","path":"Patient.identifier.value","min":1,"maxLength":20},
				{"id":"Patient.telecom.system","path":"Patient.telecom.system","min":1,
					"binding":{"strength":"required"}},
				{"id":"Patient.contact.name.family","path":"Patient.contact.name.family","min":1}`,
			want: map[string]string{
				"Patient.identifier":          "1..* Identifier",
				"Patient.identifier.system":   "1..1 uri",
				"Patient.identifier.use":      "0..1 code",
				"Patient.telecom.system":      "1..1 code",
				"Patient.contact.name.family": "1..1 string",
			},
			order: []string{"Patient.identifier", "Patient.identifier.id", "Patient.identifier.extension",
				"Patient.identifier.use", "Patient.identifier.type", "Patient.identifier.system",
				"Patient.identifier.value", "Patient.identifier.period", "Patient.identifier.assigner", "Patient.active"},
			check: func(t *testing.T, sd *StructureDefinition) {
				sys, _ := sd.Element("Patient.telecom.system")
				if sys.Binding == nil || sys.Binding.Strength != "required" || sys.Binding.ValueSet == "" {
					t.Errorf("telecom.system binding = %+v (the base's ValueSet must be kept)", sys.Binding)
				}
				if v, _ := sd.Element("Patient.identifier.value"); v.MaxLength != 20 {
					t.Errorf("maxLength = %d", v.MaxLength)
				}
			},
		},
		{
			name: "choice rename",
			typ:  "Observation",
			diff: `{"id":"Observation.valueQuantity","path":"Observation.valueQuantity","min":1},
				{"id":"Observation.valueQuantity.system","path":"Observation.valueQuantity.system","min":1,"fixedUri":"http://unitsofmeasure.org"},
				{"id":"Observation.component.valueQuantity","path":"Observation.component.valueQuantity",
					"type":[{"code":"Quantity","profile":["http://hl7.org/fhir/StructureDefinition/SimpleQuantity"]}]},
				{"id":"Observation.component.valueQuantity.code","path":"Observation.component.valueQuantity.code","min":1}`,
			want: map[string]string{
				"Observation.value[x]":                "1..1 Quantity",
				"Observation.value[x].system":         "1..1 uri",
				"Observation.component.value[x]":      "0..1 Quantity",
				"Observation.component.value[x].code": "1..1 code",
			},
			check: func(t *testing.T, sd *StructureDefinition) {
				v, _ := sd.Element("Observation.component.value[x]")
				if v.Type[0].Profile[0] != "http://hl7.org/fhir/StructureDefinition/SimpleQuantity" {
					t.Errorf("component value profile = %v", v.Type[0].Profile)
				}
				// Expanded from the SimpleQuantity profile: comparator is 0..0.
				if c := findID(sd, "Observation.component.value[x].comparator"); c == nil || c.Max != "0" {
					t.Errorf("comparator = %+v", c)
				}
			},
		},
		{
			name: "choice rename, slice form",
			typ:  "Observation",
			diff: `{"id":"Observation.value[x]:valueString","path":"Observation.value[x]","sliceName":"valueString","maxLength":10}`,
			want: map[string]string{"Observation.value[x]": "0..1 string"},
		},
		{
			name: "extension slice",
			typ:  "Patient",
			diff: `{"id":"Patient.extension:color","path":"Patient.extension","sliceName":"color","max":"1",
					"type":[{"code":"Extension","profile":["http://example.org/fhir/StructureDefinition/color"]}]},
				{"id":"Patient.extension:color.value[x]","path":"Patient.extension.value[x]","min":1},
				{"id":"Patient.modifierExtension:flag","path":"Patient.modifierExtension","sliceName":"flag",
					"type":[{"code":"Extension","profile":["http://example.org/fhir/StructureDefinition/flag"]}]}`,
			want: map[string]string{
				"Patient.extension":                 "0..* Extension",
				"Patient.extension:color":           "0..1 Extension",
				"Patient.extension:color.url":       "1..1 http://hl7.org/fhirpath/System.String",
				"Patient.extension:color.value[x]":  "1..1 code",
				"Patient.modifierExtension:flag":    "0..* Extension",
				"Patient.modifierExtension":         "0..* Extension",
				"Patient.extension:color.extension": "0..* Extension",
			},
			order: []string{"Patient.extension", "Patient.extension:color", "Patient.extension:color.id",
				"Patient.extension:color.extension", "Patient.extension:color.url", "Patient.extension:color.value[x]",
				"Patient.modifierExtension", "Patient.modifierExtension:flag", "Patient.identifier"},
			check: func(t *testing.T, sd *StructureDefinition) {
				ext, _ := sd.Element("Patient.extension")
				if ext.Slicing == nil || ext.Slicing.Discriminator[0] != (Discriminator{Type: "value", Path: "url"}) || ext.Slicing.Rules != "open" {
					t.Errorf("extension slicing = %+v", ext.Slicing)
				}
				slice := findID(sd, "Patient.extension:color")
				if slice.Type[0].Profile[0] != "http://example.org/fhir/StructureDefinition/color" {
					t.Errorf("slice profile = %v", slice.Type[0].Profile)
				}
				// Children come from the extension's (generated) snapshot.
				if url := findID(sd, "Patient.extension:color.url"); string(url.Fixed) != `"http://example.org/fhir/StructureDefinition/color"` {
					t.Errorf("url fixed = %s", url.Fixed)
				}
				if core, _ := TypeDefinition("Patient"); core.Elements[7].Slicing != nil {
					t.Error("core Patient.extension modified")
				}
			},
		},
		{
			name: "differential without ids",
			typ:  "Patient",
			diff: `{"path":"Patient.identifier","slicing":{"discriminator":[{"type":"value","path":"system"}],"rules":"closed"}},
				{"path":"Patient.identifier","sliceName":"a","min":1},
				{"path":"Patient.identifier.system","min":1},
				{"path":"Patient.identifier","sliceName":"b"},
				{"path":"Patient.identifier.value","min":1},
				{"path":"Patient.name.family","min":1}`,
			want: map[string]string{
				"Patient.identifier:a":        "1..* Identifier",
				"Patient.identifier:a.system": "1..1 uri",
				"Patient.identifier:b.value":  "1..1 string",
				"Patient.name.family":         "1..1 string",
			},
			check: func(t *testing.T, sd *StructureDefinition) {
				if findID(sd, "Patient.identifier:a.value").Min != 0 {
					t.Error("Patient.identifier:a.value constrained")
				}
			},
		},
		{
			name:    "unknown element",
			typ:     "Patient",
			diff:    `{"id":"Patient.nickname","path":"Patient.nickname","min":1}`,
			wantErr: "no element Patient.nickname in the base",
		},
		{
			name:    "unknown child of a complex type",
			typ:     "Patient",
			diff:    `{"id":"Patient.identifier.label","path":"Patient.identifier.label","min":1}`,
			wantErr: "no element Patient.identifier.label",
		},
		{
			name:    "slice without slicing",
			typ:     "Patient",
			diff:    `{"id":"Patient.identifier:a","path":"Patient.identifier","sliceName":"a"}`,
			wantErr: "of an element without slicing",
		},
		{
			name:    "slice child before the slice",
			typ:     "Patient",
			diff:    `{"id":"Patient.identifier:a.system","path":"Patient.identifier.system","min":1}`,
			wantErr: "used before it is defined",
		},
		{
			name:    "reslicing",
			typ:     "Patient",
			diff:    `{"id":"Patient.extension:a/b","path":"Patient.extension","sliceName":"a/b"}`,
			wantErr: "reslicing",
		},
		{
			name:    "type not allowed",
			typ:     "Patient",
			diff:    `{"id":"Patient.birthDate","path":"Patient.birthDate","type":[{"code":"string"}]}`,
			wantErr: "type string not allowed",
		},
		{
			name:    "renamed choice with a type not allowed",
			typ:     "Patient",
			diff:    `{"id":"Patient.deceasedString","path":"Patient.deceasedString","min":1}`,
			wantErr: "type string not allowed",
		},
		{
			name:    "max wider than the base",
			typ:     "Patient",
			diff:    `{"id":"Patient.gender","path":"Patient.gender","max":"*"}`,
			wantErr: "wider than the base",
		},
		{
			name:    "path into a choice of several types",
			typ:     "Observation",
			diff:    `{"id":"Observation.value[x].system","path":"Observation.value[x].system","min":1}`,
			wantErr: "a choice of",
		},
		{
			name:    "wrong root",
			typ:     "Patient",
			diff:    `{"id":"Person.name","path":"Person.name","min":1}`,
			wantErr: "does not start with Patient",
		},
		{
			name:    "missing base",
			typ:     "Patient",
			base:    "http://example.org/fhir/StructureDefinition/nope",
			diff:    `{"id":"Patient","path":"Patient"}`,
			wantErr: "baseDefinition http://example.org/fhir/StructureDefinition/nope not found",
		},
		{
			name:    "base cycle",
			typ:     "Patient",
			base:    "http://example.org/fhir/StructureDefinition/cycle",
			diff:    `{"id":"Patient","path":"Patient"}`,
			wantErr: "cycle",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := fstest.MapFS{
				"color.json":   {Data: []byte(colorExtension)},
				"profile.json": {Data: []byte(testProfile("test", tt.typ, tt.base, tt.diff))},
			}
			if strings.HasSuffix(tt.base, "/cycle") {
				files["cycle.json"] = &fstest.MapFile{Data: []byte(testProfile("cycle", "Patient",
					"http://example.org/fhir/StructureDefinition/test", `{"id":"Patient","path":"Patient"}`))}
			}
			s, err := NewSet(SetOptions{National: files})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sd, ok := s.StructureDefinition("http://example.org/fhir/StructureDefinition/test")
			if !ok || !sd.SnapshotGenerated {
				t.Fatalf("test profile = %v, %v", sd, ok)
			}
			for id, want := range tt.want {
				e := findID(sd, id)
				if e == nil {
					t.Errorf("no element %s", id)
					continue
				}
				if got := elementSummary(e); got != id+" "+want {
					t.Errorf("got %s, want %s %s", got, id, want)
				}
			}
			if len(tt.order) > 0 {
				i := slices.IndexFunc(sd.Elements, func(e ElementDefinition) bool { return e.ID == tt.order[0] })
				for k, id := range tt.order {
					if i < 0 || i+k >= len(sd.Elements) || sd.Elements[i+k].ID != id {
						t.Errorf("element order: want %s at position %d after %s; ids: %v", id, k, tt.order[0], ids(sd))
						break
					}
				}
			}
			for _, e := range sd.Elements {
				if e.ID == "" || e.Path == "" {
					t.Errorf("element without id or path: %+v", e)
				}
			}
			if tt.check != nil {
				tt.check(t, sd)
			}
		})
	}
}

func ids(sd *StructureDefinition) []string {
	out := make([]string, len(sd.Elements))
	for i, e := range sd.Elements {
		out[i] = e.ID
	}
	return out
}

// usCoreDir is the US Core 3.1.0 package of the shared reference folder
// (KILN_SHARED, which make test sets when ../shared is present).
var usCoreDir = filepath.Join(os.Getenv("KILN_SHARED"), "fhir", "us-core-3.1.0")

// requireUSCore runs a test only when KILN_SHARED names the shared
// reference folder (opt-in: the project's tests pass without it).
func requireUSCore(tb testing.TB) {
	tb.Helper()
	if os.Getenv("KILN_SHARED") == "" {
		tb.Skip("set KILN_SHARED to the shared reference folder (with fhir/us-core-3.1.0) to run")
	}
	if _, err := os.Stat(filepath.Join(usCoreDir, "package.json")); err != nil {
		tb.Fatalf("KILN_SHARED is set but has no US Core package: %v", err)
	}
}

func TestUSCore(t *testing.T) {
	requireUSCore(t)
	s, err := NewSet(SetOptions{Packages: []string{usCoreDir}})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("Warnings = %q", s.Warnings)
	}
	for typ, want := range map[string]int{"StructureDefinition": 29, "ValueSet": 31, "CodeSystem": 5, "SearchParameter": 74} {
		if got := len(s.Resources(typ)); got != want {
			t.Errorf("Resources(%s) = %d, want %d", typ, got, want)
		}
	}
	core, _ := StructureDefinitions()
	if got := len(s.StructureDefinitions()); got != len(core)+29 {
		t.Errorf("StructureDefinitions() = %d, want %d", got, len(core)+29)
	}
	sd, ok := s.StructureDefinition("http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient|3.1.0")
	if !ok || len(sd.Elements) == 0 || sd.SnapshotGenerated || len(sd.Differential) == 0 {
		t.Fatalf("us-core-patient = %v, %v", sd, ok)
	}
	if race := findID(sd, "Patient.extension:race"); race == nil || race.Type[0].Profile[0] != "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race" {
		t.Errorf("Patient.extension:race = %+v", race)
	}
	if e, _ := sd.Element("Patient.identifier.system"); e == nil || e.Min != 1 || !e.MustSupport {
		t.Errorf("Patient.identifier.system = %+v", e)
	}
	race, _ := s.StructureDefinition("http://hl7.org/fhir/us/core/StructureDefinition/us-core-race")
	if len(race.Context) == 0 {
		t.Error("us-core-race has no context")
	}
	if _, ok := s.ValueSet("http://hl7.org/fhir/us/core/ValueSet/omb-race-category"); !ok {
		t.Error("ValueSet omb-race-category not found")
	}
	if _, ok := s.CodeSystem("urn:oid:2.16.840.1.113883.6.238"); !ok {
		t.Error("CodeSystem cdcrec not found")
	}
	if raw, ok := s.Resource("StructureDefinition", "us-core-patient"); !ok || !json.Valid(raw) {
		t.Error("Resource(StructureDefinition, us-core-patient) not served")
	}
}

// TestDerivedFromUSCore generates the snapshot of profiles based on US
// Core profiles, whose published snapshots hold renamed choices as type
// slices.
func TestDerivedFromUSCore(t *testing.T) {
	requireUSCore(t)
	national := fstest.MapFS{
		"smoking.json": {Data: []byte(testProfile("smoking", "Observation",
			"http://hl7.org/fhir/us/core/StructureDefinition/us-core-smokingstatus|3.1.0",
			`{"id":"Observation.valueCodeableConcept","path":"Observation.valueCodeableConcept","mustSupport":true},
			 {"id":"Observation.valueCodeableConcept.text","path":"Observation.valueCodeableConcept.text","min":1}`))},
		"patient.json": {Data: []byte(testProfile("patient", "Patient",
			"http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient",
			`{"id":"Patient.extension:race","path":"Patient.extension","sliceName":"race","min":1},
			 {"id":"Patient.extension:nickname","path":"Patient.extension","sliceName":"nickname",
			  "type":[{"code":"Extension","profile":["http://example.org/fhir/StructureDefinition/color"]}]},
			 {"id":"Patient.identifier.value","path":"Patient.identifier.value","maxLength":32}`))},
		"color.json": {Data: []byte(colorExtension)},
	}
	s, err := NewSet(SetOptions{National: national, Packages: []string{usCoreDir}})
	if err != nil {
		t.Fatal(err)
	}
	smoking, _ := s.StructureDefinition("http://example.org/fhir/StructureDefinition/smoking")
	if e := findID(smoking, "Observation.value[x]:valueCodeableConcept"); e == nil || !e.MustSupport || e.Min != 1 {
		t.Errorf("value[x]:valueCodeableConcept = %+v", e)
	}
	if e := findID(smoking, "Observation.value[x]:valueCodeableConcept.text"); e == nil || e.Min != 1 {
		t.Errorf("value[x]:valueCodeableConcept.text = %+v", e)
	}
	patient, _ := s.StructureDefinition("http://example.org/fhir/StructureDefinition/patient")
	if e := findID(patient, "Patient.extension:race"); e == nil || e.Min != 1 || e.Type[0].Profile[0] != "http://hl7.org/fhir/us/core/StructureDefinition/us-core-race" {
		t.Errorf("Patient.extension:race = %+v", e)
	}
	order := ids(patient)
	race, nick, eth := slices.Index(order, "Patient.extension:race"), slices.Index(order, "Patient.extension:nickname"), slices.Index(order, "Patient.extension:birthsex")
	if nick < eth || nick < race {
		t.Errorf("nickname slice at %d, before the existing slices (race %d, birthsex %d)", nick, race, eth)
	}
	if e, _ := patient.Element("Patient.identifier.value"); e.MaxLength != 32 || e.Min != 1 {
		t.Errorf("Patient.identifier.value = %+v", e)
	}
}

// TestUSCoreRegenerated strips the published snapshots of the US Core
// profiles whose base is a core definition, generates them again and
// compares the cardinality and types of the elements both have.
func TestUSCoreRegenerated(t *testing.T) {
	requireUSCore(t)
	dir := t.TempDir()
	manifest, err := os.ReadFile(filepath.Join(usCoreDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "package.json"), manifest, 0o644)
	files, _ := filepath.Glob(filepath.Join(usCoreDir, "StructureDefinition-*.json"))
	published := make(map[string]*StructureDefinition)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sd StructureDefinition
		if err := json.Unmarshal(data, &sd); err != nil {
			t.Fatal(err)
		}
		if _, ok := StructureDefinitionByURL(sd.BaseDefinition); !ok && !strings.HasPrefix(sd.BaseDefinition, "http://hl7.org/fhir/us/core/") {
			continue // based on a core profile (vitalsigns) not embedded
		}
		published[sd.URL] = normalizeChoiceSlices(&sd)
		var m map[string]json.RawMessage
		json.Unmarshal(data, &m)
		delete(m, "snapshot")
		out, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), out, 0o644)
	}
	s, err := NewSet(SetOptions{Packages: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for url, pub := range published {
		sd, ok := s.StructureDefinition(url)
		if !ok || !sd.SnapshotGenerated {
			t.Errorf("%s: not generated", url)
			continue
		}
		for i := range sd.Elements {
			e := &sd.Elements[i]
			p := findID(pub, e.ID)
			if p == nil {
				continue
			}
			compared++
			if e.Min != p.Min || e.Max != p.Max || fhirTypes(e.Type) != fhirTypes(p.Type) {
				t.Errorf("%s: generated %s, published %s", sd.ID, elementSummary(e), elementSummary(p))
			}
			// The publisher drops bindings on Extension elements.
			if e.Binding != nil && p.Binding != nil && stripVersion(e.Binding.ValueSet) != stripVersion(p.Binding.ValueSet) ||
				e.Binding == nil && p.Binding != nil {
				t.Errorf("%s: %s binding %+v, published %+v", sd.ID, e.ID, e.Binding, p.Binding)
			}
			if e.FixedKey != p.FixedKey || e.PatternKey != p.PatternKey || e.MustSupport != p.MustSupport {
				t.Errorf("%s: %s fixed/pattern/mustSupport %s %s %v, published %s %s %v", sd.ID, e.ID,
					e.FixedKey, e.PatternKey, e.MustSupport, p.FixedKey, p.PatternKey, p.MustSupport)
			}
		}
	}
	t.Logf("%d profiles, %d elements compared", len(published), compared)
	if compared < 500 {
		t.Errorf("only %d elements compared", compared)
	}
}

// normalizeChoiceSlices rewrites a published snapshot to the form the
// generator gives renamed choices: the slice value[x]:valueQuantity (and
// its children) replaces value[x].
func normalizeChoiceSlices(sd *StructureDefinition) *StructureDefinition {
	byID := make(map[string]int)
	var out []ElementDefinition
	for _, e := range sd.Elements {
		segs := strings.Split(e.ID, ".")
		for i, seg := range segs {
			name, slice, ok := strings.Cut(seg, ":")
			if stem, isChoice := strings.CutSuffix(name, "[x]"); ok && isChoice && strings.HasPrefix(slice, stem) {
				segs[i] = name
			}
		}
		e.ID = strings.Join(segs, ".")
		if i, dup := byID[e.ID]; dup {
			out[i] = e
			continue
		}
		byID[e.ID] = len(out)
		out = append(out, e)
	}
	sd.Elements = out
	return sd
}

// fhirTypes lists type codes, with FHIR types for the FHIRPath system
// types of primitive values.
func fhirTypes(types []ElementType) string {
	codes := make([]string, len(types))
	for i, t := range types {
		codes[i] = t.Code
		if ft := t.FHIRType(); ft != "" {
			codes[i] = ft
		}
	}
	return strings.Join(codes, ", ")
}

// BenchmarkNewSetUSCore loads the core definitions (decoded once per
// process, as in the server) and US Core.
func BenchmarkNewSetUSCore(b *testing.B) {
	requireUSCore(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewSet(SetOptions{Packages: []string{usCoreDir}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewSetUSCoreCold also decodes the embedded core definitions in
// every iteration, as a server does once at start-up.
func BenchmarkNewSetUSCoreCold(b *testing.B) {
	requireUSCore(b)
	b.ReportAllocs()
	sds, terms := loadStructureDefinitions, loadTerminology
	defer func() { loadStructureDefinitions, loadTerminology = sds, terms }()
	for b.Loop() {
		loadStructureDefinitions = sync.OnceValues(decodeStructureDefinitions)
		loadTerminology = sync.OnceValues(decodeTerminology)
		if _, err := NewSet(SetOptions{Packages: []string{usCoreDir}}); err != nil {
			b.Fatal(err)
		}
	}
}
