package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// loadStructureDefinitions returns the trimmed FHIR 4.0.1 StructureDefinitions
// of the resources and types files, in file order, and the trimmed Patient
// CompartmentDefinition.
//
// The Patient compartment is taken from profiles-resources.json, which holds
// the CompartmentDefinitions as published with FHIR 4.0.1. The separate
// compartmentdefinition-patient.json of the Medplum package is a modified
// copy (Encounter by "subject" instead of "patient", Task added), so it is
// not used.
func loadStructureDefinitions(src string, sum *summary) (sds []object, compartment object, err error) {
	for _, name := range []string{resourcesFile, typesFile} {
		resources, err := readBundle(filepath.Join(src, name))
		if err != nil {
			return nil, nil, err
		}
		for _, r := range resources {
			switch str(r, "resourceType") {
			case "StructureDefinition":
				if str(r, "fhirVersion") != coreVersion {
					sum.droppedSDs = append(sum.droppedSDs, str(r, "id"))
					continue
				}
				if _, ok := r["snapshot"].(object); !ok {
					return nil, nil, fmt.Errorf("%s: StructureDefinition %s has no snapshot", name, str(r, "id"))
				}
				sds = append(sds, structureDefinitionShape.apply(r).(object))
			case "CompartmentDefinition":
				if str(r, "code") == "Patient" {
					compartment = compartmentShape.apply(r).(object)
				}
			}
		}
	}
	if len(sds) == 0 {
		return nil, nil, fmt.Errorf("%s: no StructureDefinitions", src)
	}
	if compartment == nil {
		return nil, nil, fmt.Errorf("%s: no Patient CompartmentDefinition", resourcesFile)
	}
	return sds, compartment, nil
}

// loadSearchParameters returns the trimmed FHIR 4.0.1 SearchParameters, in
// file order.
func loadSearchParameters(src string, sum *summary) ([]object, error) {
	resources, err := readBundle(filepath.Join(src, searchParamFile))
	if err != nil {
		return nil, err
	}
	var sps []object
	for _, r := range resources {
		if str(r, "resourceType") != "SearchParameter" {
			continue
		}
		// SearchParameters carry no fhirVersion; the Medplum package adds
		// one from a later version, marked by its business version.
		if v := str(r, "version"); v != "" && v != coreVersion {
			sum.droppedSPs = append(sum.droppedSPs, str(r, "id"))
			continue
		}
		sps = append(sps, searchParameterShape.apply(r).(object))
	}
	if len(sps) == 0 {
		return nil, fmt.Errorf("%s: no SearchParameters", searchParamFile)
	}
	return sps, nil
}

// requiredValueSets returns the sorted canonical URLs (without |version) of
// the ValueSets that elements of sds bind to with strength required.
func requiredValueSets(sds []object) []string {
	seen := map[string]bool{}
	for _, sd := range sds {
		snap, _ := sd["snapshot"].(object)
		elements, _ := snap["element"].([]any)
		for _, e := range elements {
			el, _ := e.(object)
			b, _ := el["binding"].(object)
			if str(b, "strength") == "required" && str(b, "valueSet") != "" {
				seen[canonical(str(b, "valueSet"))] = true
			}
		}
	}
	return sortedKeys(seen)
}

