package search

import (
	"iter"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// The result parameters shape the page rather than select resources.

// IsResultParam says whether the parameter named name (with or without a
// modifier) shapes a search's page rather than selecting resources.
func IsResultParam(name string) bool {
	base, _, _ := strings.Cut(name, ":")
	return isResultParam(base)
}

func isResultParam(base string) bool {
	switch base {
	case "_count", "_sort", "_include", "_revinclude", "_summary", "_elements", "_total":
		return true
	}
	return false
}

// resultParams collects the result parameters; apply writes them into the
// query once all are read (_summary=count overrides _count).
type resultParams struct {
	count    int
	hasCount bool
	sort     []Sort
	include  []Include
	revinc   []Include
	summary  Summary
	elements []string
	total    TotalMode
	hasTotal bool
	// ignored are values left out (_revinclude=*).
	ignored []Ignored
}

// single returns the one value of a result parameter that may not repeat.
func single(name string, vals []string) (string, error) {
	if len(vals) != 1 {
		return "", errf(name, name+" may be given only once")
	}
	return strings.TrimSpace(vals[0]), nil
}

// commaItems yields the items of comma-separated values, trimmed, the
// empty ones skipped.
func commaItems(vals []string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, v := range vals {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" && !yield(s) {
					return
				}
			}
		}
	}
}

// add reads one result parameter and returns the values applied (nil
// when none, e.g. an empty _elements, which the self link need not show).
func (rp *resultParams) add(ps *parser, types []string, name, base string, vals []string) ([]string, error) {
	if name != base && base != "_include" && base != "_revinclude" {
		return nil, errf(name, base+" takes no modifier")
	}
	switch base {
	case "_count":
		v, err := single(name, vals)
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, errf(name, "_count must be a non-negative integer, not "+syntax.Quote(v))
		}
		if ps.opt.MaxCount > 0 && n > ps.opt.MaxCount {
			n = ps.opt.MaxCount
		}
		rp.count, rp.hasCount = n, true
	case "_sort":
		for s := range commaItems(vals) {
			st := Sort{Param: s}
			if strings.HasPrefix(s, "-") {
				st = Sort{Param: s[1:], Desc: true}
			}
			if err := ps.sortable(types, st.Param); err != nil {
				return nil, err
			}
			st.Param = ps.sortParam(types, st.Param)
			st.Type = ps.sortType(types, st.Param)
			if slices.ContainsFunc(rp.sort, func(x Sort) bool { return x.Param == st.Param }) {
				continue // the first occurrence decides
			}
			rp.sort = append(rp.sort, st)
		}
	case "_include", "_revinclude":
		iterate := false
		switch mod := strings.TrimPrefix(name, base); mod {
		case "":
		case ":iterate", ":recurse":
			iterate = true
		default:
			return nil, errf(name, "unknown modifier "+mod+" (only :iterate)")
		}
		var applied []string
		for _, v := range vals {
			incs, err := ps.include(types, name, base == "_revinclude", strings.TrimSpace(v), iterate)
			if err == errRevAll {
				rp.ignored = append(rp.ignored, Ignored{name, errRevAll.Message})
				continue
			}
			if err != nil {
				return nil, err
			}
			if base == "_include" {
				rp.include = append(rp.include, incs...)
			} else {
				rp.revinc = append(rp.revinc, incs...)
			}
			applied = append(applied, v)
		}
		return applied, nil
	case "_summary":
		v, err := single(name, vals)
		if err != nil {
			return nil, err
		}
		s, ok := map[string]Summary{"true": SummaryTrue, "text": SummaryText, "data": SummaryData, "count": SummaryCount, "false": SummaryFalse}[v]
		if !ok {
			return nil, errf(name, "_summary takes true, text, data, count or false, not "+syntax.Quote(v))
		}
		rp.summary = s
	case "_elements":
		for e := range commaItems(vals) {
			if !validElement(e) {
				return nil, errf(name, "not an element name: "+syntax.Quote(e))
			}
			if !slices.Contains(rp.elements, e) {
				rp.elements = append(rp.elements, e)
			}
		}
		if len(rp.elements) == 0 {
			return nil, nil
		}
	case "_total":
		v, err := single(name, vals)
		if err != nil {
			return nil, err
		}
		t, ok := map[string]TotalMode{"none": TotalNone, "estimate": TotalEstimate, "accurate": TotalAccurate}[v]
		if !ok {
			return nil, errf(name, "_total takes none, estimate or accurate, not "+syntax.Quote(v))
		}
		rp.total, rp.hasTotal = t, true
	}
	return vals, nil
}

