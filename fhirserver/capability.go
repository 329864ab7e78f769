package fhirserver

import (
	"encoding/json"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"net/http"

	"github.com/kiln-fhir/kiln/profiles"
)

func (s *Server) metadata(w http.ResponseWriter, r *http.Request, c *call) error {
	writeBody(w, c.format, http.StatusOK, s.capability)
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
	Interaction       []capInteraction `json:"interaction"`
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

// capabilityStatement describes what the routes table implements, for every
// R4 resource type. It is built once at start-up.
func (s *Server) capabilityStatement() ([]byte, error) {
	var typeLevel, systemLevel []capInteraction
	for _, rt := range s.routes() {
		switch rt.interaction {
		case Capabilities:
		case HistorySystem:
			systemLevel = append(systemLevel, capInteraction{string(rt.interaction)})
		default:
			typeLevel = append(typeLevel, capInteraction{string(rt.interaction)})
		}
	}
	types := profiles.ResourceTypes()
	rest := capRest{Mode: "server", Interaction: systemLevel, Resource: make([]capResource, 0, len(types))}
	for _, t := range types {
		rest.Resource = append(rest.Resource, capResource{
			Type:              t,
			Interaction:       typeLevel,
			Versioning:        "versioned-update",
			ReadHistory:       true,
			UpdateCreate:      true,
			ConditionalRead:   "full-support",
			ConditionalDelete: "not-supported",
		})
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
