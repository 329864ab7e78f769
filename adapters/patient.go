// Package adapters holds the pure mappings between the platform's JSON
// bodies and FHIR resources (DESIGN.md): no I/O, no HTTP, no store. The
// handlers in legacyapi fetch and store; the policy of what a field means
// in FHIR, and of what erasure removes, lives here.
package adapters

import (
	"encoding/json"
	"strings"
)

// NewPatient is the body of POST /patients.
type NewPatient struct {
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name"`
	Phone       string `json:"phone,omitempty"`
	DateOfBirth string `json:"date_of_birth"`
	Email       string `json:"email,omitempty"`
	Address     string `json:"address,omitempty"`
}

// Pack names the national profile pack's URLs, all derived from the
// configured profile URL (e.g. https://fhir.health.example/StructureDefinition).
type Pack struct {
	ProfileURL string
}

// Canonical is the profile URL without its trailing /StructureDefinition:
// the base of the pack's identifier systems and CodeSystems.
func (p Pack) Canonical() string {
	return strings.TrimSuffix(strings.TrimRight(p.ProfileURL, "/"), "/StructureDefinition")
}

// PatientProfile is the national Patient profile, {profile_url}/Patient.
func (p Pack) PatientProfile() string { return strings.TrimRight(p.ProfileURL, "/") + "/Patient" }

// PatientIDSystem is the platform identifier system, {canonical}/sid/patient-id.
func (p Pack) PatientIDSystem() string { return p.Canonical() + "/sid/patient-id" }

// fhirPatient is the Patient written for a new platform patient, with its
// elements in the order of the R4 definition.
type fhirPatient struct {
	ResourceType string        `json:"resourceType"`
	ID           string        `json:"id"`
	Meta         fhirMeta      `json:"meta"`
	Identifier   []fhirIdent   `json:"identifier"`
	Active       bool          `json:"active"`
	Name         []fhirName    `json:"name"`
	Telecom      []fhirContact `json:"telecom,omitempty"`
	BirthDate    string        `json:"birthDate"`
	Address      []fhirAddress `json:"address,omitempty"`
}

type fhirMeta struct {
	Profile []string `json:"profile"`
}

type fhirCoding struct {
	System string `json:"system"`
	Code   string `json:"code"`
}

type fhirConcept struct {
	Coding []fhirCoding `json:"coding"`
}

type fhirIdent struct {
	Use    string       `json:"use"`
	Type   *fhirConcept `json:"type,omitempty"`
	System string       `json:"system"`
	Value  string       `json:"value"`
}

type fhirName struct {
	Use    string   `json:"use"`
	Family string   `json:"family"`
	Given  []string `json:"given"`
}

type fhirContact struct {
	System string `json:"system"`
	Value  string `json:"value"`
}

type fhirAddress struct {
	Text string `json:"text"`
}

// v2-0203 PI: the patient's internal identifier, the type the national
// profile's platformId slice asks for when a type is given.
const v20203 = "http://terminology.hl7.org/CodeSystem/v2-0203"

// PatientResource maps a new platform patient onto the FHIR Patient stored
// as id (PT-<n>): the platform identifier (system PatientIDSystem, value
// id, type PI), one official name (family = last_name, given =
// [first_name]: a first name with spaces stays one given name), telecom
// phone then email (when given), birthDate, address.text (when given),
// active = true and meta.profile = [the national Patient profile]. The
// input is expected to be valid (legacyapi checks it against its JSON
// Schema); blanks around values are trimmed.
func (p Pack) PatientResource(in NewPatient, id string) []byte {
	pt := fhirPatient{
		ResourceType: "Patient",
		ID:           id,
		Meta:         fhirMeta{Profile: []string{p.PatientProfile()}},
		Identifier: []fhirIdent{{Use: "official", Type: &fhirConcept{Coding: []fhirCoding{{System: v20203, Code: "PI"}}},
			System: p.PatientIDSystem(), Value: id}},
		Active:    true,
		Name:      []fhirName{{Use: "official", Family: strings.TrimSpace(in.LastName), Given: []string{strings.TrimSpace(in.FirstName)}}},
		BirthDate: strings.TrimSpace(in.DateOfBirth),
	}
	if v := strings.TrimSpace(in.Phone); v != "" {
		pt.Telecom = append(pt.Telecom, fhirContact{System: "phone", Value: v})
	}
	if v := strings.TrimSpace(in.Email); v != "" {
		pt.Telecom = append(pt.Telecom, fhirContact{System: "email", Value: v})
	}
	if v := strings.TrimSpace(in.Address); v != "" {
		pt.Address = []fhirAddress{{Text: v}}
	}
	b, err := json.Marshal(pt)
	if err != nil {
		panic("adapters: marshal a Patient: " + err.Error()) // strings only: cannot fail
	}
	return b
}

// NewPatientOf reads a Patient back into the fields of the platform body:
// the inverse of PatientResource for the patients it writes, and a best
// reading of any other Patient. The name is the first official (else
// usual, else first) name: its given names joined by spaces and its family
// (or its text when it has neither). Phone and email are the first
// contact points of those systems; address is the first address's text,
// or its parts joined when it has no text.
func NewPatientOf(patient map[string]any) NewPatient {
	var out NewPatient
	if n := pickName(patient); n != nil {
		out.FirstName = strings.Join(strings_(n["given"]), " ")
		out.LastName, _ = n["family"].(string)
		if out.FirstName == "" && out.LastName == "" {
			out.LastName, _ = n["text"].(string)
		}
	}
	out.DateOfBirth, _ = patient["birthDate"].(string)
	out.Phone = contact(patient, "phone")
	out.Email = contact(patient, "email")
	if addrs, _ := patient["address"].([]any); len(addrs) > 0 {
		if a, ok := addrs[0].(map[string]any); ok {
			out.Address, _ = a["text"].(string)
			if out.Address == "" {
				parts := strings_(a["line"])
				for _, k := range []string{"postalCode", "city", "state", "country"} {
					if s, _ := a[k].(string); s != "" {
						parts = append(parts, s)
					}
				}
				out.Address = strings.Join(parts, ", ")
			}
		}
	}
	return out
}

func pickName(patient map[string]any) map[string]any {
	names, _ := patient["name"].([]any)
	var first map[string]any
	for _, use := range []string{"official", "usual"} {
		for _, x := range names {
			n, ok := x.(map[string]any)
			if !ok {
				continue
			}
			if first == nil {
				first = n
			}
			if n["use"] == use {
				return n
			}
		}
	}
	return first
}

func contact(patient map[string]any, system string) string {
	list, _ := patient["telecom"].([]any)
	for _, x := range list {
		if c, ok := x.(map[string]any); ok && c["system"] == system {
			if v, _ := c["value"].(string); v != "" {
				return v
			}
		}
	}
	return ""
}

// strings_ returns the strings of a JSON array.
func strings_(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}
