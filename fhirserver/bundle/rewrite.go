package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/internal/preindex"
	"github.com/kiln-fhir/kiln/fhirserver/internal/reference"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/profiles"
)

// rewriter resolves the references between the entries of a transaction:
// each entry's fullUrl (urn:uuid:…, or any other) maps to the Type/id the
// entry will have, and conditional references (Patient?identifier=…) to the
// one resource they match. Both are looked up inside the transaction.
type rewriter struct {
	e        *Engine
	tx       store.Tx
	fullURLs reference.FullURLs // fullUrl → Type/id
	assigned map[int]string     // entry index → id chosen for its create
	ids      map[int]string     // entry index → id of the resource a create or update writes
	// What conditional criteria resolved to when the transaction was
	// planned: by entry (conditional creates, updates and patches), and
	// by criteria (the lock key, whose parameters are sorted), of those
	// entries and of conditional references.
	expect      map[int]string
	conditional map[string]string
	checks      []conditionCheck
	noLookup    bool // fail with errNeedsLookup rather than search
}

// conditionCheck is the criteria of a conditional create or update, or of
// a conditional reference, checked once every entry is applied: they may
// match no resource but target (what they resolved to), and must still
// match target when sole (a conditional reference, a conditional create,
// or an update that creates; an update may take its resource out of its
// own criteria).
type conditionCheck struct {
	entry  int
	crit   *fhirserver.Criteria
	target string
	sole   bool
	what   string // "its conditional criteria", "the conditional reference …"
}

func newRewriter(e *Engine, tx store.Tx) *rewriter {
	return &rewriter{e: e, tx: tx, fullURLs: reference.FullURLs{}, assigned: map[int]string{}, ids: map[int]string{},
		expect: map[int]string{}, conditional: map[string]string{}}
}

// rewriteNoLookup is rewrite for references that need no search; it
// fails with errNeedsLookup on a conditional reference.
func (rw *rewriter) rewriteNoLookup(ctx context.Context, res []byte, fullURL string) ([]byte, error) {
	rw.noLookup = true
	defer func() { rw.noLookup = false }()
	return rw.rewrite(ctx, res, fullURL)
}

