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
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// The entries of a batch or transaction that name a write (create,
// update, patch, delete and their conditional forms) or a read (read,
// vread, type and system search, history) call the interaction (writes.go,
// crud.go, searching.go, history.go) directly; other entries (operations,
// POST _search, compartment search) go through the router (dispatch). Either way an
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

// entryRoute is the interaction a method and path name, and how an entry
// runs it.
type entryRoute struct {
	in           Interaction
	typ, id, vid string
	run          entryRun
}

// entryRun runs an entry's interaction; c is passed by value so that the
// call of every entry is not moved to the heap.
type entryRun func(s *Server, ctx context.Context, req *http.Request, c call, body []byte, x entryExec) (entryResult, error)

// The write interactions as entries, wrapped once.
var (
	entryCreate            = write(runCreate)
	entryConditionalUpdate = write(runConditionalUpdate)
	entryUpdate            = write(runUpdate)
	entryConditionalDelete = write(runConditionalDelete)
	entryDelete            = write(runDelete)
	entryConditionalPatch  = write(runConditionalPatch)
	entryPatch             = write(runPatch)
)

// typeSegment is typePath's pattern: what the router takes for a type.
var typeSegment = regexp.MustCompile(`^[A-Z][A-Za-z]*$`)

// entryRouteOf returns the interaction of an entry's method and path (the
// router's path, under the prefix), as the route table maps them: the
// writes (POST [type], PUT, PATCH and DELETE [type] and [type]/[id]), and
// GET of read, vread, the type and system searches and the histories.
// ok is false for any other entry (operations, POST _search, a
// compartment search), which goes through the router.
func (s *Server) entryRouteOf(method, path string) (entryRoute, bool) {
	if method == http.MethodGet && path == s.prefix {
		return entryRoute{in: SearchSystem, run: runSearchSystem}, true
	}
	rest, ok := strings.CutPrefix(path, s.prefix+"/")
	if !ok {
		return entryRoute{}, false
	}
	if method == http.MethodGet {
		return getRoute(strings.Split(rest, "/"))
	}
	typ, id, hasID := strings.Cut(rest, "/")
	if !typeSegment.MatchString(typ) || (hasID && (id == "" || strings.Contains(id, "/"))) {
		return entryRoute{}, false
	}
	switch {
	case method == http.MethodPost && !hasID:
		return entryRoute{in: Create, typ: typ, run: entryCreate}, true
	case method == http.MethodPut && !hasID:
		return entryRoute{in: Update, typ: typ, run: entryConditionalUpdate}, true
	case method == http.MethodPut:
		return entryRoute{in: Update, typ: typ, id: id, run: entryUpdate}, true
	case method == http.MethodDelete && !hasID:
		return entryRoute{in: Delete, typ: typ, run: entryConditionalDelete}, true
	case method == http.MethodDelete:
		return entryRoute{in: Delete, typ: typ, id: id, run: entryDelete}, true
	case method == http.MethodPatch && !hasID:
		return entryRoute{in: Patch, typ: typ, run: entryConditionalPatch}, true
	case method == http.MethodPatch:
		return entryRoute{in: Patch, typ: typ, id: id, run: entryPatch}, true
	}
	return entryRoute{}, false
}

// getRoute is the read interaction of a GET entry's path segments under
// the prefix, in the order the route table tries them.
func getRoute(seg []string) (entryRoute, bool) {
	switch {
	case len(seg) == 1 && seg[0] == "_history":
		return entryRoute{in: HistorySystem, run: runHistory}, true
	case !typeSegment.MatchString(seg[0]):
		return entryRoute{}, false
	case len(seg) == 1:
		return entryRoute{in: SearchType, typ: seg[0], run: runSearchType}, true
	case len(seg) == 2 && seg[1] == "_history":
		return entryRoute{in: HistoryType, typ: seg[0], run: runHistory}, true
	case len(seg) == 2 && seg[1] != "":
		return entryRoute{in: Read, typ: seg[0], id: seg[1], run: runRead}, true
	case len(seg) == 3 && seg[1] != "" && seg[2] == "_history":
		return entryRoute{in: HistoryInstance, typ: seg[0], id: seg[1], run: runHistory}, true
	case len(seg) == 4 && seg[1] != "" && seg[2] == "_history" && seg[3] != "":
		return entryRoute{in: VRead, typ: seg[0], id: seg[1], vid: seg[3], run: runVRead}, true
	}
	return entryRoute{}, false
}

func runRead(s *Server, ctx context.Context, req *http.Request, c call, _ []byte, _ entryExec) (entryResult, error) {
	g, err := s.readResource(ctx, readInOf(req, &c))
	if err != nil {
		return entryResult{}, err
	}
	return entryRead(&c, g), nil
}

func runVRead(s *Server, ctx context.Context, req *http.Request, c call, _ []byte, _ entryExec) (entryResult, error) {
	g, err := s.vreadResource(ctx, readInOf(req, &c))
	if err != nil {
		return entryResult{}, err
	}
	return entryRead(&c, g), nil
}

