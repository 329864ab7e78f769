package search

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/extract"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/paramexpr"
	"github.com/kiln-fhir/kiln/profiles"
)

// Component is one part of a composite parameter, resolved at build time.
type Component struct {
	Definition string // canonical URL of the component's SearchParameter
	Code       string // that parameter's code
	Type       string // that parameter's type (token, quantity, date, …)
	Expression string // relative to each item of the composite
}

// Param is a search parameter as it applies to one resource type.
type Param struct {
	Code, Type, URL string
	Base            []string // every base of the SearchParameter
	Targets         []string // reference targets
	// Expression is the SearchParameter's full expression; Expr is the
	// compiled form for this resource type (only the union branches that
	// can apply to it). Expr is nil when the parameter is not indexable.
	Expression string
	Expr       *fhirpath.Expression
	Components []Component
	Custom     bool // posted to the server rather than from the core spec
	// Parts, when set, are the parameters of the same type whose union
	// this one is (Observation combo-code = code | component-code, and the
	// combo composites likewise). Such a parameter is not indexed: a
	// search on it searches its parts, so each value is stored once, not
	// twice (a third of an Observation's rows). A single part is a
	// parameter indexed exactly like this one (see linkAliases: Patient
	// phonetic is searched, sorted and tested for :missing as name).
	Parts []*Param
	// Conjoined, when set, are the parameters of the same type that define
	// the components of a composite evaluated on the resource itself
	// (Observation code-value-quantity = code and value-quantity) and that
	// extract exactly what the components do. Such a composite is not
	// indexed: a value matches when each component's parameter matches its
	// part, the resource being the composite's only item. That saves the
	// product rows (code forms × unit forms: six per Observation).
	Conjoined []*Param
	// Covered, when set, are the string parameters of the same type that
	// index one part of each of this one's values (Patient family and
	// given are the family and given of each name, which name indexes
	// too; see linkCovered). This parameter stores no keys for those
	// parts (x.Skip), and a search on it also searches their keys. Its sort
	// row still comes from every part, so _sort and :missing need nothing
	// of theirs.
	Covered []*Param
	// branches are the union branches of the expression that apply to
	// this resource type.
	branches []string
	// x is the parameter as extraction evaluates it (when Indexable):
	// the elements a resource must have, the parts Covered leaves out
	// (Skip), and the compiled components.
	x extract.Param
}

// Indexable reports whether Extract produces entries for the parameter:
// it has an expression and a type with an index form (not special).
func (p *Param) Indexable() bool { return p.Expr != nil && index.KindOf(p.Type) != 0 }

// typeParams is the immutable parameter set of one resource type; AddCustom
// replaces it wholesale (copy on write) so readers hold no lock while
// extracting.
type typeParams struct {
	list   []*Param // sorted by code
	byCode map[string]*Param
}

// Registry holds the search parameters of every resource type. It is safe
// for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	types  map[string]*typeParams
	byURL  map[string]*profiles.SearchParameter // for composite components
	whole  bool                                 // reference mode: whole expressions, no shortcuts (tests, benchmarks)
	custom map[string]profiles.SearchParameter  // by URL
	// gen counts changes (AddCustom), so that rows extracted earlier can
	// be told apart from rows the current parameters would give.
	gen atomic.Uint64
	// base is this server's FHIR base (see SetBase).
	base atomic.Pointer[string]
	// log hears of custom parameters that fail on a resource (SetLogger),
	// once per *Param in failed: a bad parameter must not flood the log.
	log    atomic.Pointer[slog.Logger]
	failed sync.Map
}

// SetLogger is where the registry reports a custom parameter whose
// expression fails on a resource being indexed.
func (r *Registry) SetLogger(l *slog.Logger) { r.log.Store(l) }

