package fhirserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// rewriter resolves the references between the entries of a transaction:
// each entry's fullUrl (urn:uuid:…, or any other) maps to the Type/id the
// entry will have, and conditional references (Patient?identifier=…) to the
// one resource they match. Both are looked up inside the transaction.
type rewriter struct {
	s        *Server
	tx       store.Tx
	fullURLs map[string]string // fullUrl → Type/id
	assigned map[int]string    // entry index → id chosen for its create
	ids      map[int]string    // entry index → id of the resource a create or update writes
	noLookup bool              // fail with errNeedsLookup rather than search
}

func newRewriter(s *Server, tx store.Tx) *rewriter {
	return &rewriter{s: s, tx: tx, fullURLs: map[string]string{}, assigned: map[int]string{}, ids: map[int]string{}}
}

// rewriteNoLookup is rewrite for references that need no search; it
// fails with errNeedsLookup on a conditional reference.
func (rw *rewriter) rewriteNoLookup(ctx context.Context, res []byte) ([]byte, error) {
	rw.noLookup = true
	defer func() { rw.noLookup = false }()
	return rw.rewrite(ctx, res)
}

// resolve decides the id of every entry that creates or updates a resource,
// and refuses a transaction in which two entries change the same resource
// (directly or through conditional criteria) or share a fullUrl: the
// specification leaves their outcome undefined, so it fails.
func (rw *rewriter) resolve(ctx context.Context, entries []entryIn) error {
	touched := map[string]int{} // Type/id → entry that changes it
	claim := func(i int, ref string) error {
		if j, dup := touched[ref]; dup {
			return outcome.New(http.StatusBadRequest, "invalid",
				"entries "+strconv.Itoa(j)+" and "+strconv.Itoa(i)+" both change "+ref+"; a transaction may change a resource only once")
		}
		touched[ref] = i
		return nil
	}
	seenURL := map[string]int{}
	for i := range entries {
		e := &entries[i]
		if e.Request == nil {
			continue
		}
		if e.FullURL != "" {
			if j, dup := seenURL[e.FullURL]; dup {
				return outcome.New(http.StatusBadRequest, "invalid",
					"entries "+strconv.Itoa(j)+" and "+strconv.Itoa(i)+" have the same fullUrl "+quote(e.FullURL))
			}
			seenURL[e.FullURL] = i
		}
		path, query, _ := strings.Cut(rw.s.entryURL(e), "?")
		typ, id, _ := strings.Cut(path, "/")
		if !profiles.IsResourceType(typ) {
			continue // the entry fails with a clear error when processed
		}
		switch e.Request.Method {
		case http.MethodDelete, http.MethodPatch:
			if id != "" {
				if err := claim(i, typ+"/"+id); err != nil {
					return err
				}
				continue
			}
			q, err := rw.s.criteria(ctx, typ, query, max(rw.s.cfg.MaxConditionalDeletes, 1)+1)
			if err != nil {
				return entryError(i, err)
			}
			found, err := rw.lookup(ctx, q.q)
			if err != nil {
				return err
			}
			for _, m := range found {
				if err := claim(i, m.Type+"/"+m.ID); err != nil {
					return err
				}
			}
			continue
		}
		var target string
		switch e.Request.Method {
		case http.MethodPost:
			if cond := e.Request.IfNoneExist; cond != "" {
				found, err := rw.match(ctx, typ, cond)
				if err != nil {
					return entryError(i, err)
				}
				if len(found) == 1 {
					target = typ + "/" + found[0].ID
					break
				}
			}
			id := newID(rw.s.cfg.Now())
			rw.assigned[i] = id
			target = typ + "/" + id
		case http.MethodPut:
			if id != "" {
				target = typ + "/" + id
				break
			}
			found, err := rw.match(ctx, typ, query)
			if err != nil {
				return entryError(i, err)
			}
			if len(found) == 1 {
				target = typ + "/" + found[0].ID
				break
			}
			id := resourceID(e.Resource)
			if id == "" {
				id = newID(rw.s.cfg.Now())
			}
			rw.assigned[i] = id
			target = typ + "/" + id
		default:
			continue
		}
		if err := claim(i, target); err != nil {
			return err
		}
		if _, id, ok := strings.Cut(target, "/"); ok && (e.Request.Method == http.MethodPut || rw.assigned[i] != "") {
			rw.ids[i] = id // a create that matched an existing resource writes nothing
		}
		if e.FullURL != "" {
			rw.fullURLs[e.FullURL] = target
		}
	}
	return nil
}

// match runs conditional criteria inside the transaction (at most two
// matches: more than one is as bad as many).
func (rw *rewriter) match(ctx context.Context, typ, criteria string) ([]*store.Version, error) {
	q, err := rw.s.criteria(ctx, typ, criteria, 2)
	if err != nil {
		return nil, err
	}
	found, err := rw.lookup(ctx, q.q)
	if err != nil {
		return nil, err
	}
	if len(found) > 1 {
		return nil, notSelective(typ, len(found))
	}
	return found, nil
}

// lookup searches the transaction; a rewriter without one (settling a
// Bundle before it takes the writer) fails with errNeedsLookup.
func (rw *rewriter) lookup(ctx context.Context, q *search.Query) ([]*store.Version, error) {
	if rw.tx == nil || rw.noLookup {
		return nil, errNeedsLookup
	}
	return matchIn(ctx, rw.tx, q)
}

func resourceID(res []byte) string {
	var r struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(res, &r)
	return r.ID
}

// rewrite replaces, everywhere in a resource (extensions and contained
// resources included), reference values that name another entry's
// fullUrl or that are conditional references. Only those string values
// change: the client's bytes are otherwise kept as sent. The bytes are
// returned unchanged when there is nothing to replace, and when they are
// malformed (validated already; the handler reports it).
func (rw *rewriter) rewrite(ctx context.Context, res []byte) ([]byte, error) {
	return rewriteReferences(res, func(ref string) (string, error) {
		return rw.target(ctx, ref)
	})
}

// target is what a reference becomes: another entry's Type/id, the one
// match of a conditional reference, or "" to leave it.
func (rw *rewriter) target(ctx context.Context, ref string) (string, error) {
	if to, ok := rw.fullURLs[ref]; ok {
		return to, nil
	}
	if strings.HasPrefix(ref, "urn:uuid:") || strings.HasPrefix(ref, "urn:oid:") {
		return "", outcome.New(http.StatusBadRequest, "not-found", "the reference "+quote(ref)+" names no entry of the Bundle")
	}
	typ, query, ok := strings.Cut(ref, "?")
	if !ok || !profiles.IsResourceType(typ) {
		return "", nil
	}
	found, err := rw.match(ctx, typ, query)
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "", outcome.New(http.StatusPreconditionFailed, "not-found", "the conditional reference "+quote(ref)+" matches no resource")
	}
	return typ + "/" + found[0].ID, nil
}
