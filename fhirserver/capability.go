package fhirserver

import (
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/internal/capability"
)

// OAuthURIs are the endpoints of the OAuth 2.0 authorization server that
// guards the API ("" leaves one out). CORS: browser apps of some origins
// may call the API (rest.security.cors).
type OAuthURIs struct {
	Authorize, Token, Revoke, Introspect string
	CORS                                 bool
}

// Capabilities is the capabilities interaction: the CapabilityStatement.
func (c *Call) Capabilities() (Response, error) {
	return Response{Status: http.StatusOK, Body: *c.s.capability.Load()}, nil
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
// R4 resource type.
func (s *Server) capabilityStatement() ([]byte, error) {
	var typeLevel, systemLevel []string
	seen := map[Interaction]bool{}
	add := func(list *[]string, in Interaction) {
		if !seen[in] {
			seen[in] = true
			*list = append(*list, string(in))
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
	return capability.Statement(capability.Service{
		TypeLevel: typeLevel, SystemLevel: systemLevel, Registry: s.registry,
		MultipleDeletes: s.cfg.MaxConditionalDeletes > 1 && s.transactions,
		OAuth:           capability.OAuth(s.cfg.OAuth),
		Validates:       s.cfg.Validation.Validator != nil, TypeProfiles: s.cfg.Validation.TypeProfiles,
		Version: s.cfg.Version, BaseURL: s.cfg.BaseURL, Date: s.now(),
	})
}