// apply writes the result parameters into q; the applied _count is the
// one used (clamped to MaxCount).
func (rp *resultParams) apply(ps *parser, q *Query, applied url.Values) error {
	if rp.hasCount {
		q.Count = rp.count
		applied["_count"] = []string{strconv.Itoa(rp.count)}
	}
	q.Sort = rp.sort
	q.Include, q.RevInclude = rp.include, rp.revinc
	q.Summary = rp.summary
	q.Elements = rp.elements
	q.Total = rp.total
	if rp.summary == SummaryCount {
		q.Count = 0
		q.Total = TotalAccurate
	}
	return nil
}

// sortable checks a _sort parameter: _id and _lastUpdated always, else a
// parameter of every searched type with a sort value.
func (ps *parser) sortable(types []string, code string) error {
	if code == "_id" || code == "_lastUpdated" {
		return nil
	}
	name := "_sort"
	tps, ok := ps.lookup(types, code)
	if !ok {
		return errf(name, "unknown parameter "+syntax.Quote(code)+forTypes(types))
	}
	for _, tp := range tps {
		if tp.p.Type == "composite" || tp.p.Type == "special" {
			return errf(name, "cannot sort by "+tp.p.Type+" parameter "+syntax.Quote(code))
		}
	}
	return nil
}

// sortParam is the parameter whose sort rows a _sort on code reads: the
// code itself, or for a parameter that is the union of parts (which has
// no rows of its own) its main part, the one with the shortest code
// (combo-value-quantity sorts by value-quantity).
func (ps *parser) sortParam(types []string, code string) string {
	tps, ok := ps.lookup(types, code)
	if !ok || len(tps) != 1 || len(tps[0].p.Parts) == 0 {
		return code
	}
	main := tps[0].p.Parts[0].Code
	for _, q := range tps[0].p.Parts[1:] {
		if len(q.Code) < len(main) {
			main = q.Code
		}
	}
	return main
}

// sortType is the type every definition of code for types shares, ""
// if they differ (see Sort.Type).
func (ps *parser) sortType(types []string, code string) string {
	if code == "_id" || code == "_lastUpdated" {
		return ""
	}
	tps, ok := ps.lookup(types, code)
	if !ok || len(tps) == 0 {
		return ""
	}
	for _, tp := range tps[1:] {
		if tp.p.Type != tps[0].p.Type {
			return ""
		}
	}
	return tps[0].p.Type
}

// errRevAll reports a _revinclude=* that cannot be expanded: in a system
// search without _type, or with :iterate (the page's types are not known
// in advance); it is ignored.
var errRevAll = errf("_revinclude", "_revinclude=* is only supported on known types, without :iterate")

// include parses one _include or _revinclude value: "*", "Source:param",
// "Source:param:Target" or "Source:*". _include=* is every reference of
// any resource of the page: Source "" (any type), Param "*".
// _revinclude=* is expanded to every reference parameter of every type
// that can refer to a searched type T, as Source:param:T, so that each is
// an index lookup and each source type is authorized like any other.
func (ps *parser) include(types []string, name string, rev bool, v string, iterate bool) ([]Include, error) {
	if v == "*" {
		if !rev {
			return []Include{{Param: "*", Iterate: iterate}}, nil
		}
		if iterate || len(types) == 0 {
			return nil, errRevAll
		}
		var out []Include
		for _, t := range types {
			for _, src := range profiles.ResourceTypes() {
				for _, p := range ps.r.Params(src) {
					if p.Type == "reference" && slices.Contains(p.Targets, t) {
						out = append(out, Include{Source: src, Param: p.Code, Target: t})
					}
				}
			}
		}
		return out, nil
	}
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[1] == "" {
		return nil, errf(name, "takes Source:parameter[:Target], not "+syntax.Quote(v))
	}
	inc := Include{Source: parts[0], Param: parts[1], Iterate: iterate}
	if !profiles.IsResourceType(inc.Source) {
		return nil, errf(name, "unknown resource type "+syntax.Quote(inc.Source))
	}
	var p *Param
	if inc.Param != "*" {
		var ok bool
		p, ok = ps.r.Lookup(inc.Source, inc.Param)
		if !ok || p.Type != "reference" {
			return nil, errf(name, inc.Source+" has no reference parameter "+syntax.Quote(inc.Param))
		}
	}
	if len(parts) == 3 {
		inc.Target = parts[2]
		if !profiles.IsResourceType(inc.Target) {
			return nil, errf(name, "unknown resource type "+syntax.Quote(inc.Target))
		}
		if p != nil && !isTargetType(p, inc.Target) {
			return nil, errf(name, inc.Source+"."+inc.Param+" cannot refer to a "+inc.Target)
		}
	}
	return []Include{inc}, nil
}

// validElement accepts element names and dotted paths of them.
func validElement(e string) bool {
	for i := 0; i < len(e); i++ {
		c := e[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '[' || c == ']' || c == 'x') {
			return false
		}
	}
	return len(e) <= 128
}