// resolve decides the id of every entry that creates or updates a resource,
// and refuses a transaction in which two entries change the same resource
// (directly or through conditional criteria) or share a fullUrl: the
// specification leaves their outcome undefined, so it fails.
//
// Entries are planned in the order they are applied: the deletes first, so
// a resource a delete removes matches no conditional criteria after it.
// Two conditional creates with the same criteria and no match create one
// resource: the second resolves to the first's.
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
		if u := entries[i].FullURL; u != "" && entries[i].Request != nil {
			if strings.Contains(u, "/_history/") {
				return outcome.New(http.StatusBadRequest, "invalid",
					"entry "+strconv.Itoa(i)+": a fullUrl names a resource, not one of its versions: "+quote(u), "Bundle.entry["+strconv.Itoa(i)+"].fullUrl")
			}
			if j, dup := seenURL[u]; dup {
				return outcome.New(http.StatusBadRequest, "invalid",
					"entries "+strconv.Itoa(j)+" and "+strconv.Itoa(i)+" have the same fullUrl "+quote(u))
			}
			seenURL[u] = i
		}
	}
	gone := map[string]bool{}   // Type/id → deleted by a delete entry
	created := map[string]int{} // criteria key → the conditional create entry that creates
	order := make([]int, 0, len(entries))
	for i := range entries {
		if entries[i].Request != nil {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return processingOrder(entries[a].Request.Method) - processingOrder(entries[b].Request.Method)
	})
	for _, i := range order {
		e := &entries[i]
		path, query, _ := strings.Cut(rw.e.entryURL(e), "?")
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
				if e.Request.Method == http.MethodDelete {
					gone[typ+"/"+id] = true
				}
				continue
			}
			q, err := rw.e.svc.Criteria(ctx, typ, query, max(rw.e.cfg.MaxConditionalDeletes, 1)+1)
			if err != nil {
				return entryError(i, err)
			}
			found, err := rw.lookup(ctx, q)
			if err != nil {
				return err
			}
			for _, m := range found {
				ref := m.Type + "/" + m.ID
				if err := claim(i, ref); err != nil {
					return err
				}
				if e.Request.Method == http.MethodDelete {
					gone[ref] = true
				}
			}
			if e.Request.Method == http.MethodPatch && len(found) == 1 {
				// Like a conditional update: no other resource may
				// match once the transaction is applied.
				ref := found[0].Type + "/" + found[0].ID
				rw.expect[i] = ref
				rw.checks = append(rw.checks, conditionCheck{i, q, ref, false, "its conditional criteria"})
			}
			continue
		}
		var target string
		switch e.Request.Method {
		case http.MethodPost:
			if cond := e.Request.IfNoneExist; cond != "" {
				crit, found, err := rw.matchLive(ctx, typ, cond, gone)
				if err != nil {
					return entryError(i, err)
				}
				prior, planned := rw.conditional[crit.Key]
				if len(found) == 1 {
					prior, planned = typ+"/"+found[0].ID, true
				} else if j, ok := created[crit.Key]; planned && ok && !bytes.Equal(entries[j].Resource, e.Resource) {
					return outcome.New(http.StatusBadRequest, "invalid", "entries "+strconv.Itoa(j)+" and "+strconv.Itoa(i)+
						" are conditional creates with the same criteria but different resources; which one is created would depend on their order")
				}
				if planned {
					// Nothing is written: the entry answers with the
					// resource that matches.
					rw.checks = append(rw.checks, conditionCheck{i, crit, prior, true, "its conditional criteria"})
					rw.expect[i] = prior
					if e.FullURL != "" {
						rw.fullURLs[e.FullURL] = prior
					}
					continue
				}
				id := rw.e.svc.NewID()
				rw.assigned[i] = id
				target = typ + "/" + id
				rw.conditional[crit.Key] = target
				created[crit.Key] = i
				rw.expect[i] = target
				// What it creates must be what its criteria find.
				rw.checks = append(rw.checks, conditionCheck{i, crit, target, true, "its conditional criteria"})
				break
			}
			id := rw.e.svc.NewID()
			rw.assigned[i] = id
			target = typ + "/" + id
		case http.MethodPut:
			if id != "" {
				target = typ + "/" + id
				break
			}
			crit, found, err := rw.matchLive(ctx, typ, query, gone)
			if err != nil {
				return entryError(i, err)
			}
			sole := false
			if prior, ok := rw.conditional[crit.Key]; ok {
				target = prior // created or updated by an entry before: refused by claim
			} else if len(found) == 1 {
				target = typ + "/" + found[0].ID
			} else {
				id := resourceID(e.Resource)
				if id == "" {
					id = rw.e.svc.NewID()
				}
				rw.assigned[i] = id
				target = typ + "/" + id
				sole = true
			}
			rw.checks = append(rw.checks, conditionCheck{i, crit, target, sole, "its conditional criteria"})
			rw.conditional[crit.Key] = target
			rw.expect[i] = target
		default:
			continue
		}
		if err := claim(i, target); err != nil {
			return err
		}
		_, tid, _ := strings.Cut(target, "/")
		rw.ids[i] = tid
		if e.FullURL != "" {
			rw.fullURLs[e.FullURL] = target
		}
	}
	return rw.resolveConditionalReferences(ctx, entries, gone)
}

// resolveConditionalReferences resolves the conditional references of the
// entries' resources as the transaction is planned: to a conditional
// create or update of the Bundle with the same criteria, else against the
// store as it was before the transaction (less what its deletes remove),
// so that no entry's place in the Bundle changes what they name. verify
// checks that each still names its one resource once every entry is
// applied.
func (rw *rewriter) resolveConditionalReferences(ctx context.Context, entries []entryIn, gone map[string]bool) error {
	for i := range entries {
		e := &entries[i]
		if e.Request == nil || (e.Request.Method != http.MethodPost && e.Request.Method != http.MethodPut) ||
			!reference.MayHoldQuery(e.Resource) {
			continue
		}
		_, err := reference.Rewrite(e.Resource, func(ref string) (string, error) {
			_, err := rw.conditionalTarget(ctx, ref, gone, i)
			return "", err
		}, nil)
		if err != nil {
			return entryError(i, err)
		}
	}
	return nil
}

