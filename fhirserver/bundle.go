package fhirserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/reference"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// A batch or transaction Bundle is processed by running each entry as the
// interaction it names, with the checks, authorization and AuditEvent of
// the REST request it would be (entries.go), so every entry gets exactly
// the semantics of that interaction. A transaction runs every entry inside one store
// transaction carried in the request context (txcontext.go).

// entryIn is what the server reads of one entry (fhirjson.BundleEntries).
type entryIn = fhirjson.BundleEntry

// entryResult is the recorded answer to one entry.
type entryResult struct {
	status int
	header http.Header
	body   []byte
	// The resource the answer is about (Type/id) and its exact
	// lastUpdated, which the Last-Modified header has to the second.
	ref         string
	lastUpdated time.Time
}

// recorder is a minimal http.ResponseWriter that keeps the answer.
type recorder struct {
	res entryResult
}

func (r *recorder) Header() http.Header { return r.res.header }
func (r *recorder) WriteHeader(status int) {
	if r.res.status == 0 {
		r.res.status = status
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	r.res.body = append(r.res.body, p...)
	return len(p), nil
}

// bundle is POST [base] with a batch or transaction Bundle.
func (s *Server) bundle(w http.ResponseWriter, r *http.Request, c *call) error {
	// A transaction's entries are validated with the Bundle (any failure
	// fails it all); a batch's only as each entry is processed.
	body, info, err := s.readBodyWith(r, "Bundle", s.validator.CheckBundle)
	if err != nil {
		return err
	}
	entries, err := fhirjson.BundleEntries(body)
	if err != nil {
		return outcome.New(http.StatusBadRequest, "invalid", "malformed Bundle: "+err.Error())
	}
	if len(entries) > s.cfg.MaxBundleEntries {
		return outcome.New(http.StatusRequestEntityTooLarge, "too-costly",
			"the Bundle has "+strconv.Itoa(len(entries))+" entries; this server takes at most "+strconv.Itoa(s.cfg.MaxBundleEntries))
	}
	switch info.BundleType {
	case "transaction":
		c.audit(func(ev *event) { ev.access.Interaction = Transaction })
		if err := s.authorize(r.Context(), Access{Interaction: Transaction}); err != nil {
			return err
		}
		return s.transaction(w, r, c, entries)
	case "batch":
		if err := s.authorize(r.Context(), Access{Interaction: Batch}); err != nil {
			return err
		}
		return s.batch(w, r, c, entries)
	}
	return outcome.New(http.StatusBadRequest, "invalid",
		"only Bundles of type batch or transaction can be posted to the base; got "+quote(info.BundleType), "Bundle.type")
}

// entryRequest checks an entry's request and returns its method and URL
// (relative to the base, without a leading slash).
func (s *Server) entryRequest(i int, e *entryIn) (string, string, error) {
	at := "Bundle.entry[" + strconv.Itoa(i) + "].request"
	if e.Request == nil {
		return "", "", outcome.New(http.StatusBadRequest, "required", "entry "+strconv.Itoa(i)+" has no request", at)
	}
	m := e.Request.Method
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
	default:
		return "", "", outcome.New(http.StatusBadRequest, "invalid", "entry "+strconv.Itoa(i)+": unknown request method "+quote(m), at+".method")
	}
	u := s.entryURL(e)
	if u == "" && m != http.MethodGet {
		return "", "", outcome.New(http.StatusBadRequest, "required", "entry "+strconv.Itoa(i)+" has no request url", at+".url")
	}
	if pu, err := url.Parse(u); err != nil || pu.IsAbs() || pu.Host != "" {
		return "", "", outcome.New(http.StatusBadRequest, "invalid", "entry "+strconv.Itoa(i)+": the request url must be relative to this server's base; got "+quote(e.Request.URL), at+".url")
	}
	if (m == http.MethodPost || m == http.MethodPut) && len(e.Resource) == 0 {
		return "", "", outcome.New(http.StatusBadRequest, "required", "entry "+strconv.Itoa(i)+": a "+m+" entry needs a resource", "Bundle.entry["+strconv.Itoa(i)+"].resource")
	}
	return m, u, nil
}

