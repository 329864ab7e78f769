package profiles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const (
	basePkgDir = "testdata/packages/example.base" // package/package.json layout
	depPkgDir  = "testdata/packages/example.dep"  // package.json at the root
)

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name     string
	body     string
	typeflag byte
	size     int64 // header size when body is not written (0: len(body))
}

// buildTgz returns a gzip-compressed tar archive of entries.
func buildTgz(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typeflag}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeSymlink {
			h.Linkname, h.Size = "/etc/passwd", 0
		}
		if h.Typeflag == tar.TypeDir {
			h.Size = 0
		}
		if e.size != 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.size != 0 {
			// An entry whose header claims more than is written: stop here.
			tw.Flush()
			break
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// folderEntries returns the files under dir as archive entries named
// prefix + relative path, sub-folders included.
func folderEntries(t testing.TB, dir, prefix string) []tarEntry {
	t.Helper()
	var out []tarEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, tarEntry{name: prefix + filepath.ToSlash(rel), body: string(data)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeTgz writes an archive of entries to a temporary file.
func writeTgz(t *testing.T, name string, entries []tarEntry) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, buildTgz(t, entries), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// withVersion rewrites the version in the package.json of entries.
func withVersion(entries []tarEntry, from, to string) []tarEntry {
	out := make([]tarEntry, len(entries))
	for i, e := range entries {
		if strings.HasSuffix(e.name, "package.json") {
			e.body = strings.Replace(e.body, `"version": "`+from+`"`, `"version": "`+to+`"`, 1)
		}
		out[i] = e
	}
	return out
}

func TestLoadPackages(t *testing.T) {
	baseEntries := folderEntries(t, filepath.Join(basePkgDir, "package"), "package/")
	baseTgz := writeTgz(t, "example.base-1.0.0.tgz", baseEntries)
	base11Tgz := writeTgz(t, "example.base-1.1.0.tgz", withVersion(baseEntries, "1.0.0", "1.1.0"))
	base102Tgz := writeTgz(t, "example.base-1.0.2.tgz", withVersion(baseEntries, "1.0.0", "1.0.2"))
	depTgz := writeTgz(t, "example.dep.tgz", folderEntries(t, depPkgDir, "package/"))

	tests := []struct {
		name     string
		packages []string
		wantWarn string // "" means no warning
		complete bool   // the dependency is loaded
	}{
		{"folders", []string{basePkgDir, depPkgDir}, "", true},
		{"folders, dependency last", []string{depPkgDir, basePkgDir}, "", true},
		{"tgz", []string{baseTgz, depTgz}, "", true},
		{"tgz and folder", []string{baseTgz, depPkgDir}, "", true},
		{"same major.minor", []string{base102Tgz, depPkgDir}, "", true},
		{"missing dependency", []string{depPkgDir}, "dependency example.base#1.0.0 not loaded", false},
		{"incompatible dependency", []string{base11Tgz, depPkgDir}, "dependency example.base#1.0.0 not loaded (1.1.0 is)", true},
		{"loaded twice", []string{basePkgDir, baseTgz, depPkgDir}, "the later wins", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Without its dependency, dep-patient still loads: its
			// snapshot does not need the extension's definition.
			s, err := NewSet(SetOptions{Packages: tt.packages})
			if err != nil {
				t.Fatal(err)
			}
			warnings := strings.Join(s.Warnings, "\n")
			if tt.wantWarn == "" && warnings != "" || !strings.Contains(warnings, tt.wantWarn) {
				t.Errorf("Warnings = %q, want %q", s.Warnings, tt.wantWarn)
			}
			if got := len(s.Packages()); got != len(tt.packages) {
				t.Errorf("Packages() = %d, want %d", got, len(tt.packages))
			}

			sd, ok := s.StructureDefinition("http://example.org/fhir/dep/StructureDefinition/dep-patient|2.1.0")
			if !ok || !sd.SnapshotGenerated {
				t.Fatalf("dep-patient = %v, %v", sd, ok)
			}
			color := findID(sd, "Patient.extension:color")
			if color == nil || len(color.Type) != 1 || color.Type[0].Profile[0] != "http://example.org/fhir/base/StructureDefinition/favourite-color" || !color.MustSupport {
				t.Errorf("Patient.extension:color = %+v", color)
			}
			if bd, _ := sd.Element("Patient.birthDate"); bd.Min != 1 {
				t.Errorf("Patient.birthDate min = %d, want 1", bd.Min)
			}
			if n := len(s.Resources("SearchParameter")); n != 1 {
				t.Errorf("Resources(SearchParameter) = %d, want 1", n)
			}
			if _, ok := s.Resource("Patient", "example"); ok {
				t.Error("an example was loaded")
			}
			if !tt.complete {
				if _, ok := s.ValueSet("http://example.org/fhir/base/ValueSet/color"); ok {
					t.Error("ValueSet color found without its package")
				}
				return
			}
			ext, ok := s.StructureDefinition("http://example.org/fhir/base/StructureDefinition/favourite-color")
			if !ok || !ext.SnapshotGenerated || len(ext.Context) != 1 || ext.Context[0].Expression != "Patient" {
				t.Fatalf("favourite-color = %+v, %v", ext, ok)
			}
			if v, _ := ext.Element("Extension.value[x]"); v.Min != 1 || len(v.Type) != 1 || v.Type[0].Code != "code" || v.Binding.Strength != "required" {
				t.Errorf("favourite-color value[x] = %+v", v)
			}
			if u, _ := ext.Element("Extension.url"); string(u.Fixed) != `"http://example.org/fhir/base/StructureDefinition/favourite-color"` {
				t.Errorf("favourite-color url fixed = %s", u.Fixed)
			}
			cs, ok := s.CodeSystem("http://example.org/fhir/base/CodeSystem/color|1.0.0")
			if !ok {
				t.Fatal("CodeSystem color not found")
			}
			if _, ok := cs.Lookup("navy"); !ok {
				t.Error("navy not in CodeSystem color")
			}
			if raw, ok := s.Resource("ValueSet", "color"); !ok || !bytes.Contains(raw, []byte(`"id": "color"`)) {
				t.Errorf("Resource(ValueSet, color) = %s, %v", raw, ok)
			}
		})
	}
}

func TestReadTgz(t *testing.T) {
	manifest := tarEntry{name: "package/package.json", body: `{"name":"p","version":"1.0.0"}`}
	vs := tarEntry{name: "package/ValueSet-a.json", body: `{"resourceType":"ValueSet","id":"a"}`}
	tests := []struct {
		name      string
		entries   []tarEntry
		raw       []byte // used instead of entries when set
		wantErr   string
		wantFiles []string
	}{
		{"minimal", []tarEntry{manifest, vs}, nil, "", []string{"ValueSet-a.json"}},
		{"skips other folders and files", []tarEntry{
			manifest, vs,
			{name: "package/example/Patient-x.json", body: "{}"},
			{name: "package/other/spec.internals", body: "{}"},
			{name: "package/.index.json", body: "{}"},
			{name: "package/readme.md", body: "#"},
			{name: "other/x.json", body: "{}"},
			{name: "package/link.json", typeflag: tar.TypeSymlink},
			{name: "package/dir.json", typeflag: tar.TypeDir},
		}, nil, "", []string{"ValueSet-a.json"}},
		{"no manifest", []tarEntry{vs}, nil, "no package.json", nil},
		{"bad manifest", []tarEntry{{name: "package/package.json", body: "{"}}, nil, "package.json", nil},
		{"no name", []tarEntry{{name: "package/package.json", body: "{}"}}, nil, "no name", nil},
		{"traversal", []tarEntry{manifest, {name: "package/../../etc/x.json", body: "{}"}}, nil, "unsafe path", nil},
		{"absolute", []tarEntry{manifest, {name: "/package/x.json", body: "{}"}}, nil, "unsafe path", nil},
		{"duplicate", []tarEntry{manifest, vs, vs}, nil, "duplicate", nil},
		{"oversized entry", []tarEntry{manifest, {name: "package/big.json", size: maxPackageFile + 1}}, nil, "larger than", nil},
		{"not gzip", nil, []byte("PK\x03\x04 not a tgz"), "not a gzip archive", nil},
		{"truncated", nil, buildTgz(t, []tarEntry{manifest, vs})[:40], "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.raw
			if data == nil {
				data = buildTgz(t, tt.entries)
			}
			pkg, err := readTgz(bytes.NewReader(data))
			if tt.wantFiles == nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range pkg.files {
				names = append(names, f.name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantFiles, ",") {
				t.Errorf("files = %v, want %v", names, tt.wantFiles)
			}
		})
	}
}

func TestPackageForAnotherFHIRVersion(t *testing.T) {
	p := writeTgz(t, "r5.tgz", []tarEntry{
		{name: "package/package.json", body: `{"name":"r5.pkg","version":"1.0.0","fhirVersions":["5.0.0"],"dependencies":{"hl7.fhir.r5.core":"5.0.0"}}`},
	})
	s, err := NewSet(SetOptions{Packages: []string{p}})
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(s.Warnings, "\n")
	for _, want := range []string{"is for FHIR 5.0.0", "dependency hl7.fhir.r5.core#5.0.0 not loaded"} {
		if !strings.Contains(w, want) {
			t.Errorf("Warnings = %q, want %q", s.Warnings, want)
		}
	}
}

func TestReadFolderSkipsSymlinks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"p","version":"1.0.0"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "ValueSet-a.json"), []byte(`{"resourceType":"ValueSet","id":"a","url":"http://x.example/a"}`), 0o644)
	target := filepath.Join(t.TempDir(), "secret.json")
	os.WriteFile(target, []byte(`{"resourceType":"ValueSet","id":"s","url":"http://x.example/s"}`), 0o644)
	if err := os.Symlink(target, filepath.Join(dir, "ValueSet-s.json")); err != nil && runtime.GOOS != "windows" {
		t.Fatal(err)
	}
	s, err := NewSet(SetOptions{Packages: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.ValueSet("http://x.example/a"); !ok {
		t.Error("ValueSet a not loaded")
	}
	if _, ok := s.ValueSet("http://x.example/s"); ok {
		t.Error("ValueSet behind a symbolic link loaded")
	}
}

func TestLoadPackageErrors(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		wantErr string
	}{
		{"missing", "testdata/packages/nope", "no such file"},
		{"folder without manifest", "testdata/national", "no package.json"},
		{"redefines core", "", "redefines a core definition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.path
			if p == "" {
				p = writeTgz(t, "core.tgz", []tarEntry{
					{name: "package/package.json", body: `{"name":"p","version":"1.0.0"}`},
					{name: "package/SD.json", body: `{"resourceType":"StructureDefinition","id":"Patient","url":"http://hl7.org/fhir/StructureDefinition/Patient"}`},
				})
			}
			_, err := NewSet(SetOptions{Packages: []string{p}})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestVersionCompatible(t *testing.T) {
	tests := []struct {
		want, have string
		ok         bool
	}{
		{"1.0.0", "1.0.0", true},
		{"1.0.0", "1.0.3", true},
		{"1.0.x", "1.0.3", true},
		{"1.0.0", "1.1.0", false},
		{"2.0.0", "1.0.0", false},
		{"current", "0.1.0", true},
		{"4.0.1", "4.0.1", true},
		{"1", "1.0.0", false},
	}
	for _, tt := range tests {
		if got := versionCompatible(tt.want, tt.have); got != tt.ok {
			t.Errorf("versionCompatible(%q, %q) = %v, want %v", tt.want, tt.have, got, tt.ok)
		}
	}
}

func FuzzReadPackage(f *testing.F) {
	manifest := tarEntry{name: "package/package.json", body: `{"name":"p","version":"1.0.0","dependencies":{"q":"1.0.0"}}`}
	f.Add(buildTgz(f, []tarEntry{manifest, {name: "package/ValueSet-a.json", body: `{"resourceType":"ValueSet","id":"a"}`}}))
	f.Add(buildTgz(f, []tarEntry{manifest, {name: "package/../x.json", body: "{}"}}))
	f.Add(buildTgz(f, []tarEntry{manifest, {name: "package/l.json", typeflag: tar.TypeSymlink}}))
	f.Add(buildTgz(f, folderEntries(f, filepath.Join(basePkgDir, "package"), "package/")))
	f.Add(buildTgz(f, nil))
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte("not a package"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pkg, err := readTgz(bytes.NewReader(data))
		if err != nil {
			return
		}
		if pkg.info.Name == "" {
			t.Error("package without a name")
		}
		for _, file := range pkg.files {
			if strings.Contains(file.name, "/") || !strings.HasSuffix(file.name, ".json") || strings.HasPrefix(file.name, ".") {
				t.Errorf("file %q kept", file.name)
			}
			if len(file.data) > maxPackageFile {
				t.Errorf("file %q: %d bytes", file.name, len(file.data))
			}
		}
	})
}