// SetBase tells the registry this server's FHIR base URL (https://host/fhir).
// An absolute reference under it is indexed as the local Type/id it names;
// one to any other server keeps only its URL, so that it never matches,
// includes or joins a compartment with the local resource of the same
// type and id. Without a base every absolute reference is taken as local.
func (r *Registry) SetBase(base string) {
	b := strings.TrimSuffix(base, "/") + "/"
	r.base.Store(&b)
}

// Generation changes whenever the parameters do.
func (r *Registry) Generation() uint64 { return r.gen.Load() }

// NewRegistry builds the registry from the R4 SearchParameters of package
// profiles. Parameters based on Resource or DomainResource apply to every
// resource type.
func NewRegistry() (*Registry, error) { return newRegistry(false) }

// newRegistry with whole=true compiles each expression unsplit and
// evaluates every parameter without the element filters: the tests check
// that the optimized registry gives the same entries, and the benchmark
// measures what the optimizations save.
func newRegistry(whole bool) (*Registry, error) {
	c := &cores[0]
	if whole {
		c = &cores[1]
	}
	c.once.Do(func() { c.reg, c.err = buildRegistry(whole) })
	if c.err != nil {
		return nil, c.err
	}
	return &Registry{types: maps.Clone(c.reg.types), byURL: maps.Clone(c.reg.byURL), whole: whole, custom: map[string]profiles.SearchParameter{}}, nil
}

// cores are the registries built from the core SearchParameters, one per
// mode, built once per process. Every Registry starts as a copy of their
// maps: the typeParams and Params in them are never modified (AddCustom
// and RemoveCustom replace a type's typeParams in the copy), so sharing
// them is safe, and a server, each of its partitions and each test server
// need not rebuild them (several milliseconds and ~2,000 Params each).
var cores [2]struct {
	once sync.Once
	reg  *Registry
	err  error
}

// buildRegistry builds the registry of the core SearchParameters.
func buildRegistry(whole bool) (*Registry, error) {
	sps, err := profiles.SearchParameters()
	if err != nil {
		return nil, fmt.Errorf("search: loading SearchParameters: %w", err)
	}
	r := &Registry{types: map[string]*typeParams{}, byURL: map[string]*profiles.SearchParameter{}, whole: whole, custom: map[string]profiles.SearchParameter{}}
	for i := range sps {
		r.byURL[sps[i].URL] = &sps[i]
	}
	build := map[string]map[string]*Param{}
	for _, t := range profiles.ResourceTypes() {
		build[t] = map[string]*Param{}
	}
	for i := range sps {
		sp := &sps[i]
		for _, t := range expandBase(sp.Base) {
			m, ok := build[t]
			if !ok {
				continue
			}
			if _, dup := m[sp.Code]; dup {
				continue // the first definition in specification order wins
			}
			p, err := r.makeParam(sp, t)
			if err != nil {
				return nil, err
			}
			m[sp.Code] = p
		}
	}
	for t, m := range build {
		linkParts(m)
		linkConjoined(t, m)
		linkAliases(m)
		linkCovered(m)
		r.types[t] = newTypeParams(m)
	}
	return r, nil
}

// linkParts sets Parts on each parameter whose branches are exactly those
// of two or more other parameters of the same type and kind (composites:
// with the same components).
func linkParts(m map[string]*Param) {
	for _, p := range m {
		if p.Expr == nil || len(p.branches) < 2 {
			continue
		}
		var cands []*Param
		for _, q := range m {
			if q != p && q.Expr != nil && len(q.branches) < len(p.branches) && sameShape(p, q) && isSubset(q.branches, p.branches) {
				cands = append(cands, q)
			}
		}
		slices.SortFunc(cands, func(a, b *Param) int {
			if d := len(b.branches) - len(a.branches); d != 0 {
				return d
			}
			return strings.Compare(a.Code, b.Code)
		})
		covered := map[string]bool{}
		var parts []*Param
		for _, q := range cands {
			if slices.ContainsFunc(q.branches, func(b string) bool { return covered[b] }) {
				continue
			}
			for _, b := range q.branches {
				covered[b] = true
			}
			parts = append(parts, q)
		}
		if len(parts) >= 2 && len(covered) == len(p.branches) {
			p.Parts = parts
		}
	}
}

