package fhirserver

// The in-process API: what the platform's JSON endpoints (legacyapi) call
// instead of going over HTTP a second time (DESIGN.md). Each method is
// authorized through Server.authorize exactly as the REST interaction it
// mirrors, with the caller's auth.Principal carried by ctx, and writes go
// through the same code as the REST layer's (structural validation,
// nextWrite with profile validation and index rows, the store's
// compare-and-swap). Client errors are *outcome.Error values with the
// status the REST API would answer. Each call is one interaction, recorded
// once with its outcome like the REST interaction it mirrors
// (auditing.go).

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// checkTypeID refuses an unknown resource type (404) or a malformed id
// (400), as Call.Admit does for a path.
func checkTypeID(typ, id string, needID bool) error {
	if !profiles.IsResourceType(typ) {
		return unknownType(typ)
	}
	if needID && !fhirjson.ValidID(id) {
		return invalidID(id)
	}
	return nil
}

func unknownType(typ string) error {
	return outcome.New(http.StatusNotFound, "not-supported", "unknown resource type "+quote(typ))
}

func invalidID(id string) error {
	return outcome.New(http.StatusBadRequest, "invalid", "invalid resource id "+quote(id)+": ids are 1-64 characters of A-Z a-z 0-9 - .")
}

// clientError returns err as the *outcome.Error the REST API would answer
// for it when it is a client's error (a bad search, a conflict, …), and
// err itself otherwise (nil stays nil).
func clientError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := outcome.As(err); ok {
		return err
	}
	if oe := toOutcome(err); oe.Status < http.StatusInternalServerError || errors.Is(err, store.ErrTransactionsUnsupported) {
		return oe
	}
	return err
}

// CreateWithID creates typ/id from body, which must be a typ. It is a
// create whose id the caller allocated (the platform's PT-<n>): authorized
// as the create interaction, checked by both validation layers like a REST
// write, and stored only if typ/id has never existed: the store's
// compare-and-swap on version 0 decides between concurrent callers, and
// the loser (or any later call) gets 409. Any id or meta in body is
// replaced, as in a REST create.
func (s *Server) CreateWithID(ctx context.Context, typ, id string, body []byte) (_ *store.Version, err error) {
	defer s.recordCall(ctx, &event{access: Access{Interaction: Create, Type: typ, ID: id}}, http.StatusCreated, &err)
	v, err := s.createWithID(ctx, typ, id, body)
	return v, clientError(err)
}

func (s *Server) createWithID(ctx context.Context, typ, id string, body []byte) (*store.Version, error) {
	if err := checkTypeID(typ, id, true); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, Access{Interaction: Create, Type: typ, ID: id}); err != nil {
		return nil, err
	}
	if int64(len(body)) > s.cfg.Limits.MaxResourceBytes {
		return nil, outcome.New(http.StatusRequestEntityTooLarge, "too-costly", "the resource is larger than the limit")
	}
	info, err := s.validator.Check(body)
	if err != nil {
		return nil, err
	}
	if info.ResourceType != typ {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "the body is a "+info.ResourceType+" but a "+typ+" was expected", info.ResourceType+".resourceType")
	}
	if tx, ok := txFrom(ctx); ok {
		return s.createOnce(ctx, tx, typ, id, body)
	}
	return s.createOnce(ctx, s.store, typ, id, body)
}

func (s *Server) createOnce(ctx context.Context, w store.Writer, typ, id string, body []byte) (*store.Version, error) {
	wr, err := s.nextWrite(ctx, typ, id, nil, body, store.MethodCreate)
	if err != nil {
		return nil, err
	}
	// Version 1 is written only where no version exists (store.Write).
	if err := w.Put(ctx, wr); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, outcome.New(http.StatusConflict, "duplicate", typ+"/"+id+" already exists")
		}
		return nil, err
	}
	return stored(wr), nil
}

// Read returns the current version of typ/id, authorized as the read
// interaction: 404 when it never existed, 410 when it is deleted.
func (s *Server) Read(ctx context.Context, typ, id string) (_ *store.Version, err error) {
	defer s.recordCall(ctx, &event{access: Access{Interaction: Read, Type: typ, ID: id}}, http.StatusOK, &err)
	if err := checkTypeID(typ, id, true); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, Access{Interaction: Read, Type: typ, ID: id}); err != nil {
		return nil, err
	}
	v, err := s.db(ctx).Read(ctx, typ, id)
	if err != nil {
		return nil, clientError(s.notFound(err, typ, id))
	}
	if v.Deleted {
		return nil, gone(v)
	}
	return v, nil
}

// SearchAll runs a type-level search with the REST API's parameters
// (strictly: an unknown parameter is a 400, not ignored), authorized as the
// search-type interaction and on every type a chain or _has reaches, and
// returns the current versions of the matches in the search's order,
// following the pages, at most limit of them (limit <= 0: the server's
// default page size). _include and _revinclude are not followed.
func (s *Server) SearchAll(ctx context.Context, typ string, params url.Values, limit int) (_ []*store.Version, err error) {
	defer s.recordCall(ctx, &event{access: Access{Interaction: SearchType, Type: typ}, query: params.Encode()}, http.StatusOK, &err)
	vs, err := s.searchAll(ctx, typ, params, limit)
	return vs, clientError(err)
}

func (s *Server) searchAll(ctx context.Context, typ string, params url.Values, limit int) ([]*store.Version, error) {
	if err := checkTypeID(typ, "", false); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = s.cfg.DefaultCount
	}
	parsed, err := s.parseSearch(ctx, []string{typ}, params, true)
	if err != nil {
		return nil, err
	}
	q := parsed.Query
	q.Include, q.RevInclude, q.Total = nil, nil, search.TotalNone
	q.Count = min(limit, s.cfg.MaxCount)
	var out []*store.Version
	for {
		page, err := s.db(ctx).Search(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Matches...)
		if len(out) >= limit {
			return out[:limit], nil
		}
		if page.Next == "" || len(page.Matches) == 0 {
			return out, nil
		}
		q.Cursor = page.Next
	}
}
