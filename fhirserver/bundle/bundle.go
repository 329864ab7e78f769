// Package bundle processes batch and transaction Bundles: each entry is
// read as the request it names, routed by the service's route table
// (fhirserver.MatchRoute) and run as that interaction through a
// fhirserver.Call, with the checks, authorization and one AuditEvent of
// the REST request it would be, and its Response becomes the entry's. A
// transaction runs every entry inside one store transaction
// (fhirserver.Server.Transact), with the references between its entries
// resolved first (rewrite.go).
package bundle

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

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/bundlejson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/preindex"
	"github.com/kiln-fhir/kiln/fhirserver/internal/reference"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// entryIn is what the server reads of one entry (fhirjson.BundleEntries).
type entryIn = fhirjson.BundleEntry

// entryResult is the answer to one entry: its Bundle.entry.response.
type entryResult struct {
	status   int
	etag     string
	location string
	body     []byte
	// The resource the answer is about (Type/id) and its exact
	// lastUpdated, which the Last-Modified header has to the second.
	ref         string
	lastUpdated time.Time
}

// Engine processes the Bundles posted to one FHIR service, mounted at
// prefix: its entries' urls are relative to it.
type Engine struct {
	svc    *fhirserver.Server
	cfg    fhirserver.Config
	prefix string
	runs   []entryRun // by route, in fhirserver.Routes' order
}

// New returns the Bundle engine of svc, whose REST API is mounted at
// prefix.
func New(svc *fhirserver.Server, prefix string) *Engine {
	e := &Engine{svc: svc, cfg: svc.Config(), prefix: prefix}
	for _, rt := range fhirserver.Routes() {
		run, ok := runs[rt.Name]
		if !ok {
			panic("bundle: no entry run of the route " + rt.Name)
		}
		e.runs = append(e.runs, run)
	}
	return e
}

// Run processes a batch or transaction Bundle posted to the base: body,
// which passed CheckBundle (info), in the interaction c, for the request r
// (whose Authorization, Prefer and Accept each entry carries). It returns
// the batch-response or transaction-response.
func (e *Engine) Run(r *http.Request, c *fhirserver.Call, body []byte, info fhirjson.Info) ([]byte, error) {
	entries, err := fhirjson.BundleEntries(body)
	if err != nil {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "malformed Bundle: "+err.Error())
	}
	if len(entries) > e.cfg.MaxBundleEntries {
		return nil, outcome.New(http.StatusRequestEntityTooLarge, "too-costly",
			"the Bundle has "+strconv.Itoa(len(entries))+" entries; this server takes at most "+strconv.Itoa(e.cfg.MaxBundleEntries))
	}
	switch info.BundleType {
	case "transaction":
		c.AuditAs(fhirserver.Transaction)
		if err := c.Authorize(fhirserver.Access{Interaction: fhirserver.Transaction}); err != nil {
			return nil, err
		}
		return e.transaction(r, entries)
	case "batch":
		if err := c.Authorize(fhirserver.Access{Interaction: fhirserver.Batch}); err != nil {
			return nil, err
		}
		return e.batch(r, entries), nil
	}
	return nil, outcome.New(http.StatusBadRequest, "invalid",
		"only Bundles of type batch or transaction can be posted to the base; got "+quote(info.BundleType), "Bundle.type")
}

// entryRequest checks an entry's request and returns its method and URL
// (relative to the base, without a leading slash).
func (e *Engine) entryRequest(i int, ent *entryIn) (string, string, error) {
	at := "Bundle.entry[" + strconv.Itoa(i) + "].request"
	if ent.Request == nil {
		return "", "", outcome.New(http.StatusBadRequest, "required", "entry "+strconv.Itoa(i)+" has no request", at)
	}
	m := ent.Request.Method
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
	default:
		return "", "", outcome.New(http.StatusBadRequest, "invalid", "entry "+strconv.Itoa(i)+": unknown request method "+quote(m), at+".method")
	}
	u := e.entryURL(ent)
	if u == "" && m != http.MethodGet {
		return "", "", outcome.New(http.StatusBadRequest, "required", "entry "+strconv.Itoa(i)+" has no request url", at+".url")
	}
	if pu, err := url.Parse(u); err != nil || pu.IsAbs() || pu.Host != "" {
		return "", "", outcome.New(http.StatusBadRequest, "invalid", "entry "+strconv.Itoa(i)+": the request url must be relative to this server's base; got "+quote(ent.Request.URL), at+".url")
	}
	if (m == http.MethodPost || m == http.MethodPut) && len(ent.Resource) == 0 {
		return "", "", outcome.New(http.StatusBadRequest, "required", "entry "+strconv.Itoa(i)+": a "+m+" entry needs a resource", "Bundle.entry["+strconv.Itoa(i)+"].resource")
	}
	return m, u, nil
}

// entryURL is an entry's request url relative to the base, without a
// leading slash ("Patient/1", "Patient?identifier=…"), and without a
// trailing one: "Patient/" means "Patient", as on the REST API.
func (e *Engine) entryURL(ent *entryIn) string {
	u := strings.TrimPrefix(strings.TrimPrefix(ent.Request.URL, e.cfg.BaseURL), "/")
	path, query, hasQuery := strings.Cut(u, "?")
	path = strings.TrimSuffix(path, "/")
	if hasQuery {
		return path + "?" + query
	}
	return path
}