// linkAliases makes each core parameter that is indexed exactly like
// another of the same type (same type, targets and expression branches
// for this type, hence the same entries under another code) an alias of
// the one with the least code: Parts holds that one alone, so the alias
// has no keys, dates, numbers or sort rows of its own, and a search, a
// _sort or a :missing on it reads the canonical parameter's. R4 has such
// pairs (Patient, Person, Practitioner and RelatedPerson phonetic = name,
// CodeSystem url = system, CapabilityStatement version = fhirversion):
// a name costs 8 keys instead of 12. Stores written before kept the rows
// of both, so the canonical one's are there and nothing needs reindexing
// (the alias's old rows are no longer read). Reference parameters are
// left alone: includes, chains, _has and compartments read their keys
// by code outside the parser. Custom parameters too, as they come and go.
func linkAliases(m map[string]*Param) {
	eligible := func(p *Param) bool {
		return !p.Custom && p.Indexable() && len(p.Parts) == 0 && p.Conjoined == nil &&
			p.Type != "reference" && p.Type != "composite" && len(p.Components) == 0
	}
	codes := slices.Sorted(maps.Keys(m))
	alias := map[*Param]*Param{}
	for i, c := range codes {
		p := m[c]
		if !eligible(p) || alias[p] != nil {
			continue
		}
		for _, d := range codes[i+1:] {
			q := m[d]
			if eligible(q) && alias[q] == nil && q.Type == p.Type &&
				slices.Equal(q.Targets, p.Targets) && sameSet(q.branches, p.branches) {
				alias[q] = p
			}
		}
	}
	for q, p := range alias {
		q.Parts = []*Param{p}
	}
	// Unions and conjoined composites must name the canonical parameters,
	// which are the ones with rows.
	canon := func(ps []*Param, dedup bool) []*Param {
		out := make([]*Param, 0, len(ps))
		for _, q := range ps {
			if p := alias[q]; p != nil {
				q = p
			}
			if !dedup || !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
		return out
	}
	for _, p := range m {
		if alias[p] == nil && len(p.Parts) > 0 {
			p.Parts = canon(p.Parts, true)
		}
		if p.Conjoined != nil { // one per component, in order
			p.Conjoined = canon(p.Conjoined, false)
		}
	}
}

// linkCovered sets Covered on each core string parameter whose values are
// HumanNames or Addresses that other core string parameters of the type
// index part by part: a parameter whose branches are exactly this one's
// branches followed by ".family" (".given", ".city", …). Patient name is
// family ∪ given ∪ the prefix, suffix and text only it indexes; a name
// then costs 4 keys, not 8, and an address with a city, state, postal
// code and country 4 plus its lines, not 12. Stores written before keep
// the full keys of the covering parameter, a superset of what it stores
// now, so searches on them stay right without a reindex.
func linkCovered(m map[string]*Param) {
	eligible := func(p *Param) bool {
		return !p.Custom && p.Type == "string" && p.Indexable() && len(p.Parts) == 0 && p.Conjoined == nil
	}
	for _, p := range m {
		if !eligible(p) {
			continue
		}
		for i, part := range extract.PartNames {
			want := make([]string, len(p.branches))
			for j, b := range p.branches {
				want[j] = strings.TrimSpace(b) + "." + part
			}
			for _, c := range slices.Sorted(maps.Keys(m)) {
				q := m[c]
				if q != p && eligible(q) && sameSet(trimmed(q.branches), want) {
					p.Covered = append(p.Covered, q)
					p.x.Skip |= 1 << i
					break
				}
			}
		}
	}
}

// trimmed is bs with each branch's surrounding spaces removed.
func trimmed(bs []string) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = strings.TrimSpace(b)
	}
	return out
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && isSubset(a, b) && isSubset(b, a)
}

