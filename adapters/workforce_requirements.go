package adapters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Concept is one concept of a CodeSystem: the pack's certification-type
// CodeSystem is handed to the workforce code as data (the caller reads
// profiles/national/CodeSystem-certification-type.json), so adapters does
// not import the profiles.
type Concept struct {
	Code    string `json:"code"`
	Display string `json:"display"`
}

// ConceptsOf reads the concepts of a CodeSystem resource (top level only:
// the national CodeSystems are flat).
func ConceptsOf(codeSystem []byte) ([]Concept, error) {
	var cs struct {
		ResourceType string    `json:"resourceType"`
		Concept      []Concept `json:"concept"`
	}
	if err := json.Unmarshal(codeSystem, &cs); err != nil {
		return nil, fmt.Errorf("adapters: read a CodeSystem: %w", err)
	}
	if cs.ResourceType != "CodeSystem" {
		return nil, fmt.Errorf("adapters: read a CodeSystem: resourceType is %q", cs.ResourceType)
	}
	return cs.Concept, nil
}

// Requirements is the role → required certifications table of the
// workforce compliance score, with the names it resolves certifications
// through. Build it with DefaultRequirements or LoadRequirements, then give
// it the certification-type CodeSystem with WithCertificationTypes. It is
// read-only once built and safe for concurrent use.
type Requirements struct {
	exact   map[string][][]string // normalized role → groups of alternative certification keys
	prefix  []prefixRule          // longest first
	aliases map[string]string     // folded name → name (resolved again through the CodeSystem)
	types   map[string]Concept    // folded code or display → concept
	byCode  map[string]Concept    // code → concept
}

type prefixRule struct {
	prefix string
	groups [][]string
}

// RequirementsFile is the JSON shape of --workforce-requirements FILE. It
// replaces the built-in table as a whole:
//
//		{
//		  "aliases": {"OEUK Medical": "offshore-medical", "H2S": "h2s-awareness"},
//		  "roles": [
//		    {"names": ["offshore *", "roustabout"],
//		     "requires": [["OEUK Medical"], ["BOSIET", "FOET"], ["H2S"]]},
//		    {"names": ["onshore *", "field *"], "requires": [["H2S"]]}
//		  ]
//		}
//
//	  - roles[].names: role names, matched case-insensitively with runs of
//	    spaces, hyphens and underscores taken as one space ("Field-Operator"
//	    = "field operator"). A name ending in " *" matches every role that
//	    starts with the words before it ("offshore *" matches "offshore
//	    medic", not "offshore" alone nor "offshoremedic"). An exact name wins
//	    over a prefix; of prefixes, the longest wins. A name may appear once
//	    in the whole file.
//	  - roles[].requires: the required certifications, each an array of
//	    alternatives of which one suffices (["BOSIET", "FOET"]). Empty means
//	    the role needs the medical screening alone, as does a role no entry
//	    names.
//	  - aliases (optional): other names of a certification, name → a name or
//	    a code of the certification-type CodeSystem.
//
// Unknown fields are refused, so that a misspelt key is not silently
// ignored.
type RequirementsFile struct {
	Aliases map[string]string `json:"aliases,omitempty"`
	Roles   []RoleRequirement `json:"roles"`
}

// RoleRequirement is one entry of RequirementsFile.roles.
type RoleRequirement struct {
	Names    []string   `json:"names"`
	Requires [][]string `json:"requires"`
}

// DefaultRequirementsFile is the built-in oil-and-gas table (README
// documents it): offshore roles need an offshore medical, BOSIET or FOET,
// and H2S; onshore field roles need H2S; any other role needs the medical
// screening alone.
func DefaultRequirementsFile() RequirementsFile {
	offshore := [][]string{{"offshore-medical"}, {"bosiet", "foet"}, {"h2s-awareness"}}
	onshore := [][]string{{"h2s-awareness"}}
	return RequirementsFile{
		Aliases: map[string]string{
			"OEUK Medical":                        "offshore-medical",
			"OGUK Medical":                        "offshore-medical",
			"Offshore medical":                    "offshore-medical",
			"H2S":                                 "h2s-awareness",
			"Onshore medical":                     "onshore-medical",
			"Further Offshore Emergency Training": "foet",
			"Basic Offshore Safety Induction and Emergency Training": "bosiet",
		},
		Roles: []RoleRequirement{
			{Names: []string{"offshore *", "offshore worker", "driller", "assistant driller", "derrickman", "roughneck",
				"roustabout", "toolpusher", "barge engineer", "ballast control operator", "offshore installation manager",
				"drilling crew", "mud logger"}, Requires: offshore},
			{Names: []string{"onshore *", "field *", "pipeline *", "wellsite *", "well site *", "plant operator",
				"onshore worker"}, Requires: onshore},
		},
	}
}

// DefaultRequirements is the built-in table, ready to use (without the
// CodeSystem: call WithCertificationTypes).
func DefaultRequirements() *Requirements {
	r, err := DefaultRequirementsFile().compile()
	if err != nil {
		panic("adapters: the built-in workforce requirements are invalid: " + err.Error())
	}
	return r
}