// canonical strips a |version suffix from a canonical URL.
func canonical(u string) string {
	if i := strings.IndexByte(u, '|'); i >= 0 {
		return u[:i]
	}
	return u
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// loadTerminology returns the encoded terminology file: the ValueSets in
// roots, those they include (transitively), and the CodeSystems they draw
// codes from, each sorted by URL.
func loadTerminology(src string, roots []string, sum *summary) ([]byte, error) {
	valueSets := map[string]object{}
	codeSystems := map[string]object{}
	for _, name := range terminologyFiles {
		resources, err := readBundle(filepath.Join(src, name))
		if err != nil {
			return nil, err
		}
		for _, r := range resources {
			var m map[string]object
			switch str(r, "resourceType") {
			case "ValueSet":
				m = valueSets
			case "CodeSystem":
				m = codeSystems
			default:
				continue
			}
			if u := str(r, "url"); u != "" && m[u] == nil {
				m[u] = r
			}
		}
	}

	keptVS, keptCS := map[string]bool{}, map[string]bool{}
	missingVS, missingCS := map[string]bool{}, map[string]bool{}
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if keptVS[u] || missingVS[u] {
			continue
		}
		vs := valueSets[u]
		if vs == nil {
			missingVS[u] = true
			continue
		}
		keptVS[u] = true
		compose, _ := vs["compose"].(object)
		for _, part := range []string{"include", "exclude"} {
			sets, _ := compose[part].([]any)
			for _, s := range sets {
				set, _ := s.(object)
				if sys := str(set, "system"); sys != "" {
					if codeSystems[sys] != nil {
						keptCS[sys] = true
					} else {
						missingCS[sys] = true
					}
				}
				refs, _ := set["valueSet"].([]any)
				for _, ref := range refs {
					if r, ok := ref.(string); ok {
						queue = append(queue, canonical(r))
					}
				}
			}
		}
	}

	var out struct {
		CodeSystems []object `json:"codeSystems"`
		ValueSets   []object `json:"valueSets"`
	}
	for _, u := range sortedKeys(keptCS) {
		out.CodeSystems = append(out.CodeSystems, codeSystemShape.apply(codeSystems[u]).(object))
	}
	for _, u := range sortedKeys(keptVS) {
		out.ValueSets = append(out.ValueSets, valueSetShape.apply(valueSets[u]).(object))
	}
	sum.valueSets, sum.codeSystems = len(out.ValueSets), len(out.CodeSystems)
	sum.unresolvedVS, sum.unresolvedSystems = sortedKeys(missingVS), sortedKeys(missingCS)

	var buf bytes.Buffer
	buf.WriteString("{\"codeSystems\":")
	buf.Write(jsonLines(out.CodeSystems))
	buf.WriteString(",\"valueSets\":")
	buf.Write(jsonLines(out.ValueSets))
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// packageInfo describes the npm package the definitions come from.
type packageInfo struct {
	name, version, license string
	fhirVersion            string // from version.info, e.g. "4.0.1-9346c8cc45"
	licenseText            []byte
}

// readPackageInfo reads package.json and LICENSE.txt of the npm package
// that src (its dist/fhir/r4 directory) belongs to, and version.info.
func readPackageInfo(src string) (*packageInfo, error) {
	root := filepath.Join(src, "..", "..", "..")
	data, err := os.ReadFile(filepath.Join(root, "package.json"))
	if err != nil {
		return nil, fmt.Errorf("-src must be the dist/fhir/r4 directory of an unpacked npm package: %w", err)
	}
	var pj struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		License string `json:"license"`
	}
	if err := json.Unmarshal(data, &pj); err != nil {
		return nil, fmt.Errorf("package.json: %w", err)
	}
	if pj.Name == "" || pj.Version == "" {
		return nil, fmt.Errorf("package.json: missing name or version")
	}
	info := &packageInfo{name: pj.Name, version: pj.Version, license: pj.License}
	if info.licenseText, err = os.ReadFile(filepath.Join(root, "LICENSE.txt")); err != nil {
		return nil, err
	}
	vi, err := os.ReadFile(filepath.Join(src, versionFile))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(vi), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "FhirVersion="); ok {
			info.fhirVersion = v
		}
	}
	if !strings.HasPrefix(info.fhirVersion, coreVersion) {
		return nil, fmt.Errorf("%s: FhirVersion %q, want %s", versionFile, info.fhirVersion, coreVersion)
	}
	return info, nil
}

// notice returns the text of the NOTICE file.
func notice(p *packageInfo) string {
	var files strings.Builder
	for _, f := range [][2]string{
		{sdOut, "StructureDefinitions (snapshots)"},
		{spOut, "SearchParameters"},
		{compartmentOut, "Patient CompartmentDefinition"},
		{terminologyOut, "ValueSets and CodeSystems"},
		{typesOut, "names of the concrete resource types"},
	} {
		fmt.Fprintf(&files, "  %-30s %s\n", f[0], f[1])
	}
	return `FHIR R4 definitions embedded in Kiln
====================================

The files in this directory are generated; do not edit them by hand.

Source
  npm package ` + p.name + `@` + p.version + `, directory dist/fhir/r4
  (FHIR ` + p.fhirVersion + ` core definitions as redistributed by Medplum).
  The package is licensed under the ` + p.license + ` licence; a copy of its
  licence text is in ` + licenseOut + `.

  The FHIR specification content (StructureDefinitions, SearchParameters,
  CompartmentDefinitions, ValueSets and CodeSystems) is published by HL7
  International under the Creative Commons CC0 1.0 "No Rights Reserved"
  licence. HL7 and FHIR are registered trademarks of Health Level Seven
  International.

Changes
  Only FHIR ` + coreVersion + ` content is kept; resources the package adds from
  later FHIR versions are dropped. Each resource is trimmed to the fields a
  FHIR server needs (no narrative, differential, mappings or descriptive
  text). The terminology file holds the ValueSets of required bindings,
  the ValueSets they include and the CodeSystems they draw codes from.

Files
` + files.String() + `
Regenerate
  make definitions              (runs: bash profiles/gen/definitions.sh)
or, from an unpacked package:
  go run ./profiles/gen -src <package>/dist/fhir/r4 -out profiles/r4
`
}