// linkConjoined sets Conjoined on each core composite of type t whose
// item is the resource itself, when every component is a parameter of t
// (by definition URL) that extracts from the same paths.
func linkConjoined(t string, m map[string]*Param) {
	for _, p := range m {
		if p.Type != "composite" || p.Custom || p.Expr == nil || len(p.Parts) > 0 ||
			len(p.branches) != 1 || strings.TrimSpace(p.branches[0]) != t {
			continue
		}
		var parts []*Param
		for _, c := range p.Components {
			q, ok := m[c.Code]
			if !ok || q.URL != c.Definition || q.Type != c.Type || q.Expr == nil || len(q.Parts) > 0 ||
				!sameBranches(t, q, c.Expression) {
				parts = nil
				break
			}
			parts = append(parts, q)
		}
		if len(parts) == len(p.Components) && len(parts) >= 2 {
			p.Conjoined = parts
		}
	}
}

// sameBranches reports whether q's branches on type t are the component
// expression expr applied to the resource: "(Observation.value.ofType(X))"
// is "value.ofType(X)". A SampledData branch of a quantity parameter is
// ignored: SampledData has no quantity entries.
func sameBranches(t string, q *Param, expr string) bool {
	norm := func(b string) string {
		b = strings.TrimSpace(b)
		for strings.HasPrefix(b, "(") && strings.HasSuffix(b, ")") {
			b = strings.TrimSpace(b[1 : len(b)-1])
		}
		return b
	}
	var own []string
	for _, b := range q.branches {
		b = norm(b)
		if q.Type == "quantity" && b == t+".value.ofType(SampledData)" {
			continue
		}
		own = append(own, b)
	}
	var comp []string
	for _, b := range paramexpr.Branches(expr) {
		comp = append(comp, t+"."+norm(b.Source))
	}
	slices.Sort(own)
	slices.Sort(comp)
	return slices.Equal(own, comp)
}

// sameShape reports whether q indexes values the way p does: the same
// type, targets and (for composites) components.
func sameShape(p, q *Param) bool {
	if p.Type != q.Type || !slices.Equal(p.Targets, q.Targets) || len(p.Components) != len(q.Components) {
		return false
	}
	for i := range p.Components {
		a, b := p.Components[i], q.Components[i]
		if a.Type != b.Type || a.Expression != b.Expression {
			return false
		}
	}
	return true
}

func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func newTypeParams(m map[string]*Param) *typeParams {
	tp := &typeParams{byCode: m, list: make([]*Param, 0, len(m))}
	for _, p := range m {
		tp.list = append(tp.list, p)
	}
	slices.SortFunc(tp.list, func(a, b *Param) int { return strings.Compare(a.Code, b.Code) })
	return tp
}

// expandBase turns Resource and DomainResource into every resource type
// (all concrete R4 types but Bundle, Binary and Parameters are domain
// resources; the difference does not matter for the few such parameters).
func expandBase(base []string) []string {
	var out []string
	for _, b := range base {
		if b == "Resource" || b == "DomainResource" {
			return profiles.ResourceTypes()
		}
		out = append(out, b)
	}
	return out
}

