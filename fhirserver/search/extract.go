package search

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// Skipped counts result items whose FHIR type has no index form for the
// parameter's type (a string parameter meeting a CodeableConcept, say).
// They are skipped silently, as the specification leaves such
// combinations undefined; the counter is for debugging expressions.
var Skipped atomic.Int64

// Extract evaluates every indexable parameter of resourceType on resource
// (decoded with encoding/json UseNumber) and returns its index entries,
// grouped by parameter in code order. An error names the parameter whose
// expression failed; it indicates malformed data, not an unsupported type.
// The *big.Rat values of the entries may be shared between entries and
// must not be modified.
func (r *Registry) Extract(ctx context.Context, resourceType string, resource map[string]any) ([]Entry, error) {
	return r.AppendExtract(ctx, nil, resourceType, resource)
}

// AppendExtract is Extract appending to dst: a writer indexing many
// resources (a transaction Bundle, a reindex) reuses one buffer, since an
// Entry is a few hundred bytes and the result of a resource tens of
// entries. On error dst is returned unchanged with the error.
func (r *Registry) AppendExtract(ctx context.Context, dst []Entry, resourceType string, resource map[string]any) ([]Entry, error) {
	tp := r.typeParams(resourceType)
	if tp == nil {
		return dst, fmt.Errorf("search: unknown resource type %q", resourceType)
	}
	x := extractorPool.Get().(*extractor)
	defer x.release()
	if err := r.extractInto(ctx, x, tp, resource); err != nil {
		return dst, err
	}
	// One copy out of the pooled scratch: Entry is large, and growing the
	// result slice entry by entry cost more than the copy (measured).
	if dst == nil {
		return slices.Clone(x.out), nil
	}
	return append(dst, x.out...), nil
}

// ExtractRows is MakeRows of Extract, without copying the entries out of
// the extractor's scratch: the rows are all a writer keeps.
func (r *Registry) ExtractRows(ctx context.Context, resourceType string, resource map[string]any) (Rows, error) {
	tp := r.typeParams(resourceType)
	if tp == nil {
		return Rows{}, fmt.Errorf("search: unknown resource type %q", resourceType)
	}
	x := extractorPool.Get().(*extractor)
	defer x.release()
	var b index.RowBuilder
	x.sink = &b
	if err := r.extractInto(ctx, x, tp, resource); err != nil {
		return Rows{}, err
	}
	b.Add(x.out)
	return b.Finish(), nil
}

// extractInto evaluates the parameters of tp on resource into x.out.
func (r *Registry) extractInto(ctx context.Context, x *extractor, tp *typeParams, resource map[string]any) error {
	x.ctx, x.resource, x.naive, x.reg = ctx, resource, r.whole, r
	present := elementNames(resource)
	for _, p := range tp.list {
		if !p.Indexable() || len(p.Parts) > 0 || p.Conjoined != nil || !r.whole && !p.mayApply(present) {
			continue
		}
		// Between parameters: a composite's entries are complete here.
		x.maybeFlush()
		n := len(x.out)
		if err := x.param(p); err != nil {
			if !p.Custom || ctx.Err() != nil {
				return err
			}
			// A custom parameter whose expression fails on this resource
			// (a type error FHIRPath finds only at run time) leaves the
			// resource out of its index: one bad SearchParameter must
			// not refuse every write of the type.
			clear(x.out[n:])
			x.out = x.out[:n]
			if _, told := r.failed.LoadOrStore(p, true); !told {
				if l := r.log.Load(); l != nil {
					l.WarnContext(ctx, "a custom search parameter fails on resources, which it then does not index (told once per version of the parameter)",
						"parameter", p.Code, "url", p.URL, "resourceType", resource["resourceType"])
				}
			}
		}
	}
	r.unlinkForeign(x.out)
	return nil
}

// unlinkForeign drops the Type/id of absolute references to other servers
// (see SetBase); their URL stays searchable.
func (r *Registry) unlinkForeign(es []Entry) {
	base := r.base.Load()
	if base == nil {
		return
	}
	for i := range es {
		e := &es[i]
		if e.Kind == KindComposite {
			r.unlinkForeign(e.Components)
			continue
		}
		if e.Kind == KindReference && e.URL != "" && e.RefID != "" && !strings.HasPrefix(e.URL, *base) {
			e.RefType, e.RefID, e.RefVersion = "", "", ""
		}
	}
}

// extractorPool recycles the scratch buffers of Extract.
var extractorPool = sync.Pool{New: func() any {
	return &extractor{out: make([]Entry, 0, 64), memo: make([]memoEntry, 0, 32)}
}}

