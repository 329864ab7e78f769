// Package capability builds the CapabilityStatement of a FHIR service:
// what its routes implement, for every R4 resource type, with the search
// parameters of its registry.
package capability

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/profiles"
)

type capabilityStatement struct {
	ResourceType   string           `json:"resourceType"`
	Status         string           `json:"status"`
	Date           string           `json:"date"`
	Publisher      string           `json:"publisher"`
	Kind           string           `json:"kind"`
	Software       capSoftware      `json:"software"`
	Implementation capImplementaton `json:"implementation"`
	FHIRVersion    string           `json:"fhirVersion"`
	Format         []string         `json:"format"`
	PatchFormat    []string         `json:"patchFormat"`
	Rest           []capRest        `json:"rest"`
}

type capSoftware struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

type capImplementaton struct {
	Description string `json:"description"`
	URL         string `json:"url"`
}

type capRest struct {
	Mode        string           `json:"mode"`
	Security    *capSecurity     `json:"security,omitempty"`
	Resource    []capResource    `json:"resource"`
	Interaction []capInteraction `json:"interaction,omitempty"`
	SearchParam []capSearchParam `json:"searchParam,omitempty"`
}

// capSecurity declares SMART on FHIR with the authorization server's
// endpoints in the oauth-uris extension, where SMART clients look for
// them besides .well-known/smart-configuration.
type capSecurity struct {
	Extension   []capExtension       `json:"extension,omitempty"`
	CORS        bool                 `json:"cors,omitempty"`
	Service     []capCodeableConcept `json:"service"`
	Description string               `json:"description,omitempty"`
}

type capExtension struct {
	URL         string         `json:"url"`
	Extension   []capExtension `json:"extension,omitempty"`
	ValueURI    string         `json:"valueUri,omitempty"`
	ValueString string         `json:"valueString,omitempty"`
}

type capCodeableConcept struct {
	Coding []capCoding `json:"coding"`
	Text   string      `json:"text,omitempty"`
}

type capCoding struct {
	System  string `json:"system"`
	Code    string `json:"code"`
	Display string `json:"display,omitempty"`
}

// OAuth names the endpoints of the OAuth 2.0 authorization server that
// guards the API ("" leaves one out). CORS: browser apps of some origins
// may call the API (rest.security.cors).
type OAuth struct {
	Authorize, Token, Revoke, Introspect string
	CORS                                 bool
}

const oauthURIsExtension = "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"

// security is rest.security, or nil when no authorization server is
// configured.
func (u OAuth) security() *capSecurity {
	var ext []capExtension
	for _, e := range []struct{ name, uri string }{
		{"authorize", u.Authorize}, {"token", u.Token}, {"revoke", u.Revoke}, {"introspect", u.Introspect},
	} {
		if e.uri != "" {
			ext = append(ext, capExtension{URL: e.name, ValueURI: e.uri})
		}
	}
	if len(ext) == 0 {
		return nil
	}
	return &capSecurity{
		CORS:      u.CORS,
		Extension: []capExtension{{URL: oauthURIsExtension, Extension: ext}},
		Service: []capCodeableConcept{{Coding: []capCoding{{
			System: "http://terminology.hl7.org/CodeSystem/restful-security-service", Code: "SMART-on-FHIR", Display: "SMART-on-FHIR",
		}}}},
		Description: "OAuth 2.0 bearer tokens (SMART App Launch scopes, v1 and v2); see the token endpoint in the oauth-uris extension",
	}
}

type capResource struct {
	Type              string           `json:"type"`
	SupportedProfile  []string         `json:"supportedProfile,omitempty"`
	Interaction       []capInteraction `json:"interaction"`
	SearchInclude     []string         `json:"searchInclude,omitempty"`
	SearchRevInclude  []string         `json:"searchRevInclude,omitempty"`
	SearchParam       []capSearchParam `json:"searchParam,omitempty"`
	Operation         []capOperation   `json:"operation,omitempty"`
	Versioning        string           `json:"versioning"`
	ReadHistory       bool             `json:"readHistory"`
	UpdateCreate      bool             `json:"updateCreate"`
	ConditionalCreate bool             `json:"conditionalCreate"`
	ConditionalRead   string           `json:"conditionalRead"`
	ConditionalUpdate bool             `json:"conditionalUpdate"`
	ConditionalDelete string           `json:"conditionalDelete"`
}

type capInteraction struct {
	Code string `json:"code"`
}

type capSearchParam struct {
	Name       string `json:"name"`
	Definition string `json:"definition,omitempty"`
	Type       string `json:"type"`
}