// entryURL is an entry's request url relative to the base, without a
// leading slash ("Patient/1", "Patient?identifier=…"), and without a
// trailing one: "Patient/" means "Patient", as on the REST API.
func (s *Server) entryURL(e *entryIn) string {
	u := strings.TrimPrefix(strings.TrimPrefix(e.Request.URL, s.cfg.BaseURL), "/")
	path, query, hasQuery := strings.Cut(u, "?")
	path = strings.TrimSuffix(path, "/")
	if hasQuery {
		return path + "?" + query
	}
	return path
}

// dispatch runs one entry: a write or read calls its interaction
// (runEntry), anything else goes through the router, into a recorder.
func (s *Server) dispatch(ctx context.Context, outer *http.Request, method, rel string, e *entryIn, body []byte, contentType string, x entryExec) entryResult {
	target := s.prefix + "/" + rel
	if strings.HasPrefix(rel, "?") { // a system search: [base]?_type=…
		target = s.prefix + rel
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return failed(outcome.New(http.StatusBadRequest, "invalid", "invalid request url "+quote(rel)+": "+err.Error()))
	}
	req.RemoteAddr = outer.RemoteAddr
	req.Host = outer.Host
	for _, h := range []string{"Authorization", "Prefer", "Accept"} {
		if v := outer.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", contentType)
	}
	if rq := e.Request; rq != nil {
		set := func(k, v string) {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		set("If-None-Match", rq.IfNoneMatch)
		set("If-Modified-Since", rq.IfModifiedSince)
		set("If-Match", rq.IfMatch)
		set("If-None-Exist", rq.IfNoneExist)
	}
	if ew, ok := s.entryRouteOf(method, req.URL.Path); ok {
		return s.runEntry(ctx, req, ew, body, x)
	}
	if x.info != nil {
		req = req.WithContext(withEntryInfo(req.Context(), *x.info))
	}
	rec := &recorder{res: entryResult{header: http.Header{}}}
	s.router.ServeHTTP(rec, req)
	if rec.res.status == 0 {
		rec.res.status = http.StatusOK
	}
	return rec.res
}

func failed(err error) entryResult {
	oe, ok := outcome.As(err)
	if !ok {
		oe = toOutcome(err)
	}
	return entryResult{status: oe.Status, header: http.Header{}, body: oe.Resource()}
}

// entryBody is what an entry sends as its request body, with its media
// type: the resource, or for PATCH the JSON Patch a Binary carries (a
// Parameters resource is a FHIRPath Patch as it is).
func entryBody(method string, res []byte) ([]byte, string, error) {
	if method != http.MethodPatch {
		return res, negotiate.FHIRJSON, nil
	}
	var b struct {
		ResourceType string `json:"resourceType"`
		ContentType  string `json:"contentType"`
		Data         []byte `json:"data"`
	}
	if err := json.Unmarshal(res, &b); err != nil || b.ResourceType != "Binary" {
		return res, negotiate.FHIRJSON, nil
	}
	if b.ContentType != negotiate.JSONPatch {
		return nil, "", outcome.New(http.StatusBadRequest, "invalid", "a Binary patch must have contentType "+negotiate.JSONPatch+"; got "+quote(b.ContentType))
	}
	return b.Data, negotiate.JSONPatch, nil
}

// batch processes the entries independently, in order; each gets its own
// status, and a failing entry does not affect the others.
func (s *Server) batch(w http.ResponseWriter, r *http.Request, c *call, entries []entryIn) error {
	results := make([]entryResult, len(entries))
	for i := range entries {
		e := &entries[i]
		method, rel, err := s.entryRequest(i, e)
		if err != nil {
			results[i] = failed(err)
			continue
		}
		body, ct, err := entryBody(method, e.Resource)
		if err == nil {
			err = independent(body)
		}
		if err != nil {
			results[i] = failed(err)
			continue
		}
		results[i] = s.dispatch(r.Context(), r, method, rel, e, body, ct, entryExec{})
	}
	negotiate.WriteBody(w, c.format, http.StatusOK, s.responseBundle("batch-response", results))
	return nil
}

// independent refuses a batch entry's resource that refers to another
// entry by a urn: a batch's entries are processed independently, so the
// reference would be stored unresolved (the specification asks servers to
// check that batch entries have no such dependencies).
func independent(res []byte) error {
	refuse := func(link string) error {
		return outcome.New(http.StatusBadRequest, "invalid", "the link "+quote(link)+
			" is a urn, which only resolves to another entry within a transaction; the entries of a batch are independent")
	}
	var urnLink string
	_, err := reference.Rewrite(res, func(ref string) (string, error) {
		if reference.IsURN(ref) {
			return "", refuse(ref)
		}
		return "", nil
	}, func(link string) string {
		if urnLink == "" && reference.IsURN(link) {
			urnLink = link
		}
		return ""
	})
	if err == nil && urnLink != "" {
		err = refuse(urnLink)
	}
	return err
}

// processingOrder is the specification's order of a transaction's entries:
// deletes, creates, updates and patches, then reads.
func processingOrder(method string) int {
	switch method {
	case http.MethodDelete:
		return 0
	case http.MethodPost:
		return 1
	case http.MethodPut, http.MethodPatch:
		return 2
	}
	return 3
}

// transaction processes every entry inside one store transaction: all of
// them apply or none does.
func (s *Server) transaction(w http.ResponseWriter, r *http.Request, c *call, entries []entryIn) error {
	type planned struct {
		i           int
		method, rel string
	}
	plan := make([]planned, 0, len(entries))
	for i := range entries {
		method, rel, err := s.entryRequest(i, &entries[i])
		if err != nil {
			return err
		}
		plan = append(plan, planned{i, method, rel})
	}
	slices.SortStableFunc(plan, func(a, b planned) int { return processingOrder(a.method) - processingOrder(b.method) })

	results := make([]entryResult, len(entries))
	ctx := validated(r.Context())
	// The store has one writer. When no entry needs a search to know what
	// it writes, its ids, references, validation and index rows are settled
	// before the transaction takes the writer, while other requests use it
	// (preindex.go); otherwise all of it happens inside the transaction.
	bodies := make([][]byte, len(entries))
	infos := make([]*fhirjson.Info, len(entries))
	for i, e := range entries {
		if e.Request != nil && (e.Request.Method == http.MethodPost || e.Request.Method == http.MethodPut) && len(e.Resource) > 0 {
			if info, err := resourceInfo(e.Resource); err == nil {
				infos[i] = &info
			}
		}
	}
	early := newRewriter(s, nil)
	var pre map[string]*preindexed
	switch err := early.resolve(ctx, entries); {
	case errors.Is(err, errNeedsLookup):
		early = nil
	case err != nil:
		return err
	default:
		pre = s.preindex(ctx, early.preindexJobs(ctx, entries, bodies), s.now())
	}
	err := s.store.Transact(ctx, func(tx store.Tx) error {
		ctx := withTx(ctx, tx)
		rw := early
		if rw != nil {
			rw.tx = tx
		} else {
			rw = newRewriter(s, tx)
			if err := rw.resolve(ctx, entries); err != nil {
				return err
			}
		}
		// One lastUpdated for the whole transaction, taken once it holds
		// the writer; rows extracted in advance are moved to it.
		now := s.now()
		ctx = withNow(ctx, now)
		if early == nil {
			pre = s.preindex(ctx, rw.preindexJobs(ctx, entries, bodies), now)
		}
		ctx = withPreindexed(ctx, pre)
		for _, p := range plan {
			e := &entries[p.i]
			body := bodies[p.i]
			if body == nil {
				var err error
				if body, err = rw.rewrite(ctx, e.Resource, e.FullURL); err != nil {
					return entryError(p.i, err)
				}
			}
			body, ct, err := entryBody(p.method, body)
			if err != nil {
				return entryError(p.i, err)
			}
			x := entryExec{assignedID: rw.assigned[p.i], info: infos[p.i], validated: true}
			res := s.dispatch(ctx, r, p.method, p.rel, e, body, ct, x)
			if err := rw.applied(p.i, res); err != nil {
				return entryError(p.i, err)
			}
			if res.status >= 400 {
				return entryFailed(p.i, res)
			}
			results[p.i] = res
		}
		return rw.verify(ctx)
	})
	if err != nil {
		if slices.ContainsFunc(plan, func(p planned) bool { return strings.HasPrefix(p.rel, "SearchParameter") }) {
			// Its entries registered or withdrew parameters as they were
			// applied; the store has none of it.
			s.params.Reload(context.WithoutCancel(ctx), s.store)
		}
		return refuseWithoutTx(err, "a transaction Bundle")
	}
	negotiate.WriteBody(w, c.format, http.StatusOK, s.responseBundle("transaction-response", results))
	return nil
}

// entryFailed turns a failed entry's answer into the transaction's error,
// naming the entry.
func entryFailed(i int, res entryResult) error {
	var oo struct {
		Issue []outcome.Issue `json:"issue"`
	}
	_ = json.Unmarshal(res.body, &oo)
	if len(oo.Issue) == 0 {
		oo.Issue = []outcome.Issue{{Severity: "error", Code: "processing", Diagnostics: http.StatusText(res.status)}}
	}
	for k := range oo.Issue {
		oo.Issue[k].Diagnostics = "entry " + strconv.Itoa(i) + ": " + oo.Issue[k].Diagnostics
	}
	return &outcome.Error{Status: res.status, Issues: oo.Issue}
}

func entryError(i int, err error) error {
	if oe, ok := outcome.As(err); ok {
		return entryFailed(i, entryResult{status: oe.Status, body: oe.Resource()})
	}
	return err
}

// responseBundle renders the batch-response or transaction-response.
func (s *Server) responseBundle(typ string, results []entryResult) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Bundle","id":`)
	writeJSONString(&b, newID(s.cfg.Now()))
	b.WriteString(`,"meta":{"lastUpdated":"`)
	b.WriteString(fhirjson.FormatInstant(s.now()))
	b.WriteString(`"},"type":"` + typ + `","entry":[`)
	for i, res := range results {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		isOutcome := res.status >= 400
		if len(res.body) > 0 && !isOutcome {
			b.WriteString(`"resource":`)
			b.Write(res.body)
			b.WriteByte(',')
		}
		b.WriteString(`"response":{"status":`)
		writeJSONString(&b, strconv.Itoa(res.status)+" "+http.StatusText(res.status))
		if loc := res.header.Get("Location"); loc != "" {
			b.WriteString(`,"location":`)
			writeJSONString(&b, loc)
		}
		if et := res.header.Get("ETag"); et != "" {
			b.WriteString(`,"etag":`)
			writeJSONString(&b, et)
		}
		if !res.lastUpdated.IsZero() {
			b.WriteString(`,"lastModified":"` + fhirjson.FormatInstant(res.lastUpdated) + `"`)
		}
		if isOutcome && len(res.body) > 0 {
			b.WriteString(`,"outcome":`)
			b.Write(res.body)
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// validatedKey marks entries of a Bundle that passed structural validation
// as part of the Bundle, so that their handlers do not validate them again.
type validatedKey struct{}

func validated(ctx context.Context) context.Context {
	return context.WithValue(ctx, validatedKey{}, true)
}

func isValidated(ctx context.Context) bool {
	v, _ := ctx.Value(validatedKey{}).(bool)
	return v
}

// resourceInfo reads the resourceType and id of a resource that passed
// structural validation.
func resourceInfo(body []byte) (fhirjson.Info, error) {
	info, ok := fhirjson.ResourceInfo(body)
	if !ok {
		return info, outcome.New(http.StatusBadRequest, "structure", "a FHIR resource must be a JSON object")
	}
	return info, nil
}

type entryInfoKey struct{}

// withEntryInfo carries what resourceInfo read from an entry's resource
// (rewriting references changes neither its type nor its id).
func withEntryInfo(ctx context.Context, info fhirjson.Info) context.Context {
	return context.WithValue(ctx, entryInfoKey{}, info)
}

func entryInfo(ctx context.Context) (fhirjson.Info, bool) {
	info, ok := ctx.Value(entryInfoKey{}).(fhirjson.Info)
	return info, ok
}
