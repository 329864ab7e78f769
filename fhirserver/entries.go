package fhirserver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// The write entries of a batch or transaction (create, update, patch,
// delete and their conditional forms) call the write interactions (writes.go)
// directly; other entries go through the router (dispatch). Either way an
// entry is checked, authorized and audited as the REST request it names:
// once, with the same Access, and answered with the same status, headers
// and body.

// entryExec is what the Bundle decided for one entry before running it.
type entryExec struct {
	// assignedID is the id chosen for a create (or a conditional update
	// that creates), so references to the entry's fullUrl could be
	// rewritten to it.
	assignedID string
	// info is what was read of the entry's resource before the
	// transaction took the writer (rewriting references changes neither
	// its type nor its id).
	info *fhirjson.Info
	// validated: the resource passed structural validation with its
	// Bundle (a transaction's entries), and is not checked again.
	validated bool
}

// entryWrite is the write interaction a method and path name.
type entryWrite struct {
	in      Interaction
	typ, id string
	run     func(s *Server, ctx context.Context, req *http.Request, typ, id string, body []byte, x entryExec) (written, error)
}

// typeSegment is typePath's pattern: what the router takes for a type.
var typeSegment = regexp.MustCompile(`^[A-Z][A-Za-z]*$`)

// writeEntry returns the write interaction of an entry's method and
// path (the router's path, under the prefix), as the route table maps
// them: POST [type], PUT and DELETE [type] and [type]/[id]. ok is false
// for any other entry.
func (s *Server) writeEntry(method, path string) (entryWrite, bool) {
	rest, ok := strings.CutPrefix(path, s.prefix+"/")
	if !ok {
		return entryWrite{}, false
	}
	typ, id, hasID := strings.Cut(rest, "/")
	if !typeSegment.MatchString(typ) || (hasID && (id == "" || strings.Contains(id, "/"))) {
		return entryWrite{}, false
	}
	switch {
	case method == http.MethodPost && !hasID:
		return entryWrite{Create, typ, "", runCreate}, true
	case method == http.MethodPut && !hasID:
		return entryWrite{Update, typ, "", runConditionalUpdate}, true
	case method == http.MethodPut:
		return entryWrite{Update, typ, id, runUpdate}, true
	case method == http.MethodDelete && !hasID:
		return entryWrite{Delete, typ, "", runConditionalDelete}, true
	case method == http.MethodDelete:
		return entryWrite{Delete, typ, id, runDelete}, true
	case method == http.MethodPatch && !hasID:
		return entryWrite{Patch, typ, "", runConditionalPatch}, true
	case method == http.MethodPatch:
		return entryWrite{Patch, typ, id, runPatch}, true
	}
	return entryWrite{}, false
}

func runCreate(s *Server, ctx context.Context, req *http.Request, typ, _ string, body []byte, x entryExec) (written, error) {
	body, _, err := s.entryResource(ctx, typ, body, x)
	if err != nil {
		return written{}, err
	}
	return s.createResource(ctx, createIn(req, typ, body, x.assignedID))
}

func runUpdate(s *Server, ctx context.Context, req *http.Request, typ, id string, body []byte, x entryExec) (written, error) {
	body, info, err := s.entryResource(ctx, typ, body, x)
	if err != nil {
		return written{}, err
	}
	in, err := updateIn(req, typ, id, body, info)
	if err != nil {
		return written{}, err
	}
	return s.updateResource(ctx, in)
}

func runConditionalUpdate(s *Server, ctx context.Context, req *http.Request, typ, _ string, body []byte, x entryExec) (written, error) {
	body, info, err := s.entryResource(ctx, typ, body, x)
	if err != nil {
		return written{}, err
	}
	in, err := conditionalUpdateIn(req, typ, body, info, x.assignedID)
	if err != nil {
		return written{}, err
	}
	return s.conditionalUpdateResource(ctx, in)
}

func runDelete(s *Server, ctx context.Context, req *http.Request, typ, id string, _ []byte, _ entryExec) (written, error) {
	in, err := deleteIn(req, typ, id)
	if err != nil {
		return written{}, err
	}
	return s.deleteResource(ctx, in)
}

func runConditionalDelete(s *Server, ctx context.Context, req *http.Request, typ, _ string, _ []byte, _ entryExec) (written, error) {
	return s.conditionalDeleteResource(ctx, &writeIn{typ: typ, criteria: req.URL.RawQuery})
}

func runPatch(s *Server, ctx context.Context, req *http.Request, typ, id string, body []byte, x entryExec) (written, error) {
	doc, pre, err := s.entryPatch(ctx, req, body, x)
	if err != nil {
		return written{}, err
	}
	return s.patchResource(ctx, typ, id, pre, doc)
}

