package fhirserver

import (
	"cmp"
	"context"
	"net/http"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/ids"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// The write interactions (create, update, delete, patch and their
// conditional forms) take a WriteIn and return a Response: the REST layer
// reads a request into a WriteIn and sends the Response; a Bundle entry is
// read into the same WriteIn and its Response becomes the entry's.

// WriteIn is what a write interaction takes from its request, besides the
// path and the query string (a conditional write's criteria).
type WriteIn struct {
	// Body is the resource written, which passed CheckResource for the
	// path's type, and Info what that check read of it. A patch's Body
	// is the patch: a FHIRPath Patch (a Parameters resource that passed
	// CheckResource), or a JSON Patch (JSONPatch).
	Body      []byte
	Info      fhirjson.Info
	JSONPatch bool
	// IfMatch and IfNoneMatch are the lines of those headers; IfNoneExist
	// a create's criteria.
	IfMatch, IfNoneMatch []string
	IfNoneExist          string
	// AssignedID is the id a transaction Bundle chose for the entry's
	// create (or conditional update that creates), so that references to
	// its fullUrl could be rewritten to it.
	AssignedID string
	// Return is what the client prefers the answer to hold
	// (Prefer: return=…).
	Return negotiate.Return
}

// written is a write's outcome, before it is answered.
type written struct {
	status int
	// v is the version the answer is about (ETag, Last-Modified, the
	// resource returned); nil for a delete.
	v *store.Version
	// location is set when the answer points at an existing resource
	// (a conditional create that matched); a 201 points at v.
	location string
	// msg is the OperationOutcome a client that prefers one gets.
	msg string
	// A delete answers 204 with the tombstone's ETag (tomb; nil when
	// there is no single one), or 200 with msg. A conditional delete's
	// ETag is left out of the outcome answer (etagWithOutcome false).
	deleted         bool
	tomb            *store.Version
	etagWithOutcome bool
}

// Create is the create interaction: a new id (or the one a transaction
// Bundle assigned), or with If-None-Exist the match's answer.
func (c *Call) Create(in WriteIn) (Response, error) {
	w, err := c.s.createResource(c.ctx, c.typ, &in)
	return c.answer(in.Return, w, err)
}

// Update is the update interaction of the path's resource (created when
// it never existed or is deleted): the body's id must be the path's.
func (c *Call) Update(in WriteIn) (Response, error) {
	switch in.Info.ID {
	case "":
		return Response{}, outcome.New(http.StatusBadRequest, "required", "an update must carry the resource id in the body", c.typ+".id")
	case c.id:
	default:
		return Response{}, outcome.New(http.StatusBadRequest, "invalid", "the body's id "+quote(in.Info.ID)+" differs from the URL's id "+quote(c.id), c.typ+".id")
	}
	pre, err := parsePreconditions(in.IfMatch, in.IfNoneMatch)
	if err != nil {
		return Response{}, err
	}
	w, err := c.s.updateResource(c.ctx, c.typ, c.id, &in, pre)
	return c.answer(in.Return, w, err)
}

// ConditionalUpdate is PUT [type]?criteria: no match → create (with the
// body's id if it has one); one match → update it; more → 412.
func (c *Call) ConditionalUpdate(in WriteIn) (Response, error) {
	pre, err := parsePreconditions(in.IfMatch, in.IfNoneMatch)
	if err != nil {
		return Response{}, err
	}
	w, err := c.s.conditionalUpdateResource(c.ctx, c.typ, c.query, &in, pre)
	return c.answer(in.Return, w, err)
}

// Delete is the delete interaction of the path's resource; deleting what
// is not there is no error.
func (c *Call) Delete(in WriteIn) (Response, error) {
	pre, err := parsePreconditions(in.IfMatch, in.IfNoneMatch)
	if err != nil {
		return Response{}, err
	}
	w, err := c.s.deleteResource(c.ctx, c.typ, c.id, pre)
	return c.answer(in.Return, w, err)
}

// ConditionalDelete is DELETE [type]?criteria (Config.MaxConditionalDeletes).
func (c *Call) ConditionalDelete(in WriteIn) (Response, error) {
	w, err := c.s.conditionalDeleteResource(c.ctx, c.typ, c.query)
	return c.answer(in.Return, w, err)
}

// answer turns a write's outcome into its Response, as the client's
// Prefer asks: the resource, nothing, or an OperationOutcome.
func (c *Call) answer(ret negotiate.Return, w written, err error) (Response, error) {
	if err != nil {
		return Response{}, err
	}
	if w.deleted {
		res := Response{Status: http.StatusNoContent}
		if w.tomb != nil && (w.etagWithOutcome || ret != negotiate.ReturnOutcome) {
			res.Version = w.tomb
		}
		if ret == negotiate.ReturnOutcome {
			res.Status, res.Body = http.StatusOK, outcome.Render(outcome.Information(w.msg))
		}
		return res, nil
	}
	c.named(w.v)
	res := Response{Status: w.status, Version: w.v, Location: w.location}
	if w.status == http.StatusCreated {
		res.Location = c.s.versionURL(w.v)
	}
	switch ret {
	case negotiate.ReturnMinimal:
	case negotiate.ReturnOutcome:
		res.Body = outcome.Render(outcome.Information(w.msg))
	default:
		res.Body = w.v.Body
	}
	return res, nil
}

// createResource is create: a new id (or the one a transaction Bundle
// assigned), or with If-None-Exist the match's answer.
func (s *Server) createResource(ctx context.Context, typ string, in *WriteIn) (written, error) {
	// The spec says a server ignores any id in a create body; the new id is
	// ours (or the one a transaction Bundle assigned to this entry).
	id := in.AssignedID
	if id == "" {
		id = ids.New(s.cfg.Now())
	}
	if in.IfNoneExist != "" {
		return s.conditionalCreate(ctx, typ, in, id)
	}
	body, err := s.resolveReferences(ctx, in.Body, nil)
	if err != nil {
		return written{}, err
	}
	gen := s.registry.Generation()
	wr, err := s.nextWrite(ctx, typ, id, nil, body, store.MethodCreate)
	if err != nil {
		return written{}, err
	}
	if tx, ok := txFrom(ctx); ok {
		err = tx.Put(ctx, wr)
	} else {
		err = s.store.Put(ctx, wr)
		if err == nil && gen != s.registry.Generation() {
			err = s.reindexWritten(ctx, wr)
		}
	}
	if err != nil {
		return written{}, err
	}
	return written{status: http.StatusCreated, v: stored(wr), msg: "created " + typ + "/" + wr.ID}, nil
}

// conditionalCreate is create with If-None-Exist: nothing matches → create;
// one match → 200 with the existing resource; more → 412.
func (s *Server) conditionalCreate(ctx context.Context, typ string, in *WriteIn, id string) (written, error) {
	crit, err := s.Criteria(ctx, typ, in.IfNoneExist, 2)
	if err != nil {
		return written{}, err
	}
	var existing, created *store.Version
	err = s.guarded(ctx, crit, func(tx store.Tx) error {
		found, err := crit.Match(ctx, tx, 0)
		if err != nil {
			return err
		}
		switch len(found) {
		case 0:
		case 1:
			existing = found[0]
			return nil
		default:
			return crit.NotSelective(len(found))
		}
		// Only a resource that will be created has its conditional
		// references resolved: a match answers with what exists.
		body, err := s.resolveReferences(ctx, in.Body, nil)
		if err != nil {
			return err
		}
		wr, err := s.nextWrite(ctx, typ, id, nil, body, store.MethodCreate)
		if err != nil {
			return err
		}
		if err := tx.Put(ctx, wr); err != nil {
			return err
		}
		created = stored(wr)
		return nil
	})
	if err != nil {
		return written{}, err
	}
	if existing != nil {
		return written{status: http.StatusOK, v: existing, location: s.versionURL(existing),
			msg: "a matching " + typ + " exists: " + existing.Type + "/" + existing.ID + "; nothing was created"}, nil
	}
	return written{status: http.StatusCreated, v: created, msg: "created " + typ + "/" + created.ID}, nil
}

// updateResource is update of typ/in.id (created when it never
// existed or is deleted).
func (s *Server) updateResource(ctx context.Context, typ, id string, in *WriteIn, pre preconditions) (written, error) {
	var created bool
	v, err := s.mutate(ctx, typ, id, pre, func(prev *store.Version) (*store.Write, error) {
		created = prev == nil || prev.Deleted
		body, err := s.resolveReferences(ctx, in.Body, prev)
		if err != nil {
			return nil, err
		}
		wr, err := s.nextWrite(ctx, typ, id, prev, body, store.MethodUpdate)
		return &wr, err
	})
	if err != nil {
		return written{}, err
	}
	return updated(typ, id, v, created), nil
}

// updated answers an update: 200, or 201 when it created the resource
// (no version before it, or a deleted one).
func updated(typ, id string, v *store.Version, created bool) written {
	if created {
		return written{status: http.StatusCreated, v: v, msg: "created " + typ + "/" + id}
	}
	return written{status: http.StatusOK, v: v, msg: "updated " + typ + "/" + id}
}

// conditionalUpdateResource is PUT [type]?criteria: no match → create
// (with the body's id if it has one); one match → update it; more → 412.
func (s *Server) conditionalUpdateResource(ctx context.Context, typ, criteria string, in *WriteIn, pre preconditions) (written, error) {
	var created bool
	id, v, err := s.applyToMatch(ctx, typ, criteria, pre, func() (string, error) {
		// A transaction Bundle decided the id already, so that references
		// to the entry could be rewritten to it.
		return cmp.Or(in.AssignedID, in.Info.ID, ids.New(s.cfg.Now())), nil
	}, func(id string, prev *store.Version) (*store.Write, error) {
		if in.Info.ID != "" && in.Info.ID != id {
			return nil, outcome.New(http.StatusBadRequest, "invalid", "the body's id "+quote(in.Info.ID)+" differs from the matching resource "+typ+"/"+id, typ+".id")
		}
		created = prev == nil || prev.Deleted
		body, err := s.resolveReferences(ctx, in.Body, prev)
		if err != nil {
			return nil, err
		}
		wr, err := s.nextWrite(ctx, typ, id, prev, body, store.MethodUpdate)
		return &wr, err
	})
	if err != nil {
		return written{}, err
	}
	return updated(typ, id, v, created), nil
}

// deleteResource is delete of typ/in.id; deleting what is not there
// is no error.
func (s *Server) deleteResource(ctx context.Context, typ, id string, pre preconditions) (written, error) {
	v, err := s.mutate(ctx, typ, id, pre, func(prev *store.Version) (*store.Write, error) {
		if prev == nil || prev.Deleted {
			return nil, nil // deleting what is not there is idempotent
		}
		wr, err := s.nextWrite(ctx, typ, id, prev, nil, store.MethodDelete)
		return &wr, err
	})
	if err != nil {
		return written{}, err
	}
	return written{deleted: true, tomb: v, etagWithOutcome: true, msg: "deleted " + typ + "/" + id}, nil
}

// conditionalDeleteResource is DELETE [type]?criteria: every match is
// deleted when there are at most Config.MaxConditionalDeletes of them (1
// unless multiple deletes are enabled); more → 412. No match is not an
// error: the criteria's resources are gone either way, as with a plain
// delete.
func (s *Server) conditionalDeleteResource(ctx context.Context, typ, criteria string) (written, error) {
	limit := max(s.cfg.MaxConditionalDeletes, 1)
	crit, err := s.Criteria(ctx, typ, criteria, limit+1)
	if err != nil {
		return written{}, err
	}
	var last *store.Version
	n := 0
	err = s.guarded(ctx, crit, func(tx store.Tx) error {
		found, err := crit.Match(ctx, tx, 0)
		if err != nil {
			return err
		}
		if len(found) > limit {
			return crit.NotSelective(len(found))
		}
		if len(found) > 1 && tx == store.Tx(s.store) {
			// Without a transaction a failure midway would leave some
			// matches deleted and others not.
			return outcome.New(http.StatusNotImplemented, "not-supported",
				"deleting several matches at once needs transactions, which this deployment's store does not offer")
		}
		for _, m := range found {
			wr, err := s.nextWrite(ctx, m.Type, m.ID, m, nil, store.MethodDelete)
			if err != nil {
				return err
			}
			if err := tx.Put(ctx, wr); err != nil {
				return err
			}
			last = stored(wr)
		}
		n = len(found)
		return nil
	})
	if err != nil {
		return written{}, err
	}
	if n != 1 {
		last = nil // no single ETag to report
	}
	return written{deleted: true, tomb: last, msg: "deleted " + strconv.Itoa(n) + " " + typ + " resource(s)"}, nil
}
