// Package customparams keeps a search registry's custom parameters in step
// with the SearchParameter resources of a store: an active SearchParameter
// written to the server joins the registry, and resources written from
// then on are indexed by it; deleting or retiring it takes it out again.
// Resources written before are found by it only after a reindex
// ($reindex, kiln admin reindex).
//
// It lives beside search, not in it, because it reads the store, and the
// store depends on search.
package customparams

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// Params is the custom parameters of one registry. Its methods are safe
// for concurrent use as far as the registry's are.
type Params struct {
	registry *search.Registry
	options  func() search.ParseOptions
	refresh  func() error
	logger   *slog.Logger
}

// New keeps the custom parameters of registry. options are the strict
// options of the service's searches; refresh rebuilds the
// CapabilityStatement, which lists the parameters (it does nothing while
// there is none yet, at start-up).
func New(registry *search.Registry, options func() search.ParseOptions, refresh func() error, logger *slog.Logger) *Params {
	return &Params{registry: registry, options: options, refresh: refresh, logger: logger}
}

// activate registers an active SearchParameter body. A parameter the
// registry refuses (a clash with a core code, an expression that does not
// compile) refuses the write: the client asked for a parameter that would
// not work.
func (p *Params) activate(body []byte) error {
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
	if err := p.registry.AddCustom(sp.SearchParameter); err != nil {
		return outcome.New(http.StatusUnprocessableEntity, "processing", "the SearchParameter cannot be used for search: "+err.Error())
	}
	// The statement lists the new parameter.
	return p.refresh()
}

// Written keeps the registry in step with a write of a SearchParameter,
// before it is committed; db is what the write runs in. The parameter of
// the version it replaces (prev, or nil) stops counting when the new one
// is deleted, no longer active, or has another url; an active one is
// registered (replacing its previous version), unless another active
// SearchParameter has its url (the registry knows a parameter by its
// url). When the new one cannot be registered, the previous one is put
// back.
func (p *Params) Written(ctx context.Context, db store.Searcher, prev *store.Version, w store.Write) error {
	var was, now state
	if prev != nil && !prev.Deleted {
		was = stateOf(prev.Body)
	}
	if !w.Deleted {
		now = stateOf(w.Body)
	}
	if now.active {
		if err := p.urlTaken(ctx, db, now.url, w.ID); err != nil {
			return err
		}
	}
	removed := was.active && (!now.active || now.url != was.url) && p.registry.RemoveCustom(was.url)
	if !w.Deleted {
		if err := p.activate(w.Body); err != nil {
			if removed {
				_ = p.activate(prev.Body) // it was registered before
			}
			return err
		}
	}
	if removed {
		return p.refresh()
	}
	return nil
}

// urlTaken refuses the url of another active SearchParameter than id.
func (p *Params) urlTaken(ctx context.Context, db store.Searcher, url, id string) error {
	if url == "" {
		return nil // activate explains
	}
	parsed, err := p.registry.Parse([]string{"SearchParameter"}, map[string][]string{
		"url": {strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(url)}, "status": {"active"}}, p.options())
	if err != nil {
		return err
	}
	parsed.Query.Count = 2
	page, err := db.Search(ctx, parsed.Query)
	if err != nil {
		return err
	}
	for _, v := range page.Matches {
		if v.ID != id {
			return outcome.New(http.StatusUnprocessableEntity, "duplicate",
				"SearchParameter/"+v.ID+" is active with the url "+outcome.Quote(url)+"; retire it first, or give this one another url")
		}
	}
	return nil
}

// Reload rebuilds the custom parameters from the SearchParameters stored
// in st: after a transaction Bundle that wrote some failed, the registry
// holds what its entries registered and the store does not.
func (p *Params) Reload(ctx context.Context, st store.Searcher) {
	p.registry.ResetCustom()
	if err := p.Load(ctx, st); err != nil {
		p.logger.WarnContext(ctx, "reloading the SearchParameters", "err", err)
	}
	if err := p.refresh(); err != nil {
		p.logger.WarnContext(ctx, "refreshing the CapabilityStatement", "err", err)
	}
}

// state is what decides whether a SearchParameter body counts for search.
type state struct {
	url    string
	active bool
}

func stateOf(body []byte) state {
	var sp struct {
		URL    string `json:"url"`
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &sp) // a stored body is valid; else it counts for nothing
	return state{url: sp.URL, active: sp.Status == "active"}
}

// Load registers the active SearchParameters already in st, at start-up.
func (p *Params) Load(ctx context.Context, st store.Searcher) error {
	q := &search.Query{Types: []string{"SearchParameter"}, Count: 200}
	for {
		page, err := st.Search(ctx, q)
		if err != nil {
			return fmt.Errorf("fhirserver: loading SearchParameters: %w", err)
		}
		for _, v := range page.Matches {
			if err := p.activate(v.Body); err != nil {
				// A stored parameter that no longer registers (say, a core
				// parameter of the same code appeared) must not stop the
				// server; it is reported and left out.
				p.logger.WarnContext(ctx, "stored SearchParameter not registered", "id", v.ID, "err", err)
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
}