// release clears the scratch (so the pool keeps no resource data alive)
// and returns it to the pool; oversized buffers are dropped.
func (x *extractor) release() {
	clear(x.out)
	clear(x.memo)
	if cap(x.out) > 4096 || x.memoIndex != nil {
		return
	}
	x.out, x.memo = x.out[:0], x.memo[:0]
	x.ctx, x.resource, x.sink, x.reg = nil, nil, nil, nil
	extractorPool.Put(x)
}

// flushAt is how many entries an extractor with a sink holds before it
// hands them over as rows.
const flushAt = 512

// maybeFlush hands x.out over to x.sink once it holds flushAt entries,
// so extraction holds a bounded number of Entries whatever the resource's
// size. The memo points into x.out, so it starts again empty: it is only
// a cache.
func (x *extractor) maybeFlush() {
	if x.sink == nil || len(x.out) < flushAt {
		return
	}
	x.reg.unlinkForeign(x.out)
	x.sink.Add(x.out)
	clear(x.out)
	x.out = x.out[:0]
	clear(x.memo)
	x.memo, x.memoIndex = x.memo[:0], nil
}

// ExtractParam returns the entries of one parameter, for reindexing a
// newly added custom parameter.
func (r *Registry) ExtractParam(ctx context.Context, p *Param, resource map[string]any) ([]Entry, error) {
	if !p.Indexable() {
		return nil, nil
	}
	x := extractor{ctx: ctx, resource: resource, naive: r.whole}
	err := x.param(p)
	r.unlinkForeign(x.out)
	return x.out, err
}

// elementNames returns the top-level element names of a resource, with
// choice elements also under their base name (valueQuantity → value) and
// primitive extensions (_birthDate) under the element's name.
func elementNames(resource map[string]any) map[string]struct{} {
	m := make(map[string]struct{}, 2*len(resource))
	for k := range resource {
		k = strings.TrimPrefix(k, "_")
		m[k] = struct{}{}
		for i := 1; i < len(k); i++ {
			if c := k[i]; 'A' <= c && c <= 'Z' {
				m[k[:i]] = struct{}{}
			}
		}
	}
	return m
}

// hasAllNeeds reports whether item has the starting element of every
// component that has one.
func hasAllNeeds(item map[string]any, comps []Component) bool {
	for i := range comps {
		if n := comps[i].need; n != "" && !hasElement(item, n) {
			return false
		}
	}
	return true
}

// hasElement reports whether m has element name, directly, as a
// primitive extension, or as a choice (valueQuantity for value).
func hasElement(m map[string]any, name string) bool {
	if _, ok := m[name]; ok {
		return true
	}
	if _, ok := m["_"+name]; ok {
		return true
	}
	for k := range m {
		if len(k) > len(name) && strings.HasPrefix(k, name) && 'A' <= k[len(name)] && k[len(name)] <= 'Z' {
			return true
		}
	}
	return false
}

// mayApply reports whether the resource has an element the parameter's
// expression starts from; false means the expression would yield nothing.
func (p *Param) mayApply(present map[string]struct{}) bool {
	if p.need == nil {
		return true
	}
	for _, n := range p.need {
		if _, ok := present[n]; ok {
			return true
		}
	}
	return false
}

// resolveOpt lets "where(resolve() is Patient)" work at write time without
// loading the target: resolve() only needs the type, which a literal
// reference states, so the stub resource carries just resourceType.
var resolveOpt = fhirpath.WithResolver(resolveStub)

// stubs holds one read-only {"resourceType": T} per resource type, so
// resolve() allocates nothing.
var stubs = func() map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, t := range profiles.ResourceTypes() {
		m[t] = map[string]any{"resourceType": t}
	}
	return m
}()

func resolveStub(_ context.Context, ref string) (any, error) {
	typ, _, _, _ := parseReference(ref)
	if s, ok := stubs[typ]; ok {
		return s, nil
	}
	return nil, nil
}

// extractor is the state of one Extract call.
type extractor struct {
	ctx      context.Context
	resource map[string]any
	out      []Entry
	// memo remembers the conversion of complex nodes: the same element is
	// often reached by several parameters (Observation.code feeds code,
	// combo-code and four composites; Observation.value feeds value-quantity,
	// combo-value-quantity and composites), and converting a Quantity
	// (big.Rat arithmetic, UCUM) costs more than evaluating the path.
	memo []memoEntry
	// memoIndex finds memo entries once there are more than memoScan: a
	// resource with thousands of repeated elements (100,000 names) made
	// the linear scan quadratic, 10 s of a 3.8 MB write. Built lazily, so
	// the common small resource allocates no map.
	memoIndex map[memoKey]int
	// sink, when set, receives the entries in batches (see maybeFlush);
	// reg is the registry extracting, whose base unlinks references.
	sink *index.RowBuilder
	reg  *Registry
	// naive disables the shortcuts (element filters, root composites) for
	// the reference configuration the tests compare against.
	naive bool
}

