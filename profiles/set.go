package profiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// SetOptions configures NewSet.
type SetOptions struct {
	// ProfileURL is the canonical base of the national StructureDefinitions,
	// e.g. "https://fhir.health.example/StructureDefinition". It replaces
	// the placeholders in the national pack (see NewSet).
	ProfileURL string
	// National holds the national pack: *.json conformance resources, at
	// any depth except in folders named example, examples or starting
	// with a dot. Nil means no national pack.
	National fs.FS
	// Packages are paths of extra FHIR packages: npm-format .tgz archives
	// (entries under package/), folders holding package/package.json, or
	// folders holding package.json and the resources directly.
	Packages []string
}

// Set is an indexed collection of conformance resources: the embedded R4
// core definitions, the national pack and extra FHIR packages. A Set is
// immutable once NewSet returns and is safe for concurrent use. Values
// returned by pointer are shared and must be treated as read-only.
type Set struct {
	// Warnings lists the problems NewSet tolerated: missing package
	// dependencies, canonical URLs defined twice (the later wins), files
	// that are not conformance resources.
	Warnings []string

	sds       map[string]*StructureDefinition // loaded (not core), by URL
	types     map[string]*StructureDefinition // loaded specializations, by type
	valueSets map[string]*ValueSet            // loaded, by URL
	codeSys   map[string]*CodeSystem          // loaded, by URL
	list      []*StructureDefinition          // core, then loaded

	raw      map[string]map[string][]byte // resourceType → id → JSON
	rawLists map[string][][]byte          // resourceType → JSON, in load order
	packages []PackageInfo
}

// loaded is one conformance resource read from the national pack or a
// package.
type loaded struct {
	header  resourceHeader
	source  string // for messages: "national pack x.json", "package p#v x.json"
	pkg     int    // 0 for the national pack, else 1 + the package's index
	data    []byte
	dropped bool // replaced by a later resource with the same identity

	sd *StructureDefinition
	vs *ValueSet
	cs *CodeSystem
}

// Placeholders replaced in the files of the national pack.
const (
	// PlaceholderProfileURL stands for SetOptions.ProfileURL without a
	// trailing slash.
	PlaceholderProfileURL = "{{profile_url}}"
	// PlaceholderCanonical stands for SetOptions.ProfileURL without a
	// trailing "/StructureDefinition".
	PlaceholderCanonical = "{{canonical}}"
)

// NewSet loads the embedded core definitions, the national pack and the
// packages of opts, generates the snapshots that StructureDefinitions
// lack, and indexes the result.
//
// In the files of the national pack, the text {{profile_url}} is replaced
// by opts.ProfileURL (a trailing slash removed) and {{canonical}} by
// opts.ProfileURL with a trailing "/StructureDefinition" removed, both
// JSON-escaped, before the files are decoded.
//
// The national pack and packages may define new canonical URLs but not
// redefine those of the core definitions: that is an error. When two of
// them define the same canonical URL (or the same resourceType and id),
// the one loaded later wins (packages load in order, after the national
// pack) and a warning is recorded. A package dependency on
// hl7.fhir.r4.core is satisfied by the embedded core; other dependencies
// must be among opts.Packages (same version or same major.minor),
// otherwise a warning names them. A StructureDefinition that cannot get a
// snapshot (see generateSnapshot) is an error.
func NewSet(opts SetOptions) (*Set, error) {
	core, err := loadStructureDefinitions()
	if err != nil {
		return nil, err
	}
	terms, err := loadTerminology()
	if err != nil {
		return nil, err
	}
	s := &Set{
		sds:       make(map[string]*StructureDefinition),
		types:     make(map[string]*StructureDefinition),
		valueSets: make(map[string]*ValueSet),
		codeSys:   make(map[string]*CodeSystem),
		raw:       make(map[string]map[string][]byte),
		rawLists:  make(map[string][][]byte),
	}
	var all []*loaded
	if opts.National != nil {
		list, err := s.readNational(opts.National, opts.ProfileURL)
		if err != nil {
			return nil, err
		}
		all = append(all, list...)
	}
	var pkgs []*rawPackage
	for _, p := range opts.Packages {
		pkg, err := readPackage(p)
		if err != nil {
			return nil, fmt.Errorf("profiles: %w", err)
		}
		pkgs = append(pkgs, pkg)
		s.packages = append(s.packages, pkg.info)
		source := "package " + pkg.info.Name + "#" + pkg.info.Version + " "
		for _, f := range pkg.files {
			all = append(all, &loaded{source: source + f.name, pkg: len(pkgs), data: f.data})
		}
	}
	s.checkDependencies(pkgs)
	if err := decodeLoaded(all); err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(l *loaded) bool {
		if l.header.ResourceType == "" || !conformanceTypes[l.header.ResourceType] {
			if l.pkg == 0 { // packages may hold other JSON and examples
				s.Warnings = append(s.Warnings, l.source+": not a FHIR conformance resource, skipped")
			}
			return true
		}
		return false
	})
	if err := s.index(all, core, terms); err != nil {
		return nil, err
	}
	if err := s.generateSnapshots(); err != nil {
		return nil, err
	}
	s.list = make([]*StructureDefinition, 0, len(core.list)+len(s.sds))
	s.list = append(s.list, core.list...)
	for _, l := range all {
		if !l.dropped && l.sd != nil {
			s.list = append(s.list, l.sd)
		}
	}
	return s, nil
}

