// Package national embeds the national profile pack: StructureDefinitions
// (differentials) for Patient, Encounter, Observation, Communication and
// Appointment and for the workforce resources, with the extensions,
// ValueSets and CodeSystems they need. README.md describes them; examples/
// holds instances (not embedded).
//
// Canonical URLs in the files are written with placeholders that
// profiles.NewSet replaces from the configured profile URL: {{profile_url}}
// (e.g. https://fhir.health.example/StructureDefinition) and {{canonical}}
// (the same without /StructureDefinition).
package national

import "embed"

// Files holds the pack's conformance resources, one JSON file each.
//
//go:embed *.json
var Files embed.FS