// failed is the answer to an entry that could not be read as a request.
func (e *Engine) failed(r *http.Request, err error) entryResult {
	oe := e.svc.Outcome(r.Context(), r.Method, err)
	return entryResult{status: oe.Status, body: oe.Resource()}
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
func (e *Engine) batch(r *http.Request, entries []entryIn) []byte {
	results := make([]entryResult, len(entries))
	for i := range entries {
		ent := &entries[i]
		method, rel, err := e.entryRequest(i, ent)
		if err != nil {
			results[i] = e.failed(r, err)
			continue
		}
		body, ct, err := entryBody(method, ent.Resource)
		if err == nil {
			err = independent(body)
		}
		if err != nil {
			results[i] = e.failed(r, err)
			continue
		}
		results[i] = e.dispatch(r.Context(), r, method, rel, ent, body, ct, entryExec{})
	}
	return e.responseBundle("batch-response", results)
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
func (e *Engine) transaction(r *http.Request, entries []entryIn) ([]byte, error) {
	type planned struct {
		i           int
		method, rel string
	}
	plan := make([]planned, 0, len(entries))
	for i := range entries {
		method, rel, err := e.entryRequest(i, &entries[i])
		if err != nil {
			return nil, err
		}
		plan = append(plan, planned{i, method, rel})
	}
	slices.SortStableFunc(plan, func(a, b planned) int { return processingOrder(a.method) - processingOrder(b.method) })

	results := make([]entryResult, len(entries))
	ctx := r.Context()
	// The store has one writer. When no entry needs a search to know what
	// it writes, its ids, references, validation and index rows are settled
	// before the transaction takes the writer, while other requests use it
	// (preindex.go); otherwise all of it happens inside the transaction.
	bodies := make([][]byte, len(entries))
	infos := make([]*fhirjson.Info, len(entries))
	for i, ent := range entries {
		if ent.Request != nil && (ent.Request.Method == http.MethodPost || ent.Request.Method == http.MethodPut) && len(ent.Resource) > 0 {
			if info, err := resourceInfo(ent.Resource); err == nil {
				infos[i] = &info
			}
		}
	}
	early := newRewriter(e, nil)
	var pre preindex.Set
	switch err := early.resolve(ctx, entries); {
	case errors.Is(err, errNeedsLookup):
		early = nil
	case err != nil:
		return nil, err
	default:
		pre = e.svc.Preindex(ctx, early.preindexJobs(ctx, entries, bodies))
	}
	// One lastUpdated for the whole transaction, taken once it holds the
	// writer (Transact); rows extracted in advance are moved to it.
	err := e.svc.Transact(ctx, func(ctx context.Context, tx store.Tx) error {
		rw := early
		if rw != nil {
			rw.tx = tx
		} else {
			rw = newRewriter(e, tx)
			if err := rw.resolve(ctx, entries); err != nil {
				return err
			}
			pre = e.svc.Preindex(ctx, rw.preindexJobs(ctx, entries, bodies))
		}
		ctx = fhirserver.WithPreindexed(ctx, pre)
		for _, p := range plan {
			ent := &entries[p.i]
			body := bodies[p.i]
			if body == nil {
				var err error
				if body, err = rw.rewrite(ctx, ent.Resource, ent.FullURL); err != nil {
					return entryError(p.i, err)
				}
			}
			body, ct, err := entryBody(p.method, body)
			if err != nil {
				return entryError(p.i, err)
			}
			x := entryExec{assignedID: rw.assigned[p.i], info: infos[p.i], validated: true}
			res := e.dispatch(ctx, r, p.method, p.rel, ent, body, ct, x)
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
			e.svc.ReloadSearchParameters(context.WithoutCancel(ctx))
		}
		return nil, refuseWithoutTx(err)
	}
	return e.responseBundle("transaction-response", results), nil
}

// refuseWithoutTx turns a store's lack of transactions into the 501 of a
// transaction Bundle.
func refuseWithoutTx(err error) error {
	if errors.Is(err, store.ErrTransactionsUnsupported) {
		return outcome.New(http.StatusNotImplemented, "not-supported",
			"a transaction Bundle needs transactions, which this deployment's store does not offer")
	}
	return err
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
func (e *Engine) responseBundle(typ string, results []entryResult) []byte {
	var b bytes.Buffer
	bundlejson.Start(&b, e.svc.NewID(), e.svc.Now(), typ)
	b.WriteString(`,"entry":[`)
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
		bundlejson.String(&b, strconv.Itoa(res.status)+" "+http.StatusText(res.status))
		if res.location != "" {
			b.WriteString(`,"location":`)
			bundlejson.String(&b, res.location)
		}
		if res.etag != "" {
			b.WriteString(`,"etag":`)
			bundlejson.String(&b, res.etag)
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

// resourceInfo reads the resourceType and id of a resource that passed
// structural validation.
func resourceInfo(body []byte) (fhirjson.Info, error) {
	info, ok := fhirjson.ResourceInfo(body)
	if !ok {
		return info, outcome.New(http.StatusBadRequest, "structure", "a FHIR resource must be a JSON object")
	}
	return info, nil
}

func quote(s string) string { return outcome.Quote(s) }