// unknownPlaceholder matches a placeholder other than the known ones, once
// those are replaced.
var unknownPlaceholder = regexp.MustCompile(`\{\{[A-Za-z_]+\}\}`)

// readNational reads the *.json files of the national pack, replacing the
// placeholders.
func (s *Set) readNational(fsys fs.FS, profileURL string) ([]*loaded, error) {
	profileURL = strings.TrimRight(profileURL, "/")
	canonical := strings.TrimSuffix(profileURL, "/StructureDefinition")
	repl := func(data []byte, placeholder, value string) []byte {
		if !bytes.Contains(data, []byte(placeholder)) {
			return data
		}
		q, _ := json.Marshal(value) // a string always encodes
		return bytes.ReplaceAll(data, []byte(placeholder), q[1:len(q)-1])
	}
	var list []*loaded
	n := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (d.Name() == "example" || d.Name() == "examples" || strings.HasPrefix(d.Name(), ".")) {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		if n++; n > maxPackageEntries {
			return fmt.Errorf("more than %d files", maxPackageEntries)
		}
		data, err := readCapped(fsys, p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte("{{")) {
			if profileURL == "" {
				return fmt.Errorf("%s: placeholders need a profile URL", p)
			}
			data = repl(data, PlaceholderProfileURL, profileURL)
			data = repl(data, PlaceholderCanonical, canonical)
			if m := unknownPlaceholder.Find(data); m != nil {
				s.Warnings = append(s.Warnings, fmt.Sprintf("national pack %s: unknown placeholder %s left as it is", p, m))
			}
		}
		list = append(list, &loaded{source: "national pack " + p, data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profiles: national pack: %w", err)
	}
	return list, nil
}

// checkDependencies records a warning for each dependency of a package
// that neither the embedded core nor another package satisfies, and for
// packages made for another FHIR version than R4.
func (s *Set) checkDependencies(pkgs []*rawPackage) {
	for _, p := range pkgs {
		if v := p.info.FHIRVersions; len(v) > 0 && !slices.ContainsFunc(v, func(v string) bool { return strings.HasPrefix(v, "4.0") }) {
			s.Warnings = append(s.Warnings, fmt.Sprintf("package %s#%s is for FHIR %s; the server implements 4.0.1",
				p.info.Name, p.info.Version, strings.Join(v, ", ")))
		}
		names := make([]string, 0, len(p.info.Dependencies))
		for name := range p.info.Dependencies {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			want := p.info.Dependencies[name]
			if name == corePackage {
				if !versionCompatible(want, "4.0.1") {
					s.Warnings = append(s.Warnings, fmt.Sprintf("package %s#%s depends on %s#%s; the embedded core is 4.0.1",
						p.info.Name, p.info.Version, name, want))
				}
				continue
			}
			found := ""
			for _, q := range pkgs {
				if q.info.Name == name {
					found = q.info.Version
					if versionCompatible(want, q.info.Version) {
						break
					}
				}
			}
			switch {
			case found == "":
				s.Warnings = append(s.Warnings, fmt.Sprintf("package %s#%s: dependency %s#%s not loaded",
					p.info.Name, p.info.Version, name, want))
			case !versionCompatible(want, found):
				s.Warnings = append(s.Warnings, fmt.Sprintf("package %s#%s: dependency %s#%s not loaded (%s is)",
					p.info.Name, p.info.Version, name, want, found))
			}
		}
	}
}

// decodeLoaded decodes the headers of list, and the StructureDefinitions,
// ValueSets and CodeSystems in full, in parallel. Invalid JSON is an error
// in the national pack; in packages it is skipped like other non-resource
// files.
func decodeLoaded(list []*loaded) error {
	errs := make([]error, len(list))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(list)))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(list); i += workers {
				l := list[i]
				if sniffType(l.data) == "StructureDefinition" {
					// Most of a package: decode it once, not header first.
					sd := new(StructureDefinition)
					if err := json.Unmarshal(l.data, sd); err == nil && sd.ResourceType == "StructureDefinition" {
						l.sd = sd
						l.header = resourceHeader{sd.ResourceType, sd.ID, sd.URL, sd.Version}
						continue
					}
				}
				h, ok := readHeader(l.data)
				if !ok {
					if l.pkg == 0 && !json.Valid(l.data) {
						errs[i] = fmt.Errorf("profiles: %s: invalid JSON", l.source)
					}
					continue
				}
				l.header = h
				if !conformanceTypes[h.ResourceType] {
					continue
				}
				var err error
				switch h.ResourceType {
				case "StructureDefinition":
					l.sd = new(StructureDefinition)
					err = json.Unmarshal(l.data, l.sd)
				case "ValueSet":
					l.vs = new(ValueSet)
					err = json.Unmarshal(l.data, l.vs)
				case "CodeSystem":
					l.cs = new(CodeSystem)
					if err = json.Unmarshal(l.data, l.cs); err == nil {
						l.cs.index()
					}
				}
				if err != nil {
					errs[i] = fmt.Errorf("profiles: %s: %w", l.source, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sniffType returns the value of the first "resourceType" key in data,
// found by a plain text search; it is a guess that decoding confirms.
func sniffType(data []byte) string {
	const key = `"resourceType"`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(data[i+len(key):], " \t\r\n")
	rest, ok := bytes.CutPrefix(rest, []byte(":"))
	if !ok {
		return ""
	}
	rest = bytes.TrimLeft(rest, " \t\r\n")
	rest, ok = bytes.CutPrefix(rest, []byte(`"`))
	if !ok {
		return ""
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return ""
	}
	return string(rest[:end])
}

// index fills the maps of s from list, checking the canonical URLs
// against the core definitions.
func (s *Set) index(list []*loaded, core *sdSet, terms *termSet) error {
	var errs []error
	byCanonical := make(map[string]*loaded)
	byID := make(map[string]*loaded)
	for _, l := range list {
		h := l.header
		if h.URL != "" {
			inCore := false
			switch h.ResourceType {
			case "StructureDefinition":
				_, inCore = core.byURL[h.URL]
			case "ValueSet":
				_, inCore = terms.valueSets[h.URL]
			case "CodeSystem":
				_, inCore = terms.codeSystems[h.URL]
			}
			if inCore {
				errs = append(errs, fmt.Errorf("profiles: %s: %s %s redefines a core definition", l.source, h.ResourceType, h.URL))
				continue
			}
			key := h.ResourceType + " " + h.URL
			if prev, ok := byCanonical[key]; ok && !prev.dropped {
				if h.ResourceType == "ImplementationGuide" && prev.pkg == l.pkg {
					// Packages carry their ImplementationGuide twice
					// (ImplementationGuide-x.json and ig-r4.json).
					l.dropped = true
					continue
				}
				prev.dropped = true
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s %s also defined by %s; the later wins",
					l.source, h.ResourceType, h.URL, prev.source))
			}
			byCanonical[key] = l
		}
		if h.ID != "" {
			key := h.ResourceType + "/" + h.ID
			if prev, ok := byID[key]; ok && !prev.dropped {
				prev.dropped = true
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s also read from %s; the later wins",
					l.source, key, prev.source))
			}
			byID[key] = l
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, l := range list {
		if l.dropped {
			continue
		}
		if l.sd != nil && l.sd.URL == "" {
			l.dropped = true
			s.Warnings = append(s.Warnings, l.source+": StructureDefinition without url, skipped")
			continue
		}
		h := l.header
		if h.ID != "" {
			m := s.raw[h.ResourceType]
			if m == nil {
				m = make(map[string][]byte)
				s.raw[h.ResourceType] = m
			}
			m[h.ID] = l.data
		}
		s.rawLists[h.ResourceType] = append(s.rawLists[h.ResourceType], l.data)
		switch {
		case l.sd != nil:
			s.sds[l.sd.URL] = l.sd
			if l.sd.Derivation == "specialization" {
				if _, inCore := core.byType[l.sd.Type]; !inCore {
					s.types[l.sd.Type] = l.sd
				}
			}
		case l.vs != nil && l.vs.URL != "":
			s.valueSets[l.vs.URL] = l.vs
		case l.cs != nil && l.cs.URL != "":
			s.codeSys[l.cs.URL] = l.cs
		}
	}
	return nil
}

// splitCanonical splits "url|version".
func splitCanonical(canonical string) (url, version string) {
	url, version, _ = strings.Cut(canonical, "|")
	return url, version
}

// versionMatches reports whether a loaded resource's version satisfies
// the version asked for; an empty version on either side matches.
func versionMatches(want, have string) bool {
	return want == "" || have == "" || want == have
}

// StructureDefinition returns the StructureDefinition with the given
// canonical URL, which may carry a |version suffix. For a definition from
// the national pack or a package, a version that differs from its
// version is not found; the version of a core definition is ignored (one
// version, 4.0.1, is embedded).
func (s *Set) StructureDefinition(canonical string) (*StructureDefinition, bool) {
	url, version := splitCanonical(canonical)
	if sd, ok := s.sds[url]; ok {
		if !versionMatches(version, sd.Version) {
			return nil, false
		}
		return sd, true
	}
	return StructureDefinitionByURL(url)
}

// TypeDefinition returns the StructureDefinition that defines the named
// type: a core type ("Patient", "HumanName", "string") or a type a
// package specializes (a logical model). It never returns a constraint
// (a profile).
func (s *Set) TypeDefinition(name string) (*StructureDefinition, bool) {
	if sd, ok := TypeDefinition(name); ok {
		return sd, true
	}
	sd, ok := s.types[name]
	return sd, ok
}

// ValueSet returns the ValueSet with the given canonical URL (|version
// handled as in StructureDefinition).
func (s *Set) ValueSet(canonical string) (*ValueSet, bool) {
	url, version := splitCanonical(canonical)
	if vs, ok := s.valueSets[url]; ok {
		if !versionMatches(version, vs.Version) {
			return nil, false
		}
		return vs, true
	}
	return ValueSetByURL(url)
}

// CodeSystem returns the CodeSystem with the given canonical URL (|version
// handled as in StructureDefinition).
func (s *Set) CodeSystem(canonical string) (*CodeSystem, bool) {
	url, version := splitCanonical(canonical)
	if cs, ok := s.codeSys[url]; ok {
		if !versionMatches(version, cs.Version) {
			return nil, false
		}
		return cs, true
	}
	return CodeSystemByURL(url)
}

// StructureDefinitions returns all StructureDefinitions of the Set: the
// core ones, then those of the national pack and packages in load order.
// The caller owns the slice but not the StructureDefinitions.
func (s *Set) StructureDefinitions() []*StructureDefinition {
	return slices.Clone(s.list)
}

// Resource returns the FHIR JSON of a conformance resource loaded from
// the national pack or a package, by resourceType and id, e.g.
// ("StructureDefinition", "us-core-patient"). The JSON is the file as
// read (national placeholders replaced); a snapshot generated by the Set
// is not part of it. The embedded core definitions are trimmed and are
// not served: Resource reports false for them. The caller must not
// modify the returned bytes.
func (s *Set) Resource(resourceType, id string) ([]byte, bool) {
	data, ok := s.raw[resourceType][id]
	return data, ok
}

// Resources returns the FHIR JSON of every loaded conformance resource of
// the given type (national pack and packages, not core), in load order.
// The caller owns the slice but must not modify the bytes.
func (s *Set) Resources(resourceType string) [][]byte {
	return slices.Clone(s.rawLists[resourceType])
}

// Packages describes the packages loaded, in order.
func (s *Set) Packages() []PackageInfo {
	return slices.Clone(s.packages)
}