// LoadRequirements reads a RequirementsFile (the bytes of
// --workforce-requirements FILE) and checks it: every error names the
// place (roles[1].requires[0][2]: …).
func LoadRequirements(data []byte) (*Requirements, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f RequirementsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("workforce requirements: %w", err)
	}
	if dec.More() {
		return nil, errors.New("workforce requirements: more than one JSON value")
	}
	r, err := f.compile()
	if err != nil {
		return nil, fmt.Errorf("workforce requirements: %w", err)
	}
	return r, nil
}

func (f RequirementsFile) compile() (*Requirements, error) {
	if f.Roles == nil {
		return nil, errors.New(`"roles" is missing (an empty table is written "roles": [])`)
	}
	r := &Requirements{exact: map[string][][]string{}, aliases: map[string]string{}}
	for name, to := range f.Aliases {
		k := fold(name)
		if k == "" || fold(to) == "" {
			return nil, fmt.Errorf("aliases: %q → %q: a blank name", name, to)
		}
		if _, dup := r.aliases[k]; dup {
			return nil, fmt.Errorf("aliases: %q is given twice (names match case-insensitively)", name)
		}
		r.aliases[k] = to
	}
	seen := map[string]string{}
	for i, role := range f.Roles {
		at := fmt.Sprintf("roles[%d]", i)
		if len(role.Names) == 0 {
			return nil, fmt.Errorf("%s.names: at least one role name is needed", at)
		}
		groups := make([][]string, 0, len(role.Requires))
		for j, alts := range role.Requires {
			if len(alts) == 0 {
				return nil, fmt.Errorf("%s.requires[%d]: an empty list of alternatives", at, j)
			}
			g := make([]string, 0, len(alts))
			for k, a := range alts {
				if fold(a) == "" {
					return nil, fmt.Errorf("%s.requires[%d][%d]: a blank certification name", at, j, k)
				}
				g = append(g, a)
			}
			groups = append(groups, g)
		}
		for j, n := range role.Names {
			key := roleKey(n)
			where := fmt.Sprintf("%s.names[%d]", at, j)
			if key == "" || key == "*" {
				return nil, fmt.Errorf("%s: a blank role name", where)
			}
			if prev, dup := seen[key]; dup {
				return nil, fmt.Errorf("%s: %q is also %s", where, n, prev)
			}
			seen[key] = where
			if p, ok := strings.CutSuffix(key, " *"); ok {
				if strings.Contains(p, "*") {
					return nil, fmt.Errorf("%s: %q: '*' may only end a name, after a space", where, n)
				}
				r.prefix = append(r.prefix, prefixRule{prefix: p + " ", groups: groups})
				continue
			}
			if strings.Contains(key, "*") {
				return nil, fmt.Errorf("%s: %q: '*' may only end a name, after a space", where, n)
			}
			r.exact[key] = groups
		}
	}
	sort.SliceStable(r.prefix, func(i, j int) bool { return len(r.prefix[i].prefix) > len(r.prefix[j].prefix) })
	return r, nil
}

// WithCertificationTypes returns a copy of r that also resolves names
// through the certification-type CodeSystem: a name equal (case-insensitively)
// to a concept's code or display is that code.
func (r *Requirements) WithCertificationTypes(concepts []Concept) *Requirements {
	c := *r
	c.types = make(map[string]Concept, 2*len(concepts))
	c.byCode = make(map[string]Concept, len(concepts))
	for _, k := range concepts {
		c.byCode[k.Code] = k
		c.types[fold(k.Code)] = k
		if d := fold(k.Display); d != "" {
			if _, taken := c.types[d]; !taken {
				c.types[d] = k
			}
		}
	}
	return &c
}

// Required returns the certifications a role needs: groups of
// alternatives, as written in the table (nil for a role not in it).
func (r *Requirements) Required(role string) [][]string {
	key := roleKey(role)
	if g, ok := r.exact[key]; ok {
		return g
	}
	for _, p := range r.prefix {
		if strings.HasPrefix(key, p.prefix) {
			return p.groups
		}
	}
	return nil
}

// CertificationKey is the identity under which a certification name is
// compared: the certification-type code when the name (or its alias) is a
// code or display there, else the name case-folded with its runs of
// white space made one space.
func (r *Requirements) CertificationKey(name string) string {
	k := fold(name)
	if c, ok := r.types[k]; ok {
		return c.Code
	}
	if to, ok := r.aliases[k]; ok {
		k = fold(to)
		if c, ok := r.types[k]; ok {
			return c.Code
		}
	}
	return k
}

// CertificationType is the concept a name resolves to, if the CodeSystem
// knows it.
func (r *Requirements) CertificationType(name string) (Concept, bool) {
	c, ok := r.byCode[r.CertificationKey(name)]
	return c, ok
}

// fold is the case-insensitive form of a name: trimmed, case-folded, runs
// of white space made one space.
func fold(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// roleKey folds a role name and also takes hyphens and underscores as
// spaces, so job-role codes ("production-operator") match their displays.
func roleKey(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return unicode.IsSpace(r) || r == '-' || r == '_'
	}), " ")
}