// makeParam compiles sp for resource type t.
func (r *Registry) makeParam(sp *profiles.SearchParameter, t string) (*Param, error) {
	p := &Param{
		Code: sp.Code, Type: sp.Type, URL: sp.URL,
		Base: sp.Base, Targets: sp.Target, Expression: sp.Expression,
	}
	if sp.Expression == "" || index.KindOf(sp.Type) == 0 {
		return p, nil // kept for lookup, not indexed
	}
	all, err := paramexpr.Compile(sp.Expression)
	if err != nil {
		return nil, fmt.Errorf("search: parameter %s (%s): %w", sp.Code, sp.URL, err)
	}
	src, kept := paramexpr.Kept(sp.Expression, all.Branches(), t)
	for _, b := range kept {
		p.branches = append(p.branches, b.Source)
	}
	if r.whole {
		src = sp.Expression
	}
	expr, err := paramexpr.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("search: parameter %s (%s): %w", sp.Code, sp.URL, err)
	}
	p.Expr = expr
	p.x = extract.Param{Code: sp.Code, Kind: index.KindOf(sp.Type), Expr: expr, Need: paramexpr.Needs(expr.Branches())}
	if n := len(sp.Component); n > 0 {
		p.Components, p.x.Components = make([]Component, 0, n), make([]extract.Component, 0, n)
	}
	for _, c := range sp.Component {
		def, ok := r.byURL[c.Definition]
		if !ok {
			return nil, fmt.Errorf("search: composite parameter %s: unknown component %s", sp.Code, c.Definition)
		}
		if index.KindOf(def.Type) == 0 || def.Type == "composite" {
			return nil, fmt.Errorf("search: composite parameter %s: component %s has type %s", sp.Code, c.Definition, def.Type)
		}
		ce, err := paramexpr.Compile("%item.select(" + c.Expression + ")")
		if err != nil {
			return nil, fmt.Errorf("search: composite parameter %s: component %s: %w", sp.Code, c.Definition, err)
		}
		plain, err := paramexpr.Compile(c.Expression)
		if err != nil {
			return nil, fmt.Errorf("search: composite parameter %s: component %s: %w", sp.Code, c.Definition, err)
		}
		p.Components = append(p.Components, Component{Definition: c.Definition, Code: def.Code, Type: def.Type, Expression: c.Expression})
		p.x.Components = append(p.x.Components, extract.Component{Code: def.Code, Kind: index.KindOf(def.Type), Expr: ce, Plain: plain, Need: paramexpr.RelativeNeed(plain)})
	}
	return p, nil
}

// Lookup returns the parameter code of resourceType.
func (r *Registry) Lookup(resourceType, code string) (*Param, bool) {
	tp := r.typeParams(resourceType)
	if tp == nil {
		return nil, false
	}
	p, ok := tp.byCode[code]
	return p, ok
}

// Params returns the parameters of resourceType sorted by code. The
// caller may keep the slice; the Params are shared and must not be
// modified.
func (r *Registry) Params(resourceType string) []*Param {
	tp := r.typeParams(resourceType)
	if tp == nil {
		return nil
	}
	return slices.Clone(tp.list)
}

func (r *Registry) typeParams(t string) *typeParams {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.types[t]
}

