package fhirserver

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/profiles"
)

// Capabilities is the capabilities interaction: the CapabilityStatement.
func (c *Call) Capabilities() (Response, error) {
	return Response{Status: http.StatusOK, Body: *c.s.capability.Load()}, nil
}

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

// OAuthURIs are the endpoints of the OAuth 2.0 authorization server that
// guards the API ("" leaves one out). CORS: browser apps of some origins
// may call the API (rest.security.cors).
type OAuthURIs struct {
	Authorize, Token, Revoke, Introspect string
	CORS                                 bool
}

const oauthURIsExtension = "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"

// security is rest.security, or nil when no authorization server is
// configured.
func (u OAuthURIs) security() *capSecurity {
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

// refreshCapability rebuilds the CapabilityStatement.
func (s *Server) refreshCapability() error {
	cs, err := s.capabilityStatement()
	if err != nil {
		return err
	}
	s.capability.Store(&cs)
	return nil
}

// refreshCapabilityOnce rebuilds the CapabilityStatement once New has
// built the first one; before (start-up loading) there is nothing to
// refresh.
func (s *Server) refreshCapabilityOnce() error {
	if s.capability.Load() == nil {
		return nil
	}
	return s.refreshCapability()
}

// capabilityStatement describes what the routes table implements, for every
// R4 resource type. It is built once at start-up.
func (s *Server) capabilityStatement() ([]byte, error) {
	var typeLevel, systemLevel []capInteraction
	seen := map[Interaction]bool{}
	add := func(list *[]capInteraction, in Interaction) {
		if !seen[in] {
			seen[in] = true
			*list = append(*list, capInteraction{string(in)})
		}
	}
	for _, rt := range routes {
		switch rt.Interaction {
		case Capabilities:
		case "":
			if rt.Path == "" { // the Bundle endpoint
				if s.transactions {
					add(&systemLevel, Transaction)
				}
				add(&systemLevel, Batch)
			}
		case HistorySystem, SearchSystem:
			add(&systemLevel, rt.Interaction)
		default:
			add(&typeLevel, rt.Interaction)
		}
	}
	deletes := "single"
	if s.cfg.MaxConditionalDeletes > 1 && s.transactions {
		deletes = "multiple"
	}
	types := profiles.ResourceTypes()
	includes, revIncludes := s.includeLists()
	rest := capRest{Mode: "server", Security: s.cfg.OAuth.security(), Interaction: systemLevel,
		Resource: make([]capResource, 0, len(types)), SearchParam: s.systemSearchParams()}
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
		for _, p := range s.registry.Params(t) {
			res.SearchParam = append(res.SearchParam, capSearchParam{Name: p.Code, Definition: p.URL, Type: p.Type})
		}
		if t == "Patient" {
			res.Operation = []capOperation{{Name: "everything", Definition: "http://hl7.org/fhir/OperationDefinition/Patient-everything"}}
		}
		if s.cfg.Validation.Validator != nil {
			res.Operation = append(res.Operation, capOperation{Name: "validate", Definition: "http://hl7.org/fhir/OperationDefinition/Resource-validate"})
			res.SupportedProfile = s.cfg.Validation.TypeProfiles[t]
		}
		rest.Resource = append(rest.Resource, res)
	}
	return json.Marshal(capabilityStatement{
		ResourceType:   "CapabilityStatement",
		Status:         "active",
		Date:           fhirjson.FormatInstant(s.now()),
		Publisher:      "Kiln",
		Kind:           "instance",
		Software:       capSoftware{Name: "Kiln", Version: s.cfg.Version},
		Implementation: capImplementaton{Description: "Kiln FHIR R4 server", URL: s.cfg.BaseURL},
		FHIRVersion:    "4.0.1",
		Format:         []string{"application/fhir+json", "json"},
		PatchFormat:    []string{negotiate.JSONPatch, negotiate.FHIRJSON},
		Rest:           []capRest{rest},
	})
}

// systemSearchParams are the parameters a system search ([base]?_type=…)
// takes: those defined on every resource that are indexed.
func (s *Server) systemSearchParams() []capSearchParam {
	var out []capSearchParam
	// Every resource type has the parameters of Resource; any type lists them.
	for _, p := range s.registry.Params("Basic") {
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
func (s *Server) includeLists() (inc, rev map[string][]string) {
	inc, rev = map[string][]string{}, map[string][]string{}
	for _, t := range profiles.ResourceTypes() {
		for _, p := range s.registry.Params(t) {
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
