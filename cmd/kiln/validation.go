package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/validation"

	"github.com/kiln-fhir/kiln/profiles"
	"github.com/kiln-fhir/kiln/profiles/national"
	"github.com/kiln-fhir/kiln/profiles/validate"
)

// validationConfig is how `kiln serve` validates against profiles.
type validationConfig struct {
	// ProfileURL is the canonical base of the national pack: the national
	// Patient profile is ProfileURL + "/Patient".
	ProfileURL string
	// Packages are extra FHIR packages (.tgz or folders) to load.
	Packages []string
	// Mode is off, base or profiles (see validation.Config).
	Mode string
	// UnknownProfile is what a meta.profile the server does not know does
	// to a write: ignore, warn or error.
	UnknownProfile string
	// UnknownExtensions is the validator's policy for extensions without a
	// definition: ignore, warning or error.
	UnknownExtensions string
	// TypeProfiles binds profiles to resource types: "national" (the
	// national pack's Patient, Encounter, Observation, Communication and
	// Appointment), "none", or a list "Type=URL,Type=URL".
	TypeProfiles string
}

// nationalTypes are the resource types the national pack profiles.
var nationalTypes = []string{"Patient", "Encounter", "Observation", "Communication", "Appointment"}

const defaultProfileURL = "https://fhir.health.example/StructureDefinition"

func (v *validationConfig) flags(fs *flag.FlagSet, env lookupEnv, str func(p *string, name, envName, def, help string)) {
	str(&v.ProfileURL, "profile-url", "KILN_PROFILE_URL", defaultProfileURL, "canonical base URL of the national profiles (meta.profile reads <profile-url>/Patient)")
	str(&v.Mode, "validation", "KILN_VALIDATION", "profiles", "validation of writes: off (structural R4 only), base (also the base StructureDefinition of the type) or profiles (also meta.profile and the type's national profile)")
	str(&v.UnknownProfile, "unknown-profile", "KILN_UNKNOWN_PROFILE", "warn", "a meta.profile the server does not know: ignore, warn (write accepted, $validate warns) or error (422)")
	str(&v.UnknownExtensions, "unknown-extensions", "KILN_UNKNOWN_EXTENSIONS", "warning", "an extension without a known definition: ignore, warning or error")
	str(&v.TypeProfiles, "type-profiles", "KILN_TYPE_PROFILES", "national", "profiles every write of a type must meet: national, none, or Type=URL,Type=URL")
	if list, ok := env("KILN_PACKAGES"); ok && list != "" {
		v.Packages = filepath.SplitList(list)
	}
	fs.Func("package", "a FHIR package to load: an npm .tgz or a folder (repeatable; env KILN_PACKAGES, "+string(os.PathListSeparator)+"-separated)", func(s string) error {
		v.Packages = append(v.Packages, s)
		return nil
	})
}

func (v *validationConfig) check() error {
	v.ProfileURL = strings.TrimRight(v.ProfileURL, "/")
	if !strings.HasPrefix(v.ProfileURL, "https://") && !strings.HasPrefix(v.ProfileURL, "http://") {
		return fmt.Errorf("--profile-url must be an http(s) URL; got %q", v.ProfileURL)
	}
	for _, c := range []struct {
		flag, val string
		allowed   []string
	}{
		{"--validation", v.Mode, []string{"off", "base", "profiles"}},
		{"--unknown-profile", v.UnknownProfile, []string{"ignore", "warn", "error"}},
		{"--unknown-extensions", v.UnknownExtensions, []string{"ignore", "warning", "error"}},
	} {
		if !slices.Contains(c.allowed, c.val) {
			return fmt.Errorf("%s: want one of %s; got %q", c.flag, strings.Join(c.allowed, ", "), c.val)
		}
	}
	_, err := v.typeProfiles()
	return err
}

// typeProfiles resolves TypeProfiles into profiles per type.
func (v *validationConfig) typeProfiles() (map[string][]string, error) {
	out := map[string][]string{}
	switch v.TypeProfiles {
	case "none", "":
		return out, nil
	case "national":
		for _, t := range nationalTypes {
			out[t] = []string{v.ProfileURL + "/" + t}
		}
		return out, nil
	}
	for item := range strings.SplitSeq(v.TypeProfiles, ",") {
		typ, url, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !profiles.IsResourceType(typ) || url == "" {
			return nil, fmt.Errorf("--type-profiles: want national, none or ResourceType=URL,…; got %q", item)
		}
		out[typ] = append(out[typ], url)
	}
	return out, nil
}

// loadProfiles loads the conformance resources (R4 core, the national
// pack, the configured packages) and a validator over them.
func loadProfiles(vc validationConfig) (*profiles.Set, *validate.Validator, error) {
	set, err := profiles.NewSet(profiles.SetOptions{ProfileURL: vc.ProfileURL, National: national.Files, Packages: vc.Packages})
	if err != nil {
		return nil, nil, err
	}
	return set, validate.New(set, validate.Options{UnknownExtensions: vc.UnknownExtensions}), nil
}

// serverValidation is the FHIR service's validation: the profiles bound
// to types must be loaded, and are compiled now rather than on the first
// write.
func (vc validationConfig) serverValidation(set *profiles.Set, v *validate.Validator) (validation.Config, error) {
	bound, err := vc.typeProfiles()
	if err != nil {
		return validation.Config{}, err
	}
	var all []string
	for typ, urls := range bound {
		for _, u := range urls {
			sd, ok := set.StructureDefinition(u)
			if !ok {
				return validation.Config{}, fmt.Errorf("--type-profiles: %s is bound to %s but is not loaded (check --profile-url and --package)", u, typ)
			}
			if sd.Type != typ {
				return validation.Config{}, fmt.Errorf("--type-profiles: %s profiles %s, not %s", u, sd.Type, typ)
			}
			all = append(all, u)
		}
	}
	if err := v.Prepare(all...); err != nil {
		return validation.Config{}, err
	}
	return validation.Config{
		Mode:           validation.Mode(vc.Mode),
		Validator:      v,
		Known:          func(url string) bool { _, ok := set.StructureDefinition(url); return ok },
		TypeProfiles:   bound,
		UnknownProfile: vc.UnknownProfile,
	}, nil
}
