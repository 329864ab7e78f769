// Package compartment is the R4 Patient compartment: which resources of
// a type belong to a patient's, as search matches on the index.
package compartment

import (
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/profiles"
)

// patient is the R4 Patient CompartmentDefinition.
func patient() *profiles.CompartmentDefinition {
	cd, err := profiles.PatientCompartment()
	if err != nil {
		panic("compartment: embedded Patient CompartmentDefinition: " + err.Error()) // embedded data; tests load it
	}
	return cd
}

// Matches is the membership test of the Patient compartment of
// id for resources of typ: a reference from any of the type's compartment
// parameters to the patient (and, for Patient itself, the patient).
func Matches(typ, id string) []search.Match {
	var out []search.Match
	var keys []string
	for _, p := range patient().Params(typ) {
		if p == "{def}" {
			continue
		}
		keys = append(keys, p+"\x1fPatient/"+id)
	}
	if len(keys) > 0 {
		out = append(out, search.Match{Op: search.OpKey, Type: typ, Keys: keys})
	}
	if typ == "Patient" {
		out = append(out, search.Match{Op: search.OpKey, Type: typ, Keys: []string{"_id\x1f" + id}})
	}
	return out
}

// Types lists the resource types that can be in a Patient
// compartment, Patient included.
var Types = sync.OnceValue(func() []string {
	var out []string
	for _, t := range profiles.ResourceTypes() {
		if len(Matches(t, "x")) > 0 {
			out = append(out, t)
		}
	}
	return out
})