type memoEntry struct {
	memoKey
	entries []Entry // Param is rewritten on reuse
}

type memoKey struct {
	node uintptr // identity of the JSON object
	kind Kind
	skip subParts
}

// memoScan is how many memo entries are searched linearly before the
// memo gets an index.
const memoScan = 32

// lookup returns the memo entry of key, if any.
func (x *extractor) lookup(key memoKey) (*memoEntry, bool) {
	if x.memoIndex != nil {
		i, ok := x.memoIndex[key]
		if !ok {
			return nil, false
		}
		return &x.memo[i], true
	}
	for i := range x.memo {
		if x.memo[i].memoKey == key {
			return &x.memo[i], true
		}
	}
	return nil, false
}

// remember adds a memo entry, indexing the memo once it is long.
func (x *extractor) remember(me memoEntry) {
	x.memo = append(x.memo, me)
	switch {
	case x.memoIndex != nil:
		x.memoIndex[me.memoKey] = len(x.memo) - 1
	case len(x.memo) > memoScan:
		x.memoIndex = make(map[memoKey]int, 2*len(x.memo))
		for i := range x.memo {
			x.memoIndex[x.memo[i].memoKey] = i
		}
	}
}

func (x *extractor) param(p *Param) error {
	coll, err := p.Expr.Evaluate(x.ctx, x.resource, resolveOpt)
	if err != nil {
		return fmt.Errorf("search: parameter %s: %w", p.Code, err)
	}
	if len(coll) == 0 {
		return nil
	}
	if p.Type == "composite" {
		return x.composite(p, coll)
	}
	k := index.KindOf(p.Type)
	for _, v := range coll {
		// Converting cannot fail, so the entries already handed over
		// never need taking back (see extractInto's custom parameters).
		x.out = x.convert(p.Code, k, p.skip, v, x.out)
		x.maybeFlush()
	}
	return nil
}

// convert is convert with the memo for JSON objects.
func (x *extractor) convert(code string, k Kind, skip subParts, v fhirpath.Value, out []Entry) []Entry {
	m, ok := v.Raw().(map[string]any)
	if !ok || len(m) == 0 {
		return convert(code, k, skip, v, out)
	}
	key := memoKey{node: reflect.ValueOf(m).Pointer(), kind: k, skip: skip}
	if me, ok := x.lookup(key); ok {
		for _, e := range me.entries {
			e.Param = code
			out = append(out, e)
		}
		return out
	}
	n := len(out)
	out = convert(code, k, skip, v, out)
	x.remember(memoEntry{memoKey: key, entries: out[n:len(out):len(out)]})
	return out
}

// maxCombos bounds the composite entries of one item.
const maxCombos = 256

// composite pairs the components' values item by item: for Observation
// code-value-quantity, each Observation (or component) gives code × value
// combinations, never a code of one with a value of another. Components
// are evaluated last first: the value component (value.as(Quantity)) is
// the selective one, so most composites of a resource stop there.
func (x *extractor) composite(p *Param, items fhirpath.Collection) error {
	rootID := reflect.ValueOf(x.resource).Pointer()
	for _, item := range items {
		m, ok := item.Raw().(map[string]any)
		if ok && !x.naive && !hasAllNeeds(m, p.Components) {
			continue
		}
		isRoot := ok && !x.naive && reflect.ValueOf(m).Pointer() == rootID
		parts := make([][]Entry, len(p.Components))
		empty := false
		for i := len(p.Components) - 1; i >= 0; i-- {
			c := &p.Components[i]
			var coll fhirpath.Collection
			var err error
			if isRoot {
				coll, err = c.plain.Evaluate(x.ctx, x.resource, resolveOpt)
			} else {
				coll, err = c.expr.Evaluate(x.ctx, x.resource, resolveOpt, fhirpath.WithVariable("item", fhirpath.Collection{item}))
			}
			if err != nil {
				return fmt.Errorf("search: parameter %s component %s: %w", p.Code, c.Code, err)
			}
			k := index.KindOf(c.Type)
			for _, v := range coll {
				parts[i] = x.convert(c.Code, k, 0, v, parts[i])
			}
			if len(parts[i]) == 0 {
				empty = true
				break
			}
		}
		if empty {
			continue
		}
		// Cartesian product of the components' entries, in one backing
		// array (mixed-radix counting over the parts).
		total := 1
		for _, part := range parts {
			total *= len(part)
		}
		if total > maxCombos {
			// Hostile input (thousands of codings times thousands of
			// values) must not explode the index; keep a bounded prefix.
			total = maxCombos
		}
		nc := len(parts)
		backing := make([]Entry, total*nc)
		for i := range total {
			combo := backing[i*nc : (i+1)*nc : (i+1)*nc]
			rem := i
			for j := nc - 1; j >= 0; j-- {
				combo[j] = parts[j][rem%len(parts[j])]
				rem /= len(parts[j])
			}
			x.out = append(x.out, Entry{Param: p.Code, Kind: KindComposite, Components: combo})
		}
	}
	return nil
}

