package fhirserver

import (
	"bytes"
	"context"
	"net/http"
	"reflect"

	"github.com/kiln-fhir/kiln/fhirserver/internal/patch"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Patch is PATCH [type]/[id]: in.Body, a JSON Patch or a FHIRPath Patch,
// applied to the current version.
func (c *Call) Patch(in WriteIn) (Response, error) {
	pre, err := parsePreconditions(in.IfMatch, in.IfNoneMatch)
	if err != nil {
		return Response{}, err
	}
	typ, id := c.typ, c.id
	v, err := c.s.mutate(c.ctx, typ, id, pre, func(prev *store.Version) (*store.Write, error) {
		return c.s.patched(c.ctx, typ, id, prev, &in)
	})
	return c.answer(in.Return, written{status: http.StatusOK, v: v, msg: "patched " + typ + "/" + id}, err)
}

// ConditionalPatch is PATCH [type]?criteria: exactly one match is patched.
func (c *Call) ConditionalPatch(in WriteIn) (Response, error) {
	pre, err := parsePreconditions(in.IfMatch, in.IfNoneMatch)
	if err != nil {
		return Response{}, err
	}
	typ := c.typ
	id, v, err := c.s.applyToMatch(c.ctx, typ, c.query, pre, func() (string, error) {
		return "", outcome.New(http.StatusNotFound, "not-found", "no "+typ+" matches the criteria")
	}, func(id string, prev *store.Version) (*store.Write, error) {
		return c.s.patched(c.ctx, typ, id, prev, &in)
	})
	return c.answer(in.Return, written{status: http.StatusOK, v: v, msg: "patched " + typ + "/" + id}, err)
}

// patched applies the patch to the current version and validates the
// result like any other write: a patch cannot change the type or the id.
func (s *Server) patched(ctx context.Context, typ, id string, prev *store.Version, in *WriteIn) (*store.Write, error) {
	if prev == nil {
		return nil, outcome.New(http.StatusNotFound, "not-found", typ+"/"+id+" is not known")
	}
	if prev.Deleted {
		return nil, gone(prev)
	}
	var out []byte
	var err error
	if in.JSONPatch {
		out, err = patch.JSONPatch(prev.Body, in.Body)
	} else {
		out, err = patch.FHIRPathPatch(prev.Body, in.Body)
	}
	if err != nil {
		return nil, err
	}
	if same, err := sameJSON(out, prev.Body); err != nil || same {
		// A patch that changes nothing ([], or only test operations) makes
		// no version: the answer is the current one.
		return nil, err
	}
	release, err := s.budget.Acquire(ctx, int64(len(out)))
	if err != nil {
		return nil, err
	}
	defer release()
	info, err := s.validator.Check(out)
	if err != nil {
		if oe, ok := outcome.As(err); ok && oe.Status == http.StatusBadRequest {
			// The patch was well formed; the resource it produces is not.
			oe.Status = http.StatusUnprocessableEntity
		}
		return nil, err
	}
	if info.ResourceType != typ || info.ID != id {
		return nil, outcome.New(http.StatusUnprocessableEntity, "processing", "a patch must not change the resource's type or id")
	}
	if out, err = s.resolveReferences(ctx, out, prev); err != nil {
		return nil, err
	}
	wr, err := s.nextWrite(ctx, typ, id, prev, out, store.MethodPatch)
	return &wr, err
}

// sameJSON reports whether a and b hold the same JSON value (member order
// and spacing aside).
func sameJSON(a, b []byte) (bool, error) {
	if bytes.Equal(a, b) {
		return true, nil
	}
	x, err := decodeResource(a)
	if err != nil {
		return false, err
	}
	y, err := decodeResource(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(x, y), nil
}
