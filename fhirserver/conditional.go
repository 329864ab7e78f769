package fhirserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/internal/reference"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// Conditional interactions find their target by search criteria. The
// search and the write run in one store transaction: with SQLite's single
// writer two concurrent conditional creates with the same criteria queue,
// and the second finds what the first created. A store without
// transactions cannot make them race-free, so they are refused there
// rather than run with a window for duplicates.

// Criteria parses conditional criteria (a query string) for typ, to find
// at most limit matches. Unknown parameters are errors: ignoring one would
// widen the match. The caller needs the right to run them as a search.
func (s *Server) Criteria(ctx context.Context, typ, raw string, limit int) (*Criteria, error) {
	params, err := url.ParseQuery(raw)
	if err != nil {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "malformed search criteria: "+err.Error())
	}
	// Only filters select: the result parameters (_count, _sort, …) would
	// leave criteria that match every resource of the type, and in the
	// lock key they would let the same filters take two locks.
	for k := range params {
		if k == "_format" || k == "_pretty" || search.IsResultParam(k) {
			params.Del(k)
			continue
		}
		// Repeats of a parameter are ANDed: their order is no part of
		// the criteria (nor of the lock key).
		slices.Sort(params[k])
	}
	if len(params) == 0 {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "a conditional interaction needs search criteria: filtering parameters, not only result parameters such as _count or _sort")
	}
	// Criteria are a search: the caller needs the right to run it (on the
	// type, and on every type a chain or _has reaches).
	p, err := s.parseSearch(ctx, []string{typ}, params, true)
	if err != nil {
		return nil, err
	}
	q := p.Query
	q.Count, q.Include, q.RevInclude, q.Sort, q.Total = limit, nil, nil, nil, search.TotalNone
	// Encode sorts the parameters: the same criteria in another order
	// take the same lock.
	return &Criteria{Type: typ, Query: q, Key: typ + "?" + params.Encode()}, nil
}

// Criteria are a conditional interaction's search over Type, and the key
// of the lock that serialises requests with the same criteria: the same
// filters in any order have the same key.
type Criteria struct {
	Type  string
	Query *search.Query
	Key   string
}

// NotSelective is the 412 of criteria that match n resources where they
// must match at most one.
func (c *Criteria) NotSelective(n int) error {
	return outcome.New(http.StatusPreconditionFailed, "multiple-matches",
		"the criteria match "+strconv.Itoa(n)+" or more "+c.Type+" resources; they must match at most one")
}

// criteriaLocker is a store whose transactions alone do not stop two
// requests with the same criteria from both finding no match and both
// creating (MongoDB: snapshot isolation, or no transactions at all). It
// holds a lock per criteria key until unlock is called.
type criteriaLocker interface {
	LockCriteria(ctx context.Context, key string) (unlock func(), err error)
}

// guarded runs fn so that no other request with the same criteria runs
// between its search and its writes. Inside a transaction Bundle it uses
// the Bundle's transaction. Otherwise it runs in a store transaction,
// holding the store's criteria lock where it has one; on a store without
// transactions fn runs on the store itself, each write a compare-and-swap.
func (s *Server) guarded(ctx context.Context, c *Criteria, fn func(tx store.Tx) error) error {
	if tx, ok := txFrom(ctx); ok {
		return fn(tx)
	}
	if l, ok := s.store.(criteriaLocker); ok {
		unlock, err := l.LockCriteria(ctx, c.Key)
		if err != nil {
			return err
		}
		defer unlock()
	}
	err := s.store.Transact(ctx, fn)
	if errors.Is(err, store.ErrTransactionsUnsupported) {
		return fn(s.store)
	}
	return err
}

// Match runs the criteria inside db (the store, or a transaction) and
// returns their matches: at most limit, or Query.Count when limit is 0.
func (c *Criteria) Match(ctx context.Context, db store.Searcher, limit int) ([]*store.Version, error) {
	q := c.Query
	if limit > 0 {
		cp := *q
		cp.Count = limit
		q = &cp
	}
	page, err := db.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	return page.Matches, nil
}

// applyToMatch finds, inside one transaction, the resource the criteria
// (a query string) of a write to typ match and applies next to it as
// mutate would (with the write's If-Match / If-None-Match). With no match,
// ifNone names the resource to create or fails; more than one match is a
// 412.
func (s *Server) applyToMatch(ctx context.Context, typ, query string, pre preconditions, ifNone func() (string, error),
	next func(id string, prev *store.Version) (*store.Write, error)) (string, *store.Version, error) {
	crit, err := s.Criteria(ctx, typ, query, 2)
	if err != nil {
		return "", nil, err
	}
	var id string
	var v *store.Version
	err = s.guarded(ctx, crit, func(tx store.Tx) error {
		found, err := crit.Match(ctx, tx, 0)
		if err != nil {
			return err
		}
		switch len(found) {
		case 0:
			if id, err = ifNone(); err != nil {
				return err
			}
		case 1:
			id = found[0].ID
		default:
			return crit.NotSelective(len(found))
		}
		v, err = s.applyOne(ctx, tx, typ, id, pre, func(prev *store.Version) (*store.Write, error) { return next(id, prev) })
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return id, v, nil
}

// resolveReferences replaces each conditional reference a write outside a
// transaction Bundle adds (a create, an update, a patch's result, an entry
// of a batch) with the one resource its criteria match now:
// "Patient?identifier=…" becomes "Patient/123". No match, or more than
// one, is a 412, as in a transaction. A reference prev (the current
// version, or nil) already holds is kept as it is: a version written
// before conditional references were resolved must stay writable. A
// transaction's were resolved with the Bundle (rewriter), against the
// transaction.
func (s *Server) resolveReferences(ctx context.Context, body []byte, prev *store.Version) ([]byte, error) {
	if _, inTx := txFrom(ctx); inTx || !reference.MayHoldQuery(body) {
		return body, nil
	}
	resolved := map[string]string{}
	if prev != nil && !prev.Deleted && reference.MayHoldQuery(prev.Body) {
		_, _ = reference.Rewrite(prev.Body, func(ref string) (string, error) {
			resolved[ref] = ""
			return "", nil
		}, nil)
	}
	return reference.Rewrite(body, func(ref string) (string, error) {
		typ, query, ok := s.ConditionalReference(ref)
		if !ok {
			return "", nil
		}
		if to, ok := resolved[ref]; ok {
			return to, nil
		}
		crit, err := s.Criteria(ctx, typ, query, 2)
		if err != nil {
			return "", err
		}
		found, err := crit.Match(ctx, s.db(ctx), 0)
		if err != nil {
			return "", err
		}
		switch len(found) {
		case 0:
			return "", UnmatchedReference(ref)
		case 1:
			resolved[ref] = typ + "/" + found[0].ID
			return resolved[ref], nil
		}
		return "", outcome.New(http.StatusPreconditionFailed, "multiple-matches",
			"the conditional reference "+quote(ref)+" matches more than one resource; it must match exactly one")
	}, nil)
}

// UnmatchedReference is the 412 of a conditional reference that matches
// no resource.
func UnmatchedReference(ref string) error {
	return outcome.New(http.StatusPreconditionFailed, "not-found", "the conditional reference "+quote(ref)+" matches no resource")
}

// ConditionalReference splits a conditional reference into its type and
// criteria: "Patient?identifier=…", relative or under this server's base.
// ok is false for any other reference.
func (s *Server) ConditionalReference(ref string) (typ, query string, ok bool) {
	typ, query, ok = strings.Cut(strings.TrimPrefix(ref, s.cfg.BaseURL+"/"), "?")
	return typ, query, ok && profiles.IsResourceType(typ)
}