// entryRead is the answer answerRead sends for a read's result, as an
// entry's.
func entryRead(c *call, g got) entryResult {
	c.named(g.v)
	res := entryResult{status: http.StatusOK, header: http.Header{}, ref: g.v.Type + "/" + g.v.ID, lastUpdated: g.v.LastUpdated}
	res.header.Set("ETag", negotiate.ETag(g.v.Version))
	if g.notModified {
		res.status = http.StatusNotModified
		return res
	}
	res.body = negotiate.Formatted(c.format, g.body)
	return res
}

func runSearchType(s *Server, ctx context.Context, req *http.Request, c call, _ []byte, _ entryExec) (entryResult, error) {
	return s.entrySearch(ctx, req, &c, searchRequest{types: []string{c.typ}, params: req.URL.Query(), path: "/" + c.typ})
}

func runSearchSystem(s *Server, ctx context.Context, req *http.Request, c call, _ []byte, _ entryExec) (entryResult, error) {
	return s.entrySearch(ctx, req, &c, searchRequest{params: req.URL.Query(), path: ""})
}

// entrySearch runs a search entry as runSearch answers one.
func (s *Server) entrySearch(ctx context.Context, req *http.Request, c *call, sr searchRequest) (entryResult, error) {
	res, err := s.searchResources(ctx, sr, negotiate.PreferStrict(req))
	if err != nil {
		return entryResult{}, err
	}
	return entryResult{status: http.StatusOK, header: http.Header{}, body: negotiate.Formatted(c.format, s.searchBundle(res))}, nil
}

func runHistory(s *Server, ctx context.Context, req *http.Request, c call, _ []byte, _ entryExec) (entryResult, error) {
	h, err := s.historyResources(ctx, historyIn{typ: c.typ, id: c.id, params: req.URL.Query()})
	if err != nil {
		return entryResult{}, err
	}
	return entryResult{status: http.StatusOK, header: http.Header{}, body: negotiate.Formatted(c.format, s.historyBundle(h))}, nil
}

// write runs a write interaction as an entry: its written becomes the
// entry's answer (entryAnswer).
func write(run func(s *Server, ctx context.Context, req *http.Request, typ, id string, body []byte, x entryExec) (written, error)) entryRun {
	return func(s *Server, ctx context.Context, req *http.Request, c call, body []byte, x entryExec) (entryResult, error) {
		w, err := run(s, ctx, req, c.typ, c.id, body, x)
		if err != nil {
			return entryResult{}, err
		}
		return s.entryAnswer(req, &c, w), nil
	}
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

// runEntry runs an entry as handle runs a REST request: the path's
// checks and the authorization of prepare, the interaction, its one
// AuditEvent, and a panic answered with 500. req carries the entry's
// URL and headers (its body is body).
func (s *Server) runEntry(ctx context.Context, req *http.Request, ew entryRoute, body []byte, x entryExec) (res entryResult) {
	c := &call{typ: ew.typ, id: ew.id, vid: ew.vid}
	if s.recorded() {
		c.event = &event{access: Access{Interaction: ew.in, Type: ew.typ, ID: ew.id}, vid: ew.vid, query: req.URL.RawQuery}
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
	} else if r, err := ew.run(s, ctx, req, *c, body, x); err != nil {
		res = s.entryFailure(req, err)
	} else {
		res = r
	}
	answered = true
	return res
}

// entryFailure is the answer fail writes for err, as an entry's.
func (s *Server) entryFailure(req *http.Request, err error) entryResult {
	status, f, body := s.failure(req, err)
	return entryResult{status: status, header: http.Header{}, body: negotiate.Formatted(f, body)}
}

// entryAnswer is the answer the REST handler (answer, writeResult) sends
// for a write's outcome, as an entry's.
func (s *Server) entryAnswer(req *http.Request, c *call, w written) entryResult {
	res := entryResult{header: http.Header{}}
	pref := negotiate.PreferReturn(req)
	body := func(b []byte) []byte { return negotiate.Formatted(c.format, b) }
	if w.deleted {
		if w.tomb != nil && (w.etagWithOutcome || pref != negotiate.ReturnOutcome) {
			res.header.Set("ETag", negotiate.ETag(w.tomb.Version))
		}
		if pref == negotiate.ReturnOutcome {
			res.status, res.body = http.StatusOK, body(outcome.Render(outcome.Information(w.msg)))
		} else {
			res.status = http.StatusNoContent
		}
		return res
	}
	v := w.v
	res.status = w.status
	res.header.Set("ETag", negotiate.ETag(v.Version))
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
	case negotiate.ReturnMinimal:
	case negotiate.ReturnOutcome:
		res.body = body(outcome.Render(outcome.Information(w.msg)))
	default:
		res.body = body(v.Body)
	}
	return res
}