// matchLive runs conditional criteria inside the transaction, leaving out
// the resources its deletes remove; more than one match is refused.
func (rw *rewriter) matchLive(ctx context.Context, typ, raw string, gone map[string]bool) (*fhirserver.Criteria, []*store.Version, error) {
	crit, err := rw.e.svc.Criteria(ctx, typ, raw, 2+len(gone))
	if err != nil {
		return nil, nil, err
	}
	found, err := rw.lookup(ctx, crit)
	if err != nil {
		return nil, nil, err
	}
	found = slices.DeleteFunc(found, func(v *store.Version) bool { return gone[v.Type+"/"+v.ID] })
	if len(found) > 1 {
		return nil, nil, crit.NotSelective(len(found))
	}
	return crit, found, nil
}

// applied checks what entry i's conditional criteria resolved to when it
// was applied against what they resolved to when the transaction was
// planned. They differ, or match several resources (412) where they
// matched at most one, when another entry applied before it created or
// changed a resource its criteria match: the outcome would depend on the
// order of the entries, so the transaction fails.
func (rw *rewriter) applied(i int, res entryResult) error {
	want, ok := rw.expect[i]
	switch {
	case !ok:
		return nil
	case res.status == http.StatusPreconditionFailed:
		return outcome.New(http.StatusBadRequest, "invalid",
			"the conditional criteria match several resources once the entries before it are applied: other entries create or change resources they match")
	case res.status >= 400 || res.ref == "" || res.ref == want:
		return nil
	}
	return outcome.New(http.StatusBadRequest, "invalid",
		"the conditional criteria were to resolve to "+want+" but found "+res.ref+
			" when the entry was applied: another entry of the transaction creates or changes a resource they match")
}

// verify runs after every entry is applied: the criteria of each
// conditional create and update must match at most one resource, or the
// transaction created the duplicates its criteria were meant to prevent.
func (rw *rewriter) verify(ctx context.Context) error {
	for _, c := range rw.checks {
		found, err := c.crit.Match(ctx, rw.tx, 2)
		if err != nil {
			return err
		}
		fail := func(err error) error {
			if c.entry < 0 {
				return err
			}
			return entryError(c.entry, err)
		}
		for _, v := range found {
			if ref := v.Type + "/" + v.ID; ref != c.target {
				return fail(outcome.New(http.StatusBadRequest, "invalid",
					"once the transaction is applied, "+c.what+" match "+ref+" besides "+c.target+
						", which they resolved to: other entries create or change resources they match"))
			}
		}
		if c.sole && len(found) == 0 {
			return fail(outcome.New(http.StatusBadRequest, "invalid",
				"once the transaction is applied, "+c.what+" no longer find "+c.target+", which they resolved to: "+
					"a conditional create must match its own criteria, and no entry may change what a conditional reference names"))
		}
	}
	return nil
}

// lookup searches the transaction; a rewriter without one (settling a
// Bundle before it takes the writer) fails with errNeedsLookup.
func (rw *rewriter) lookup(ctx context.Context, crit *fhirserver.Criteria) ([]*store.Version, error) {
	if rw.tx == nil || rw.noLookup {
		return nil, errNeedsLookup
	}
	return crit.Match(ctx, rw.tx, 0)
}

func resourceID(res []byte) string {
	var r struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(res, &r)
	return r.ID
}