// convert appends the entries of one result item for a parameter of kind
// k, choosing the conversion by the item's FHIR type.
func convert(code string, k Kind, skip subParts, v fhirpath.Value, out []Entry) []Entry {
	typ := strings.TrimPrefix(strings.TrimPrefix(v.TypeName(), "FHIR."), "System.")
	n := len(out)
	switch k {
	case KindString:
		out = stringEntries(code, typ, skip, v, out)
	case KindToken:
		out = tokenEntries(code, typ, v, out)
	case KindDate:
		out = dateEntries(code, typ, v, out)
	case KindNumber:
		out = numberEntries(code, typ, v, out)
	case KindQuantity:
		out = quantityEntries(code, typ, v, out)
	case KindReference:
		out = referenceEntries(code, typ, v, out)
	case KindURI:
		out = uriEntries(code, typ, v, out)
	}
	if len(out) == n {
		Skipped.Add(1)
	}
	return out
}

// primitive returns the text of a primitive item (FHIR primitive node or
// System value); ok=false for complex types and primitives with only an
// extension.
func primitive(v fhirpath.Value) (string, bool) {
	if !v.IsSystem() {
		switch x := v.Raw().(type) {
		case string:
			return x, x != ""
		case bool, interface{ String() string }:
			s := v.String()
			return s, s != ""
		}
		return "", false
	}
	s := v.String()
	return s, s != ""
}