func runConditionalPatch(s *Server, ctx context.Context, req *http.Request, typ, _ string, body []byte, x entryExec) (written, error) {
	doc, pre, err := s.entryPatch(ctx, req, body, x)
	if err != nil {
		return written{}, err
	}
	return s.conditionalPatchResource(ctx, typ, req.URL.RawQuery, pre, doc)
}

// entryPatch reads a PATCH entry's patch (a JSON Patch from a Binary, or
// a FHIRPath Patch) and preconditions as readPatch and the handler do.
func (s *Server) entryPatch(ctx context.Context, req *http.Request, body []byte, x entryExec) (patchDoc, preconditions, error) {
	doc, err := patchDocOf(req.Header.Get("Content-Type"), func() ([]byte, error) {
		return fhirjson.ReadBody(bytes.NewReader(body), s.cfg.Limits.MaxResourceBytes, -1)
	}, func() ([]byte, error) {
		body, _, err := s.entryResource(ctx, "Parameters", body, x)
		return body, err
	})
	if err != nil {
		return doc, preconditions{}, err
	}
	pre, err := writePreconditions(req)
	return doc, pre, err
}

// entryResource checks an entry's resource as readBody checks a request
// body: its size, the validation budget, its structure and its type.
func (s *Server) entryResource(ctx context.Context, typ string, body []byte, x entryExec) ([]byte, fhirjson.Info, error) {
	limit := s.cfg.Limits.MaxResourceBytes
	if typ == "Bundle" {
		limit = s.cfg.Limits.MaxBundleBytes
	}
	if n := int64(len(body)); n > limit {
		return nil, fhirjson.Info{}, tooLargeBody(n, limit)
	}
	release, err := s.budget.acquire(ctx, int64(len(body)))
	if err != nil {
		return nil, fhirjson.Info{}, err
	}
	defer release()
	info, err := bodyInfo(body, typ, s.validator.Check, x.info, x.validated)
	if err != nil {
		return nil, info, err
	}
	return body, info, nil
}

// runWrite runs a write entry as handle runs a REST request: the path's
// checks and the authorization of prepare, the interaction, its one
// AuditEvent, and a panic answered with 500. req carries the entry's
// URL and headers (its body is body).
func (s *Server) runWrite(ctx context.Context, req *http.Request, ew entryWrite, body []byte, x entryExec) (res entryResult) {
	c := &call{typ: ew.typ, id: ew.id}
	if s.recorded() {
		c.event = &event{access: Access{Interaction: ew.in, Type: ew.typ, ID: ew.id}, query: req.URL.RawQuery}
	}
	answered := false
	defer func() {
		if !answered {
			p := recover()
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.cfg.Logger.ErrorContext(ctx, "panic serving a Bundle entry", "method", req.Method, "panic", p)
			res = s.entryFailure(req, errors.New("panic"))
		}
		if c.event != nil {
			status := res.status
			if !answered {
				status = http.StatusInternalServerError
			}
			s.record(ctx, c.event, status, auth.ClientIP(req))
		}
	}()
	if err := s.prepare(req, ew.in, c); err != nil {
		res = s.entryFailure(req, err)
	} else if w, err := ew.run(s, ctx, req, ew.typ, ew.id, body, x); err != nil {
		res = s.entryFailure(req, err)
	} else {
		res = s.entryAnswer(req, c, w)
	}
	answered = true
	return res
}

// entryFailure is the answer fail writes for err, as an entry's.
func (s *Server) entryFailure(req *http.Request, err error) entryResult {
	status, f, body := s.failure(req, err)
	return entryResult{status: status, header: http.Header{}, body: formatted(f, body)}
}

// entryAnswer is the answer the REST handler (answer, writeResult) sends
// for a write's outcome, as an entry's.
func (s *Server) entryAnswer(req *http.Request, c *call, w written) entryResult {
	res := entryResult{header: http.Header{}}
	pref := preferReturn(req)
	body := func(b []byte) []byte { return formatted(c.format, b) }
	if w.deleted {
		if w.tomb != nil && (w.etagWithOutcome || pref != returnOutcome) {
			res.header.Set("ETag", etag(w.tomb.Version))
		}
		if pref == returnOutcome {
			res.status, res.body = http.StatusOK, body(outcome.Render(outcome.Information(w.msg)))
		} else {
			res.status = http.StatusNoContent
		}
		return res
	}
	v := w.v
	res.status = w.status
	res.header.Set("ETag", etag(v.Version))
	res.ref, res.lastUpdated = v.Type+"/"+v.ID, v.LastUpdated
	if c.event != nil {
		c.event.ref = res.ref
	}
	switch {
	case w.location != "":
		res.header.Set("Location", w.location)
	case w.status == http.StatusCreated:
		res.header.Set("Location", s.versionURL(v))
	}
	switch pref {
	case returnMinimal:
	case returnOutcome:
		res.body = body(outcome.Render(outcome.Information(w.msg)))
	default:
		res.body = body(v.Body)
	}
	return res
}