// rewrite replaces, everywhere in a resource (extensions, contained
// resources and narrative included), the references and urn links that
// name another entry's fullUrl, and conditional references. Only those
// string values change: the client's bytes are otherwise kept as sent.
// The bytes are returned unchanged when there is nothing to replace, and
// when they are malformed (validated already; the handler reports it).
// fullURL is the entry's own: relative references resolve against its
// base.
func (rw *rewriter) rewrite(ctx context.Context, res []byte, fullURL string) ([]byte, error) {
	base := reference.RESTBase(fullURL)
	if base == "" {
		base = rw.e.cfg.BaseURL
	}
	return reference.Rewrite(res, func(ref string) (string, error) {
		return rw.target(ctx, ref, base)
	}, func(link string) string {
		return rw.fullURLs.Link(link, base)
	})
}

// target is what a reference becomes: another entry's Type/id, the one
// match of a conditional reference, or "" to leave it. base resolves a
// relative reference (Type/id) to the fullUrl of the entry it names.
func (rw *rewriter) target(ctx context.Context, ref, base string) (string, error) {
	if to, ok := rw.fullURLs[ref]; ok {
		return to, nil
	}
	if reference.IsURN(ref) {
		return "", outcome.New(http.StatusBadRequest, "not-found", "the reference "+quote(ref)+" names no entry of the Bundle")
	}
	if !strings.Contains(ref, "?") {
		return rw.fullURLs.Link(ref, base), nil
	}
	return rw.conditionalTarget(ctx, ref, nil, -1)
}

// conditionalTarget is what conditional reference ref names ("" when ref
// is not one): the resource a conditional create or update of the Bundle
// with the same criteria resolved to, else the one match in the store,
// less the resources in gone. A match is recorded with entry (-1: not
// known), for verify to check once every entry is applied.
func (rw *rewriter) conditionalTarget(ctx context.Context, ref string, gone map[string]bool, entry int) (string, error) {
	typ, query, ok := rw.e.svc.ConditionalReference(ref)
	if !ok {
		return "", nil
	}
	crit, err := rw.e.svc.Criteria(ctx, typ, query, 2)
	if err != nil {
		return "", err
	}
	if to, ok := rw.conditional[crit.Key]; ok {
		if entry >= 0 { // planning: the entry must leave it alone
			rw.checks = append(rw.checks, conditionCheck{entry, crit, to, true, "the conditional reference " + quote(ref)})
		}
		return to, nil
	}
	crit, found, err := rw.matchLive(ctx, typ, query, gone)
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "", fhirserver.UnmatchedReference(ref)
	}
	to := typ + "/" + found[0].ID
	rw.conditional[crit.Key] = to
	rw.checks = append(rw.checks, conditionCheck{entry, crit, to, true, "the conditional reference " + quote(ref)})
	return to, nil
}

// errNeedsLookup stops a rewrite that would have to search the store.
var errNeedsLookup = errors.New("bundle: the rewrite needs a lookup")

// preindexJobs lists the creates and updates of a transaction whose body
// and id are known before any entry is applied: their references can be
// rewritten without searching (a conditional reference is resolved when
// its entry is applied, after the entries before it), and their id is
// fixed. bodies receives the rewritten bodies, by entry.
func (rw *rewriter) preindexJobs(ctx context.Context, entries []entryIn, bodies [][]byte) []preindex.Job {
	for i := range entries {
		if bytes.Contains(entries[i].Resource, []byte(`"SearchParameter"`)) {
			return nil // a new parameter would apply to the entries after it
		}
	}
	var jobs []preindex.Job
	for i := range entries {
		e := &entries[i]
		if e.Request == nil || (e.Request.Method != http.MethodPost && e.Request.Method != http.MethodPut) {
			continue
		}
		id := rw.ids[i]
		if id == "" {
			continue
		}
		body, err := rw.rewriteNoLookup(ctx, e.Resource, e.FullURL)
		if err != nil {
			continue
		}
		bodies[i] = body
		typ, _, _ := strings.Cut(rw.e.entryURL(e), "/")
		typ, _, _ = strings.Cut(typ, "?")
		jobs = append(jobs, preindex.Job{Type: typ, ID: id, Body: body})
	}
	return jobs
}