func obj(v fhirpath.Value) map[string]any {
	m, _ := v.Raw().(map[string]any)
	return m
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func strs(m map[string]any, key string) []string {
	switch x := m[key].(type) {
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	case string:
		return []string{x}
	}
	return nil
}

func list(m map[string]any, key string) []map[string]any {
	x, _ := m[key].([]any)
	out := make([]map[string]any, 0, len(x))
	for _, e := range x {
		if o, ok := e.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func stringEntry(code, s string) Entry {
	return Entry{Param: code, Kind: KindString, Str: Normalize(s), Exact: s}
}

// subParts is a set of subPartNames, a bit each: the parts of a HumanName
// or Address whose entries a parameter marks Covered (see Param.Covered).
type subParts uint16

// subPartNames are the elements of a HumanName or an Address that a string
// parameter indexes, each its own entry: "given=jo" must match a name
// whose given is "Jo" even if the family comes first in the text.
var subPartNames = [...]string{
	"family", "given", "prefix", "suffix", "text", // HumanName
	"line", "city", "district", "state", "postalCode", "country", // Address, and text
}

var (
	humanNameParts = [...]int{0, 1, 2, 3, 4}
	addressParts   = [...]int{5, 6, 7, 8, 9, 10, 4}
)

func stringEntries(code, typ string, skip subParts, v fhirpath.Value, out []Entry) []Entry {
	var parts []int
	switch typ {
	case "HumanName":
		parts = humanNameParts[:]
	case "Address":
		parts = addressParts[:]
	case "string", "markdown", "code", "id", "uri", "url", "canonical", "String", "uuid", "oid":
		if s, ok := primitive(v); ok {
			out = append(out, stringEntry(code, s))
		}
		return out
	}
	m := obj(v)
	for _, i := range parts {
		for _, s := range strs(m, subPartNames[i]) {
			e := stringEntry(code, s)
			e.Covered = skip&(1<<i) != 0
			out = append(out, e)
		}
	}
	return out
}

func tokenEntries(code, typ string, v fhirpath.Value, out []Entry) []Entry {
	switch typ {
	case "Coding":
		m := obj(v)
		if c := codingEntry(code, m); c.Code != "" || c.System != "" {
			out = append(out, c)
		}
	case "CodeableConcept":
		m := obj(v)
		for _, c := range list(m, "coding") {
			if e := codingEntry(code, c); e.Code != "" || e.System != "" {
				out = append(out, e)
			}
		}
		if text := str(m, "text"); text != "" {
			// An entry of its own: :text matches the text or any display,
			// each as a string search of its own. No equality keys.
			out = append(out, Entry{Param: code, Kind: KindToken, Text: text})
		}
	case "Identifier":
		m := obj(v)
		e := Entry{Param: code, Kind: KindToken, System: str(m, "system"), Code: str(m, "value")}
		if t, ok := m["type"].(map[string]any); ok {
			e.Text = str(t, "text")
			if cs := list(t, "coding"); len(cs) > 0 {
				e.TypeSystem, e.TypeCode = str(cs[0], "system"), str(cs[0], "code")
				if e.Text == "" {
					e.Text = str(cs[0], "display")
				}
			}
		}
		if e.Code != "" || e.System != "" {
			out = append(out, e)
		}
	case "ContactPoint":
		// R4 matches telecom tokens on the value; the expressions already
		// select by ContactPoint.system (phone, email).
		m := obj(v)
		if s := str(m, "value"); s != "" {
			out = append(out, Entry{Param: code, Kind: KindToken, Code: s})
		}
	case "boolean", "Boolean", "code", "string", "String", "id", "uri", "url", "canonical", "oid", "uuid", "markdown", "integer", "Integer", "positiveInt", "unsignedInt":
		if s, ok := primitive(v); ok {
			out = append(out, Entry{Param: code, Kind: KindToken, Code: s})
		}
	}
	return out
}

func codingEntry(code string, m map[string]any) Entry {
	return Entry{Param: code, Kind: KindToken, System: str(m, "system"), Code: str(m, "code"), Text: str(m, "display")}
}

func uriEntries(code, typ string, v fhirpath.Value, out []Entry) []Entry {
	switch typ {
	case "uri", "url", "canonical", "oid", "uuid", "string", "String", "code", "id":
		if s, ok := primitive(v); ok {
			out = append(out, Entry{Param: code, Kind: KindURI, URI: s})
		}
	}
	return out
}

func referenceEntries(code, typ string, v fhirpath.Value, out []Entry) []Entry {
	switch typ {
	case "Reference":
		m := obj(v)
		e := Entry{Param: code, Kind: KindReference}
		if ref := str(m, "reference"); ref != "" && !strings.HasPrefix(ref, "#") {
			// Contained references ("#id") point inside this resource and
			// are not searchable by id; their identifier still is.
			e.RefType, e.RefID, e.RefVersion, e.URL = parseReference(ref)
		}
		if e.RefType == "" && e.RefID != "" {
			e.RefType = str(m, "type")
		}
		if id, ok := m["identifier"].(map[string]any); ok {
			e.IdentSystem, e.IdentValue = str(id, "system"), str(id, "value")
		}
		if e.RefID != "" || e.URL != "" || e.IdentValue != "" || e.IdentSystem != "" {
			out = append(out, e)
		}
	case "canonical", "uri", "url", "String", "string":
		if s, ok := primitive(v); ok && !strings.HasPrefix(s, "#") {
			e := Entry{Param: code, Kind: KindReference}
			if typ == "canonical" {
				// A canonical may pin a version: "url|1.0".
				if i := strings.LastIndexByte(s, '|'); i >= 0 {
					s, e.RefVersion = s[:i], s[i+1:]
				}
				e.URL = s
			} else {
				var ver string
				e.RefType, e.RefID, ver, e.URL = parseReference(s)
				if e.RefVersion == "" {
					e.RefVersion = ver
				}
			}
			if e.RefID != "" || e.URL != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// parseReference splits a literal reference: "Type/id",
// "Type/id/_history/v", an absolute URL ending in one of those (url is
// then the whole reference, minus the history part), or any other
// absolute URI (urn:uuid:…, urn:oid:…), kept as url only. A relative
// reference with an unknown type gives nothing.
func parseReference(ref string) (typ, id, version, url string) {
	abs := strings.Contains(ref, ":")
	path := ref
	if abs {
		url = ref
	}
	if i := strings.Index(path, "/_history/"); i >= 0 {
		version = path[i+len("/_history/"):]
		path = path[:i]
		if abs {
			url = path
		}
		if strings.Contains(version, "/") {
			return "", "", "", url
		}
	}
	j := strings.LastIndexByte(path, '/')
	if j <= 0 {
		return "", "", "", url
	}
	id = path[j+1:]
	head := path[:j]
	typ = head[strings.LastIndexByte(head, '/')+1:]
	if !profiles.IsResourceType(typ) || id == "" || !syntax.ValidID(id) {
		return "", "", "", url
	}
	return typ, id, version, url
}
