package fhirserver

import (
	"bytes"
	"context"
	"mime"
	"net/http"
	"reflect"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/patch"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// patchDoc is a PATCH request body: a JSON Patch, or a FHIRPath Patch
// (a Parameters resource).
type patchDoc struct {
	jsonPatch bool
	body      []byte
}

// readPatch reads and checks a PATCH body. A FHIRPath Patch is a resource
// and passes the same structural validation as any other body.
func (s *Server) readPatch(r *http.Request) (patchDoc, error) {
	return patchDocOf(r.Header.Get("Content-Type"), func() ([]byte, error) {
		// Not sized by the declared length: nothing is reserved from the
		// budget for it, so memory follows the bytes that arrive.
		return fhirjson.ReadBody(r.Body, s.cfg.Limits.MaxResourceBytes, -1)
	}, func() ([]byte, error) {
		body, _, err := s.readBody(r, "Parameters")
		return body, err
	})
}

// patchDocOf reads a PATCH body of the media type contentType (a header's
// value) with jsonPatch or fhirPatch.
func patchDocOf(contentType string, jsonPatch, fhirPatch func() ([]byte, error)) (patchDoc, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = ""
	}
	switch mt {
	case negotiate.JSONPatch:
		body, err := jsonPatch()
		return patchDoc{jsonPatch: true, body: body}, err
	case negotiate.FHIRJSON, negotiate.JSON, "application/json+fhir":
		body, err := fhirPatch()
		return patchDoc{body: body}, err
	}
	return patchDoc{}, outcome.New(http.StatusUnsupportedMediaType, "not-supported",
		"PATCH takes a JSON Patch ("+negotiate.JSONPatch+") or a FHIRPath Patch Parameters resource ("+negotiate.FHIRJSON+"); got "+quote(contentType))
}

// patched applies doc to the current version and validates the result like
// any other write: a patch cannot change the type or the id.
func (s *Server) patched(ctx context.Context, c *call, prev *store.Version, doc patchDoc) (*store.Write, error) {
	if prev == nil {
		return nil, outcome.New(http.StatusNotFound, "not-found", c.typ+"/"+c.id+" is not known")
	}
	if prev.Deleted {
		return nil, gone(c, prev)
	}
	var out []byte
	var err error
	if doc.jsonPatch {
		out, err = patch.JSONPatch(prev.Body, doc.body)
	} else {
		out, err = patch.FHIRPathPatch(prev.Body, doc.body)
	}
	if err != nil {
		return nil, err
	}
	if same, err := sameJSON(out, prev.Body); err != nil || same {
		// A patch that changes nothing ([], or only test operations) makes
		// no version: the answer is the current one.
		return nil, err
	}
	release, err := s.budget.acquire(ctx, int64(len(out)))
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
	if info.ResourceType != c.typ || info.ID != c.id {
		return nil, outcome.New(http.StatusUnprocessableEntity, "processing", "a patch must not change the resource's type or id")
	}
	if out, err = s.resolveReferences(ctx, out, prev); err != nil {
		return nil, err
	}
	wr, err := s.nextWrite(ctx, c.typ, c.id, prev, out, store.MethodPatch)
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

// patchResource is the patch of typ/id by doc.
func (s *Server) patchResource(ctx context.Context, typ, id string, pre preconditions, doc patchDoc) (written, error) {
	c := &call{typ: typ, id: id}
	v, err := s.mutate(ctx, c, pre, func(prev *store.Version) (*store.Write, error) {
		return s.patched(ctx, c, prev, doc)
	})
	if err != nil {
		return written{}, err
	}
	return written{status: http.StatusOK, v: v, msg: "patched " + typ + "/" + id}, nil
}

// conditionalPatchResource is PATCH [type]?criteria: exactly one match is
// patched.
func (s *Server) conditionalPatchResource(ctx context.Context, typ, criteria string, pre preconditions, doc patchDoc) (written, error) {
	target, v, err := s.applyToMatch(ctx, typ, criteria, pre, func() (string, error) {
		return "", outcome.New(http.StatusNotFound, "not-found", "no "+typ+" matches the criteria")
	}, func(target *call, prev *store.Version) (*store.Write, error) {
		return s.patched(ctx, target, prev, doc)
	})
	if err != nil {
		return written{}, err
	}
	return written{status: http.StatusOK, v: v, msg: "patched " + typ + "/" + target.id}, nil
}

// patch is PATCH [type]/[id].
func (s *Server) patch(w http.ResponseWriter, r *http.Request, c *call) error {
	doc, err := s.readPatch(r)
	if err != nil {
		return err
	}
	pre, err := writePreconditions(r)
	if err != nil {
		return err
	}
	return s.answer(w, r, c)(s.patchResource(r.Context(), c.typ, c.id, pre, doc))
}

// conditionalPatch is PATCH [type]?criteria.
func (s *Server) conditionalPatch(w http.ResponseWriter, r *http.Request, c *call) error {
	doc, err := s.readPatch(r)
	if err != nil {
		return err
	}
	pre, err := writePreconditions(r)
	if err != nil {
		return err
	}
	return s.answer(w, r, c)(s.conditionalPatchResource(r.Context(), c.typ, r.URL.RawQuery, pre, doc))
}