// validCode reports whether code is a usable name for a custom
// parameter: letters, digits, '-' and '_', starting with a letter. The
// query syntax reserves ':' (modifiers), '.' (chains), '=', '&', '$', '|'
// and ',' (values), and the specification the names starting with '_'.
func validCode(code string) bool {
	if code == "" || len(code) > 64 {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9', c == '-', c == '_':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

var validTypes = map[string]bool{"number": true, "date": true, "string": true, "token": true, "reference": true, "composite": true, "quantity": true, "uri": true, "special": true}

// AddCustom registers a SearchParameter posted to the server; from then
// on Extract indexes it. A parameter with the URL of an earlier custom
// one replaces it; a code already used on a base type by a different
// parameter is refused, as are unknown base types, unknown types and
// expressions that do not compile. Existing resources are not reindexed
// here (that is the job of $reindex).
func (r *Registry) AddCustom(sp profiles.SearchParameter) error {
	if sp.URL == "" {
		return errors.New("search: SearchParameter.url is required")
	}
	if !validCode(sp.Code) {
		return fmt.Errorf("search: SearchParameter.code %q is not a valid parameter name", sp.Code)
	}
	if !validTypes[sp.Type] {
		return fmt.Errorf("search: SearchParameter.type %q is not a search parameter type", sp.Type)
	}
	if len(sp.Base) == 0 {
		return errors.New("search: SearchParameter.base is required")
	}
	for _, b := range sp.Base {
		if b != "Resource" && b != "DomainResource" && !profiles.IsResourceType(b) {
			return fmt.Errorf("search: SearchParameter.base %q is not a resource type", b)
		}
	}
	if sp.Type == "special" {
		// Its meaning is code in a server, which a posted one cannot bring.
		return fmt.Errorf("search: SearchParameter %s is of type special, which this server cannot search by", sp.Code)
	}
	if sp.Expression == "" {
		return fmt.Errorf("search: SearchParameter %s of type %s needs an expression", sp.Code, sp.Type)
	}
	if sp.Type == "composite" && len(sp.Component) < 2 {
		return fmt.Errorf("search: composite SearchParameter %s needs at least two components", sp.Code)
	}
	for _, t := range sp.Target {
		if !profiles.IsResourceType(t) {
			return fmt.Errorf("search: SearchParameter.target %q is not a resource type", t)
		}
	}
	sp.Base = slices.Clone(sp.Base)
	sp.Target = slices.Clone(sp.Target)
	sp.Component = slices.Clone(sp.Component)

	r.mu.Lock()
	defer r.mu.Unlock()
	prev, had := r.custom[sp.URL]
	if _, core := r.byURL[sp.URL]; core && !had {
		return fmt.Errorf("search: %s is the URL of a core parameter", sp.URL)
	}
	next := map[string]*typeParams{}
	for _, t := range expandBase(sp.Base) {
		tp := r.types[t]
		if old, ok := tp.byCode[sp.Code]; ok && old.URL != sp.URL {
			return fmt.Errorf("search: parameter %s already exists on %s (%s)", sp.Code, t, old.URL)
		}
		if old, ok := tp.byCode[sp.Code]; ok && !old.Custom {
			return fmt.Errorf("search: parameter %s on %s is a core parameter and cannot be replaced", sp.Code, t)
		}
		p, err := r.makeParam(&sp, t)
		if err != nil {
			return err
		}
		p.Custom = true
		m := withoutURL(tp, sp.URL) // the previous version of this parameter
		m[sp.Code] = p
		next[t] = newTypeParams(m)
	}
	if had { // types the previous version had and this one has not
		for _, t := range expandBase(prev.Base) {
			if _, ok := next[t]; !ok {
				next[t] = newTypeParams(withoutURL(r.types[t], sp.URL))
			}
		}
	}
	for t, tp := range next {
		r.types[t] = tp
	}
	r.gen.Add(1)
	r.custom[sp.URL] = sp
	r.byURL[sp.URL] = &sp // later composites may use it as a component
	return nil
}

// RemoveCustom drops the custom parameter with url (its SearchParameter
// was deleted or retired), and the custom composites built on it, as a
// restart would not register them; it reports whether there was one.
func (r *Registry) RemoveCustom(url string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removeCustom(url)
}

// ResetCustom drops every custom parameter: the registry is as built.
func (r *Registry) ResetCustom() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for url := range r.custom {
		r.removeCustom(url)
	}
}

func (r *Registry) removeCustom(url string) bool {
	sp, ok := r.custom[url]
	if !ok {
		return false
	}
	for _, t := range expandBase(sp.Base) {
		r.types[t] = newTypeParams(withoutURL(r.types[t], url))
	}
	delete(r.custom, url)
	delete(r.byURL, url) // a custom url is never a core one (AddCustom)
	r.gen.Add(1)
	for other, c := range r.custom {
		if slices.ContainsFunc(c.Component, func(cp profiles.SearchParameterComponent) bool { return cp.Definition == url }) {
			r.removeCustom(other)
		}
	}
	return true
}

// withoutURL is a copy of tp's parameters less the one with url.
func withoutURL(tp *typeParams, url string) map[string]*Param {
	m := make(map[string]*Param, len(tp.byCode)+1)
	for k, v := range tp.byCode {
		if v.URL != url {
			m[k] = v
		}
	}
	return m
}
