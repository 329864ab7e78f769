package fhirserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// Custom search parameters: an active SearchParameter written to the server
// joins the registry, and resources written from then on are indexed by it;
// deleting or retiring it takes it out again.
// Resources written before are found by it only after a reindex ($reindex,
// kiln admin reindex).

// activateSearchParameter registers an active SearchParameter body. A
// parameter the registry refuses (a clash with a core code, an expression
// that does not compile) refuses the write: the client asked for a
// parameter that would not work.
func (s *Server) activateSearchParameter(body []byte) error {
	var sp struct {
		profiles.SearchParameter
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &sp); err != nil {
		return outcome.New(http.StatusBadRequest, "invalid", "malformed SearchParameter: "+err.Error())
	}
	if sp.Status != "active" {
		return nil
	}
	if err := s.registry.AddCustom(sp.SearchParameter); err != nil {
		return outcome.New(http.StatusUnprocessableEntity, "processing", "the SearchParameter cannot be used for search: "+err.Error())
	}
	// The statement lists the new parameter. Before New has built the
	// first one (start-up loading) there is nothing to refresh.
	if s.capability.Load() != nil {
		return s.refreshCapability()
	}
	return nil
}

// searchParameterWritten keeps the registry in step with a write of a
// SearchParameter. The parameter of the version it replaces stops counting
// when the new one is deleted, no longer active, or has another url; an
// active one is registered (replacing its previous version), unless
// another active SearchParameter has its url (the registry knows a
// parameter by its url). When the new one cannot be registered, the
// previous one is put back.
func (s *Server) searchParameterWritten(ctx context.Context, prev *store.Version, w store.Write) error {
	var was, now searchParameterState
	if prev != nil && !prev.Deleted {
		was = searchParameterOf(prev.Body)
	}
	if !w.Deleted {
		now = searchParameterOf(w.Body)
	}
	if now.active {
		if err := s.urlTaken(ctx, now.url, w.ID); err != nil {
			return err
		}
	}
	removed := was.active && (!now.active || now.url != was.url) && s.registry.RemoveCustom(was.url)
	if !w.Deleted {
		if err := s.activateSearchParameter(w.Body); err != nil {
			if removed {
				_ = s.activateSearchParameter(prev.Body) // it was registered before
			}
			return err
		}
	}
	if removed && s.capability.Load() != nil {
		return s.refreshCapability()
	}
	return nil
}

// urlTaken refuses the url of another active SearchParameter than id.
func (s *Server) urlTaken(ctx context.Context, url, id string) error {
	if url == "" {
		return nil // activateSearchParameter explains
	}
	p, err := s.registry.Parse([]string{"SearchParameter"}, map[string][]string{
		"url": {strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(url)}, "status": {"active"}}, s.parseOptions(true))
	if err != nil {
		return err
	}
	p.Query.Count = 2
	found, err := matchIn(ctx, s.db(ctx), p.Query)
	if err != nil {
		return err
	}
	for _, v := range found {
		if v.ID != id {
			return outcome.New(http.StatusUnprocessableEntity, "duplicate",
				"SearchParameter/"+v.ID+" is active with the url "+quote(url)+"; retire it first, or give this one another url")
		}
	}
	return nil
}

// reloadSearchParameters rebuilds the custom parameters from the stored
// SearchParameters: after a transaction Bundle that wrote some failed,
// the registry holds what its entries registered and the store does not.
func (s *Server) reloadSearchParameters(ctx context.Context) {
	s.registry.ResetCustom()
	if err := s.loadSearchParameters(ctx); err != nil {
		s.cfg.Logger.WarnContext(ctx, "reloading the SearchParameters", "err", err)
	}
	if err := s.refreshCapability(); err != nil {
		s.cfg.Logger.WarnContext(ctx, "refreshing the CapabilityStatement", "err", err)
	}
}

// searchParameterState is what decides whether a SearchParameter body
// counts for search.
type searchParameterState struct {
	url    string
	active bool
}

func searchParameterOf(body []byte) searchParameterState {
	var sp struct {
		URL    string `json:"url"`
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &sp) // a stored body is valid; else it counts for nothing
	return searchParameterState{url: sp.URL, active: sp.Status == "active"}
}

// loadSearchParameters registers the active SearchParameters already in
// the store, at start-up.
func (s *Server) loadSearchParameters(ctx context.Context) error {
	q := &search.Query{Types: []string{"SearchParameter"}, Count: 200}
	for {
		page, err := s.store.Search(ctx, q)
		if err != nil {
			return fmt.Errorf("fhirserver: loading SearchParameters: %w", err)
		}
		for _, v := range page.Matches {
			if err := s.activateSearchParameter(v.Body); err != nil {
				// A stored parameter that no longer registers (say, a core
				// parameter of the same code appeared) must not stop the
				// server; it is reported and left out.
				s.cfg.Logger.WarnContext(ctx, "stored SearchParameter not registered", "id", v.ID, "err", err)
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
}
