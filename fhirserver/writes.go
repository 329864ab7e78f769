package fhirserver

import (
	"cmp"
	"context"
	"net/http"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// The write interactions (create, update, delete, and their conditional
// forms) take a writeIn and return a written: neither knows HTTP. The REST
// handlers read a request into a writeIn and answer the written; a Bundle
// entry is read into the same writeIn and its written becomes the entry's
// response (bundle.go), without going through the router again.

// writeIn is what a write interaction takes from its request.
type writeIn struct {
	typ, id string
	// criteria is a conditional update's or delete's query string.
	criteria string
	body     []byte
	info     fhirjson.Info // what structural validation read of body
	pre      preconditions // If-Match, If-None-Match
	// ifNoneExist is a create's If-None-Exist criteria.
	ifNoneExist string
	// assignedID is the id a transaction Bundle chose for the entry's
	// create, so that references to its fullUrl could be rewritten to it.
	assignedID string
}

// written is a write's answer, before it is sent anywhere.
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

// createIn reads a create's request; body passed structural validation.
func createIn(r *http.Request, typ string, body []byte, assignedID string) *writeIn {
	return &writeIn{typ: typ, body: body, ifNoneExist: r.Header.Get("If-None-Exist"), assignedID: assignedID}
}

// updateIn reads an update's request: the body's id must be the URL's.
func updateIn(r *http.Request, typ, id string, body []byte, info fhirjson.Info) (*writeIn, error) {
	switch info.ID {
	case "":
		return nil, outcome.New(http.StatusBadRequest, "required", "an update must carry the resource id in the body", typ+".id")
	case id:
	default:
		return nil, outcome.New(http.StatusBadRequest, "invalid", "the body's id "+quote(info.ID)+" differs from the URL's id "+quote(id), typ+".id")
	}
	pre, err := writePreconditions(r)
	if err != nil {
		return nil, err
	}
	return &writeIn{typ: typ, id: id, body: body, info: info, pre: pre}, nil
}

// conditionalUpdateIn reads a conditional update's request.
func conditionalUpdateIn(r *http.Request, typ string, body []byte, info fhirjson.Info, assignedID string) (*writeIn, error) {
	pre, err := writePreconditions(r)
	if err != nil {
		return nil, err
	}
	return &writeIn{typ: typ, criteria: r.URL.RawQuery, body: body, info: info, pre: pre, assignedID: assignedID}, nil
}

// deleteIn reads a delete's request.
func deleteIn(r *http.Request, typ, id string) (*writeIn, error) {
	pre, err := writePreconditions(r)
	if err != nil {
		return nil, err
	}
	return &writeIn{typ: typ, id: id, pre: pre}, nil
}

// createResource is create: a new id (or the one a transaction Bundle
// assigned), or with If-None-Exist the match's answer.
func (s *Server) createResource(ctx context.Context, in *writeIn) (written, error) {
	// The spec says a server ignores any id in a create body; the new id is
	// ours (or the one a transaction Bundle assigned to this entry).
	id := in.assignedID
	if id == "" {
		id = newID(s.cfg.Now())
	}
	if in.ifNoneExist != "" {
		return s.conditionalCreate(ctx, in, id)
	}
	body, err := s.resolveReferences(ctx, in.body, nil)
	if err != nil {
		return written{}, err
	}
	gen := s.registry.Generation()
	wr, err := s.nextWrite(ctx, in.typ, id, nil, body, store.MethodCreate)
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
	return written{status: http.StatusCreated, v: stored(wr), msg: "created " + in.typ + "/" + wr.ID}, nil
}

// conditionalCreate is create with If-None-Exist: nothing matches → create;
// one match → 200 with the existing resource; more → 412.
func (s *Server) conditionalCreate(ctx context.Context, in *writeIn, id string) (written, error) {
	crit, err := s.criteria(ctx, in.typ, in.ifNoneExist, 2)
	if err != nil {
		return written{}, err
	}
	var existing, created *store.Version
	err = s.guarded(ctx, crit, func(tx store.Tx) error {
		found, err := matchIn(ctx, tx, crit.q)
		if err != nil {
			return err
		}
		switch len(found) {
		case 0:
		case 1:
			existing = found[0]
			return nil
		default:
			return notSelective(in.typ, len(found))
		}
		// Only a resource that will be created has its conditional
		// references resolved: a match answers with what exists.
		body, err := s.resolveReferences(ctx, in.body, nil)
		if err != nil {
			return err
		}
		wr, err := s.nextWrite(ctx, in.typ, id, nil, body, store.MethodCreate)
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
			msg: "a matching " + in.typ + " exists: " + existing.Type + "/" + existing.ID + "; nothing was created"}, nil
	}
	return written{status: http.StatusCreated, v: created, msg: "created " + in.typ + "/" + created.ID}, nil
}

// updateResource is update of in.typ/in.id (created when it never
// existed or is deleted).
func (s *Server) updateResource(ctx context.Context, in *writeIn) (written, error) {
	c := &call{typ: in.typ, id: in.id}
	var created bool
	v, err := s.mutate(ctx, c, in.pre, func(prev *store.Version) (*store.Write, error) {
		created = prev == nil || prev.Deleted
		body, err := s.resolveReferences(ctx, in.body, prev)
		if err != nil {
			return nil, err
		}
		wr, err := s.nextWrite(ctx, in.typ, in.id, prev, body, store.MethodUpdate)
		return &wr, err
	})
	if err != nil {
		return written{}, err
	}
	return updated(c, v, created), nil
}

// updated answers an update: 200, or 201 when it created the resource
// (no version before it, or a deleted one).
func updated(c *call, v *store.Version, created bool) written {
	if created {
		return written{status: http.StatusCreated, v: v, msg: "created " + c.typ + "/" + c.id}
	}
	return written{status: http.StatusOK, v: v, msg: "updated " + c.typ + "/" + c.id}
}

// conditionalUpdateResource is PUT [type]?criteria: no match → create
// (with the body's id if it has one); one match → update it; more → 412.
func (s *Server) conditionalUpdateResource(ctx context.Context, in *writeIn) (written, error) {
	var created bool
	target, v, err := s.applyToMatch(ctx, in.typ, in.criteria, in.pre, func() (string, error) {
		// A transaction Bundle decided the id already, so that references
		// to the entry could be rewritten to it.
		return cmp.Or(in.assignedID, in.info.ID, newID(s.cfg.Now())), nil
	}, func(target *call, prev *store.Version) (*store.Write, error) {
		if in.info.ID != "" && in.info.ID != target.id {
			return nil, outcome.New(http.StatusBadRequest, "invalid", "the body's id "+quote(in.info.ID)+" differs from the matching resource "+in.typ+"/"+target.id, in.typ+".id")
		}
		created = prev == nil || prev.Deleted
		body, err := s.resolveReferences(ctx, in.body, prev)
		if err != nil {
			return nil, err
		}
		wr, err := s.nextWrite(ctx, in.typ, target.id, prev, body, store.MethodUpdate)
		return &wr, err
	})
	if err != nil {
		return written{}, err
	}
	return updated(target, v, created), nil
}

// deleteResource is delete of in.typ/in.id; deleting what is not there
// is no error.
func (s *Server) deleteResource(ctx context.Context, in *writeIn) (written, error) {
	c := &call{typ: in.typ, id: in.id}
	v, err := s.mutate(ctx, c, in.pre, func(prev *store.Version) (*store.Write, error) {
		if prev == nil || prev.Deleted {
			return nil, nil // deleting what is not there is idempotent
		}
		wr, err := s.nextWrite(ctx, in.typ, in.id, prev, nil, store.MethodDelete)
		return &wr, err
	})
	if err != nil {
		return written{}, err
	}
	return written{deleted: true, tomb: v, etagWithOutcome: true, msg: "deleted " + in.typ + "/" + in.id}, nil
}

// conditionalDeleteResource is DELETE [type]?criteria: every match is
// deleted when there are at most Config.MaxConditionalDeletes of them (1
// unless multiple deletes are enabled); more → 412. No match is not an
// error: the criteria's resources are gone either way, as with a plain
// delete.
func (s *Server) conditionalDeleteResource(ctx context.Context, in *writeIn) (written, error) {
	limit := max(s.cfg.MaxConditionalDeletes, 1)
	crit, err := s.criteria(ctx, in.typ, in.criteria, limit+1)
	if err != nil {
		return written{}, err
	}
	var last *store.Version
	n := 0
	err = s.guarded(ctx, crit, func(tx store.Tx) error {
		found, err := matchIn(ctx, tx, crit.q)
		if err != nil {
			return err
		}
		if len(found) > limit {
			return notSelective(in.typ, len(found))
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
	return written{deleted: true, tomb: last, msg: "deleted " + strconv.Itoa(n) + " " + in.typ + " resource(s)"}, nil
}

// The REST handlers of the writes: read the request, write, answer.

func (s *Server) create(w http.ResponseWriter, r *http.Request, c *call) error {
	body, _, err := s.readBody(r, c.typ)
	if err != nil {
		return err
	}
	return s.answer(w, r, c)(s.createResource(r.Context(), createIn(r, c.typ, body, "")))
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, c *call) error {
	body, info, err := s.readBody(r, c.typ)
	if err != nil {
		return err
	}
	in, err := updateIn(r, c.typ, c.id, body, info)
	if err != nil {
		return err
	}
	return s.answer(w, r, c)(s.updateResource(r.Context(), in))
}

func (s *Server) conditionalUpdate(w http.ResponseWriter, r *http.Request, c *call) error {
	body, info, err := s.readBody(r, c.typ)
	if err != nil {
		return err
	}
	in, err := conditionalUpdateIn(r, c.typ, body, info, "")
	if err != nil {
		return err
	}
	return s.answer(w, r, c)(s.conditionalUpdateResource(r.Context(), in))
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, c *call) error {
	in, err := deleteIn(r, c.typ, c.id)
	if err != nil {
		return err
	}
	return s.answer(w, r, c)(s.deleteResource(r.Context(), in))
}

func (s *Server) conditionalDelete(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.answer(w, r, c)(s.conditionalDeleteResource(r.Context(), &writeIn{typ: c.typ, criteria: r.URL.RawQuery}))
}

// answer returns what writes a write's outcome as the REST answer to r.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, c *call) func(written, error) error {
	return func(res written, err error) error {
		if err != nil {
			return err
		}
		if res.deleted {
			outcomePreferred := negotiate.PreferReturn(r) == negotiate.ReturnOutcome
			if res.tomb != nil && (res.etagWithOutcome || !outcomePreferred) {
				w.Header().Set("ETag", negotiate.ETag(res.tomb.Version))
			}
			if outcomePreferred {
				negotiate.WriteBody(w, c.format, http.StatusOK, outcome.Render(outcome.Information(res.msg)))
				return nil
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		if res.location != "" {
			w.Header().Set("Location", res.location)
		}
		s.writeResult(w, r, c, res.status, res.v, res.msg)
		return nil
	}
}
