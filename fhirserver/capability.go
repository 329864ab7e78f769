package fhirserver

import (
	"encoding/json"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"net/http"

	"github.com/kiln-fhir/kiln/profiles"
)

func (s *Server) metadata(w http.ResponseWriter, r *http.Request, c *call) error {
	writeBody(w, c.format, http.StatusOK, *s.capability.Load())
	return nil
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
	Resource    []capResource    `json:"resource"`
	Interaction []capInteraction `json:"interaction,omitempty"`
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
	for _, rt := range s.routes() {
		switch rt.interaction {
		case Capabilities:
		case "":
			if rt.path == "" { // the Bundle endpoint
				if s.transactions {
					add(&systemLevel, Transaction)
				}
				add(&systemLevel, Batch)
			}
		case HistorySystem, SearchSystem:
			add(&systemLevel, rt.interaction)
		default:
			add(&typeLevel, rt.interaction)
		}
	}
	deletes := "single"
	if s.cfg.MaxConditionalDeletes > 1 && s.transactions {
		deletes = "multiple"
	}
	types := profiles.ResourceTypes()
	includes, revIncludes := s.includeLists()
	rest := capRest{Mode: "server", Interaction: systemLevel, Resource: make([]capResource, 0, len(types))}
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
		Rest:           []capRest{rest},
	})
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
