// Package profiles gives read access to the FHIR R4 (4.0.1) core
// definitions embedded in the binary: StructureDefinitions, SearchParameters,
// the Patient compartment and the terminology of required bindings.
//
// The data lives in r4/ as gzip-compressed JSON produced by ./gen (see
// r4/NOTICE). Each file is decoded lazily, once, on first use; all functions
// are safe for concurrent use. Values returned by pointer, and the slices
// and maps they hold, are shared: callers must treat them as read-only.
// Lookup functions report a file that fails to decode as "not found"; Load
// returns the error.
package profiles

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
)

//go:embed r4/*.json.gz r4/resourcetypes.json
var files embed.FS

// readGzip returns the decompressed content of the embedded file r4/name.
func readGzip(name string) ([]byte, error) {
	data, err := files.ReadFile("r4/" + name)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("profiles: %s: %w", name, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profiles: %s: %w", name, err)
	}
	return raw, nil
}

// decodeGzip decodes the embedded gzip-compressed JSON file r4/name into v.
func decodeGzip(name string, v any) error {
	raw, err := readGzip(name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("profiles: %s: %w", name, err)
	}
	return nil
}

// typeList holds the sorted names of the concrete resource types and a set
// of them.
type typeList struct {
	names []string
	set   map[string]struct{}
}

var resourceTypes = sync.OnceValue(decodeResourceTypes)

// decodeResourceTypes reads a small pre-computed list, so it is cheap
// enough for start-up; it does not decode the StructureDefinitions.
func decodeResourceTypes() typeList {
	var t typeList
	data, err := files.ReadFile("r4/resourcetypes.json")
	if err == nil {
		err = json.Unmarshal(data, &t.names)
	}
	if err != nil || len(t.names) == 0 {
		// The list is generated and embedded at build time; a failure here
		// is a broken build, which the package tests catch.
		panic(fmt.Sprintf("profiles: embedded resourcetypes.json: %v", err))
	}
	t.set = make(map[string]struct{}, len(t.names))
	for _, n := range t.names {
		t.set[n] = struct{}{}
	}
	return t
}

// ResourceTypes returns the names of all concrete (non-abstract) FHIR R4
// resource types, sorted. The caller owns the returned slice.
func ResourceTypes() []string {
	return slices.Clone(resourceTypes().names)
}

// IsResourceType reports whether name is a concrete FHIR R4 resource type.
// Abstract types (Resource, DomainResource) and data types are not.
func IsResourceType(name string) bool {
	_, ok := resourceTypes().set[name]
	return ok
}

// Load decodes all embedded definitions and returns the first error. The
// other functions decode on demand; a server may call Load at start-up to
// pay that cost early and to fail fast.
func Load() error {
	if _, err := loadStructureDefinitions(); err != nil {
		return err
	}
	if _, err := SearchParameters(); err != nil {
		return err
	}
	if _, err := PatientCompartment(); err != nil {
		return err
	}
	_, err := loadTerminology()
	return err
}
