package profiles

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Limits applied when reading a package, so that a hostile or broken
// archive cannot exhaust memory or time.
const (
	// maxPackageFile is the largest file (or archive entry) read.
	maxPackageFile = 32 << 20
	// maxPackageKept is the total size of the files kept from one package.
	maxPackageKept = 256 << 20
	// maxPackageStream is the total decompressed size of an archive,
	// skipped entries included.
	maxPackageStream = 1 << 30
	// maxPackageEntries is the number of entries of an archive or folder.
	maxPackageEntries = 100_000
)

// PackageInfo describes a loaded FHIR package (its package.json).
type PackageInfo struct {
	Name         string            `json:"name"`
	Version      string            `json:"version"`
	Canonical    string            `json:"canonical,omitempty"`
	FHIRVersions []string          `json:"fhirVersions,omitempty"`
	Dependencies map[string]string `json:"dependencies,omitempty"`
	// Path is where the package was read from.
	Path string `json:"-"`
}

// corePackage is the name of the FHIR R4 core package, which the embedded
// definitions provide.
const corePackage = "hl7.fhir.r4.core"

// packageFile is a JSON file at the root of a package.
type packageFile struct {
	name string
	data []byte
}

// rawPackage is the content of a package as read: its manifest and the
// JSON files at its root, in name order.
type rawPackage struct {
	info  PackageInfo
	files []packageFile
}

// readPackage reads the package at p: an npm-format .tgz (entries under
// package/), a folder holding package/package.json, or a folder holding
// package.json directly.
func readPackage(p string) (*rawPackage, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", p, err)
	}
	var pkg *rawPackage
	switch {
	case st.Mode().IsRegular():
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", p, err)
		}
		defer f.Close()
		pkg, err = readTgz(f)
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", p, err)
		}
	case st.IsDir():
		root := p
		if _, err := os.Stat(filepath.Join(p, "package", "package.json")); err == nil {
			root = filepath.Join(p, "package")
		}
		pkg, err = readFolder(os.DirFS(root))
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", p, err)
		}
	default:
		return nil, fmt.Errorf("package %s: not a file or folder", p)
	}
	pkg.info.Path = p
	return pkg, nil
}

// readFolder reads a package laid out as a folder with package.json and
// the resource files at its root. Sub-folders (examples, other) and files
// that are not regular (symbolic links included) are skipped.
func readFolder(fsys fs.FS) (*rawPackage, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	if len(entries) > maxPackageEntries {
		return nil, fmt.Errorf("more than %d entries", maxPackageEntries)
	}
	var files []packageFile
	var manifest []byte
	kept := 0
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := readCapped(fsys, name)
		if err != nil {
			return nil, err
		}
		kept += len(data)
		if kept > maxPackageKept {
			return nil, fmt.Errorf("package larger than %d bytes", maxPackageKept)
		}
		if name == "package.json" {
			manifest = data
			continue
		}
		files = append(files, packageFile{name, data})
	}
	return newRawPackage(manifest, files)
}

// readCapped reads the file name of fsys, failing if it is larger than
// maxPackageFile.
func readCapped(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPackageFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxPackageFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxPackageFile)
	}
	return data, nil
}

// readTgz reads an npm-format package: a gzip-compressed tar archive whose
// entries are under package/. Only regular files directly under package/
// whose names end in .json are kept; entries with absolute paths or ".."
// components are rejected.
func readTgz(r io.Reader) (*rawPackage, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a gzip archive: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(io.LimitReader(zr, maxPackageStream))
	var files []packageFile
	var manifest []byte
	seen := make(map[string]bool)
	kept, n := 0, 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		if n++; n > maxPackageEntries {
			return nil, fmt.Errorf("more than %d entries", maxPackageEntries)
		}
		name := strings.ReplaceAll(h.Name, `\`, "/")
		if strings.HasPrefix(name, "/") || slices.Contains(strings.Split(name, "/"), "..") {
			return nil, fmt.Errorf("entry %q: unsafe path", h.Name)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name = path.Clean(name)
		rest, ok := strings.CutPrefix(name, "package/")
		if !ok || strings.Contains(rest, "/") || !strings.HasSuffix(rest, ".json") {
			continue
		}
		if h.Size > maxPackageFile {
			return nil, fmt.Errorf("entry %q: larger than %d bytes", h.Name, maxPackageFile)
		}
		if seen[rest] {
			return nil, fmt.Errorf("entry %q: duplicate", h.Name)
		}
		seen[rest] = true
		data, err := io.ReadAll(io.LimitReader(tr, maxPackageFile+1))
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", h.Name, err)
		}
		if len(data) > maxPackageFile {
			return nil, fmt.Errorf("entry %q: larger than %d bytes", h.Name, maxPackageFile)
		}
		kept += len(data)
		if kept > maxPackageKept {
			return nil, fmt.Errorf("package larger than %d bytes", maxPackageKept)
		}
		if rest == "package.json" {
			manifest = data
			continue
		}
		files = append(files, packageFile{rest, data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return newRawPackage(manifest, files)
}

// newRawPackage decodes the manifest and drops the index files.
func newRawPackage(manifest []byte, files []packageFile) (*rawPackage, error) {
	if manifest == nil {
		return nil, errors.New("no package.json")
	}
	var info PackageInfo
	if err := json.Unmarshal(manifest, &info); err != nil {
		return nil, fmt.Errorf("package.json: %w", err)
	}
	if info.Name == "" {
		return nil, errors.New("package.json: no name")
	}
	kept := files[:0]
	for _, f := range files {
		if strings.HasPrefix(f.name, ".") { // .index.json and the like
			continue
		}
		kept = append(kept, f)
	}
	return &rawPackage{info: info, files: kept}, nil
}

// resourceHeader is the identity of a resource, decoded before the rest.
type resourceHeader struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	URL          string `json:"url"`
	Version      string `json:"version"`
}

// conformanceTypes are the resource types kept from packages; other
// resources at a package's root (examples in older packages) are skipped.
var conformanceTypes = map[string]bool{
	"StructureDefinition":     true,
	"ValueSet":                true,
	"CodeSystem":              true,
	"SearchParameter":         true,
	"ImplementationGuide":     true,
	"CapabilityStatement":     true,
	"OperationDefinition":     true,
	"CompartmentDefinition":   true,
	"ConceptMap":              true,
	"NamingSystem":            true,
	"StructureMap":            true,
	"GraphDefinition":         true,
	"MessageDefinition":       true,
	"TerminologyCapabilities": true,
	"ExampleScenario":         true,
}

// readHeader decodes the identity of a resource. It reports false for
// JSON that is not a resource (no resourceType).
func readHeader(data []byte) (resourceHeader, bool) {
	var h resourceHeader
	if err := json.Unmarshal(data, &h); err != nil || h.ResourceType == "" {
		return h, false
	}
	return h, true
}

// versionCompatible reports whether the version a package provides
// satisfies the version a dependency asks for: the same version, the same
// major.minor, or a wildcard such as "1.0.x" or "current".
func versionCompatible(want, have string) bool {
	want = strings.TrimSpace(want)
	if want == "" || want == have || want == "current" || want == "dev" || want == "latest" {
		return true
	}
	w := strings.Split(strings.TrimPrefix(strings.TrimPrefix(want, "^"), "~"), ".")
	h := strings.Split(have, ".")
	if len(w) < 2 || len(h) < 2 {
		return false
	}
	return w[0] == h[0] && w[1] == h[1]
}