type capOperation struct {
	Name       string `json:"name"`
	Definition string `json:"definition"`
}

// Service is what a CapabilityStatement says of a service.
type Service struct {
	// TypeLevel and SystemLevel are the codes of the interactions it
	// implements on each type and on the system, in order.
	TypeLevel, SystemLevel []string
	Registry               *search.Registry
	// MultipleDeletes: a conditional delete may remove several matches.
	MultipleDeletes bool
	OAuth           OAuth
	// Validates: $validate is offered, with the profiles bound to each
	// type.
	Validates    bool
	TypeProfiles map[string][]string
	Version      string
	BaseURL      string
	Date         time.Time
}

// Statement is the CapabilityStatement of s: what it implements, for
// every R4 resource type.
func Statement(s Service) ([]byte, error) {
	var typeLevel, systemLevel []capInteraction
	for _, in := range s.TypeLevel {
		typeLevel = append(typeLevel, capInteraction{in})
	}
	for _, in := range s.SystemLevel {
		systemLevel = append(systemLevel, capInteraction{in})
	}
	deletes := "single"
	if s.MultipleDeletes {
		deletes = "multiple"
	}
	types := profiles.ResourceTypes()
	includes, revIncludes := includeLists(s.Registry)
	rest := capRest{Mode: "server", Security: s.OAuth.security(), Interaction: systemLevel,
		Resource: make([]capResource, 0, len(types)), SearchParam: systemSearchParams(s.Registry)}
	for _, t := range types {
		res := capResource{
			Type:              t,
			Interaction:       typeLevel,
			Versioning:        "versioned-update",
			ReadHistory:       true,
			UpdateCreate:      true,
			ConditionalCreate: true,
			ConditionalRead:   "full-support",
			ConditionalUpdate: true,
			ConditionalDelete: deletes,
			SearchInclude:     includes[t],
			SearchRevInclude:  revIncludes[t],
		}
		for _, p := range s.Registry.Params(t) {
			res.SearchParam = append(res.SearchParam, capSearchParam{Name: p.Code, Definition: p.URL, Type: p.Type})
		}
		if t == "Patient" {
			res.Operation = []capOperation{{Name: "everything", Definition: "http://hl7.org/fhir/OperationDefinition/Patient-everything"}}
		}
		if s.Validates {
			res.Operation = append(res.Operation, capOperation{Name: "validate", Definition: "http://hl7.org/fhir/OperationDefinition/Resource-validate"})
			res.SupportedProfile = s.TypeProfiles[t]
		}
		rest.Resource = append(rest.Resource, res)
	}
	return json.Marshal(capabilityStatement{
		ResourceType:   "CapabilityStatement",
		Status:         "active",
		Date:           fhirjson.FormatInstant(s.Date),
		Publisher:      "Kiln",
		Kind:           "instance",
		Software:       capSoftware{Name: "Kiln", Version: s.Version},
		Implementation: capImplementaton{Description: "Kiln FHIR R4 server", URL: s.BaseURL},
		FHIRVersion:    "4.0.1",
		Format:         []string{"application/fhir+json", "json"},
		PatchFormat:    []string{negotiate.JSONPatch, negotiate.FHIRJSON},
		Rest:           []capRest{rest},
	})
}

// systemSearchParams are the parameters a system search ([base]?_type=…)
// takes: those defined on every resource that are indexed.
func systemSearchParams(reg *search.Registry) []capSearchParam {
	var out []capSearchParam
	// Every resource type has the parameters of Resource; any type lists them.
	for _, p := range reg.Params("Basic") {
		if p.Expr == nil || !slices.Contains(p.Base, "Resource") {
			continue
		}
		out = append(out, capSearchParam{Name: p.Code, Definition: p.URL, Type: p.Type})
	}
	return out
}

// includeLists gives, per resource type, the _include values it supports
// (its reference parameters) and the _revinclude values (the reference
// parameters of other types that can point at it).
func includeLists(reg *search.Registry) (inc, rev map[string][]string) {
	inc, rev = map[string][]string{}, map[string][]string{}
	for _, t := range profiles.ResourceTypes() {
		for _, p := range reg.Params(t) {
			if p.Type != "reference" {
				continue
			}
			if len(inc[t]) == 0 {
				inc[t] = append(inc[t], "*")
			}
			inc[t] = append(inc[t], t+":"+p.Code)
			for _, target := range p.Targets {
				rev[target] = append(rev[target], t+":"+p.Code)
			}
		}
	}
	return inc, rev
}
