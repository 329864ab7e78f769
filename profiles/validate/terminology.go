package validate

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/profiles"
)

// bindingPlan is a required or extensible binding.
type bindingPlan struct {
	strength string
	url      string
	exp      atomic.Pointer[expansion]
}

// expansion is the locally computed membership of a ValueSet.
type expansion struct {
	found     bool
	codes     map[string]map[string]struct{} // system -> codes
	any       map[string]struct{}            // every code, any system
	unchecked map[string]bool                // systems whose codes cannot be checked here ("*": any)
}

func newExpansion() *expansion {
	return &expansion{found: true, codes: map[string]map[string]struct{}{}, any: map[string]struct{}{}, unchecked: map[string]bool{}}
}

func (x *expansion) add(system, code string) {
	s := x.codes[system]
	if s == nil {
		s = map[string]struct{}{}
		x.codes[system] = s
	}
	s[code] = struct{}{}
}

func (x *expansion) has(system, code string) bool {
	_, ok := x.codes[system][code]
	return ok
}

// finish builds the any-system index.
func (x *expansion) finish() {
	for _, s := range x.codes {
		for c := range s {
			x.any[c] = struct{}{}
		}
	}
}

// member answers whether (system, code) is in the set; known is false
// when the system cannot be checked locally.
func (x *expansion) member(system, code string) (in, known bool) {
	if system == "" {
		if _, ok := x.any[code]; ok {
			return true, true
		}
		return false, len(x.unchecked) == 0
	}
	if x.has(system, code) {
		return true, true
	}
	if x.unchecked[system] || x.unchecked["*"] {
		return false, false
	}
	return false, true
}

// expansion returns the cached expansion of a ValueSet URL.
func (v *Validator) expansion(url string) *expansion {
	if x, ok := v.vsets.Load(url); ok {
		return x.(*expansion)
	}
	x := v.expand(url, map[string]bool{})
	v.vsets.Store(url, x)
	return x
}

func (v *Validator) expand(url string, visiting map[string]bool) *expansion {
	if x, ok := v.vsets.Load(url); ok {
		return x.(*expansion)
	}
	if visiting[url] || len(visiting) > 50 {
		return &expansion{}
	}
	visiting[url] = true
	defer delete(visiting, url)
	vs, ok := v.defs.ValueSet(url)
	if !ok {
		if i := strings.IndexByte(url, '|'); i >= 0 {
			vs, ok = v.defs.ValueSet(url[:i])
		}
	}
	if !ok {
		return &expansion{}
	}
	x := newExpansion()
	switch {
	case vs.Compose != nil && len(vs.Compose.Include) > 0:
		for i := range vs.Compose.Include {
			v.include(x, &vs.Compose.Include[i], visiting)
		}
		for i := range vs.Compose.Exclude {
			ex := newExpansion()
			v.include(ex, &vs.Compose.Exclude[i], visiting)
			for sys, codes := range ex.codes {
				for c := range codes {
					delete(x.codes[sys], c)
				}
			}
		}
	case vs.Expansion != nil:
		var walk func([]profiles.ExpansionContains)
		walk = func(list []profiles.ExpansionContains) {
			for _, c := range list {
				if c.Code != "" {
					x.add(c.System, c.Code)
				}
				walk(c.Contains)
			}
		}
		walk(vs.Expansion.Contains)
	default:
		return &expansion{}
	}
	x.finish()
	return x
}

// include adds the codes of one compose.include to x.
func (v *Validator) include(x *expansion, cs *profiles.ConceptSet, visiting map[string]bool) {
	part := newExpansion()
	hasSystem := cs.System != ""
	if hasSystem {
		switch {
		case len(cs.Concept) > 0:
			for _, c := range cs.Concept {
				part.add(cs.System, c.Code)
			}
		default:
			sys, ok := v.defs.CodeSystem(cs.System)
			if !ok || sys.Content != "complete" {
				part.unchecked[cs.System] = true
				break
			}
			if len(cs.Filter) == 0 {
				walkConcepts(sys.Concept, func(c *profiles.Concept) { part.add(cs.System, c.Code) })
				break
			}
			first := true
			for _, f := range cs.Filter {
				sel, ok := filterCodes(sys, f)
				if !ok {
					part.unchecked[cs.System] = true
					break
				}
				if first {
					for c := range sel {
						part.add(cs.System, c)
					}
					first = false
					continue
				}
				for c := range part.codes[cs.System] {
					if _, ok := sel[c]; !ok {
						delete(part.codes[cs.System], c)
					}
				}
			}
		}
	}
	for i, u := range cs.ValueSet {
		imp := v.expand(u, visiting)
		if !imp.found {
			part.unchecked["*"] = true // any system: the imported set is unknown
			continue
		}
		for s := range imp.unchecked {
			part.unchecked[s] = true
		}
		if !hasSystem && i == 0 {
			for sys, codes := range imp.codes {
				for c := range codes {
					part.add(sys, c)
				}
			}
			continue
		}
		for sys, codes := range part.codes {
			for c := range codes {
				if !imp.has(sys, c) {
					delete(codes, c)
				}
			}
		}
	}
	for sys, codes := range part.codes {
		for c := range codes {
			x.add(sys, c)
		}
	}
	for s := range part.unchecked {
		x.unchecked[s] = true
	}
}

func walkConcepts(list []profiles.Concept, f func(*profiles.Concept)) {
	for i := range list {
		f(&list[i])
		walkConcepts(list[i].Concept, f)
	}
}

// filterCodes applies a compose filter on the concept hierarchy.
func filterCodes(sys *profiles.CodeSystem, f profiles.ConceptFilter) (map[string]struct{}, bool) {
	if f.Property != "concept" && f.Property != "code" {
		return nil, false
	}
	out := map[string]struct{}{}
	switch f.Op {
	case "is-a", "descendent-of":
		c := findConcept(sys.Concept, f.Value)
		if c == nil {
			return out, true
		}
		if f.Op == "is-a" {
			out[c.Code] = struct{}{}
		}
		walkConcepts(c.Concept, func(d *profiles.Concept) { out[d.Code] = struct{}{} })
	case "=":
		if findConcept(sys.Concept, f.Value) != nil {
			out[f.Value] = struct{}{}
		}
	case "in":
		for _, s := range strings.Split(f.Value, ",") {
			if findConcept(sys.Concept, strings.TrimSpace(s)) != nil {
				out[strings.TrimSpace(s)] = struct{}{}
			}
		}
	default:
		return nil, false
	}
	return out, true
}

// checkBinding checks a coded value against the element's binding.
func (w *walker) checkBinding(e *elemPlan, t *typeRef, val any, l *loc) {
	b := e.binding
	x := b.exp.Load()
	if x == nil {
		x = w.v.expansion(b.url)
		b.exp.Store(x)
	}
	code := ""
	if t != nil {
		code = t.code
	}
	if code == "" {
		code = guessCodedType(val)
	}
	sev := "error"
	if b.strength == "extensible" {
		sev = "warning"
	}
	if !x.found {
		if b.strength != "required" {
			return // extensible bindings to ValueSets not held locally are not checked
		}
		w.issue("information", "informational", l, "binding", e.profile, fmt.Sprintf("the ValueSet %s is not available; the code was not checked", b.url))
		return
	}
	switch code {
	case "code", "string", "uri", "url", "canonical", "id", "markdown":
		s, ok := val.(string)
		if !ok {
			return
		}
		in, known := x.member("", s)
		w.bindingResult(e, sev, l, in, known, "", s)
	case "Coding":
		m, _ := val.(map[string]any)
		w.coding(e, x, sev, m, l)
	case "Quantity", "Age", "Duration", "Count", "Distance", "SimpleQuantity", "MoneyQuantity":
		m, _ := val.(map[string]any)
		if c, _ := m["code"].(string); c != "" {
			w.coding(e, x, sev, m, l)
		}
	case "CodeableConcept":
		m, _ := val.(map[string]any)
		codings, _ := m["coding"].([]any)
		anyUnknown := false
		var first map[string]any
		for _, c := range codings {
			cm, _ := c.(map[string]any)
			code, _ := cm["code"].(string)
			if code == "" {
				continue
			}
			if first == nil {
				first = cm
			}
			sys, _ := cm["system"].(string)
			in, known := x.member(sys, code)
			if in {
				return
			}
			if !known {
				anyUnknown = true
			}
		}
		if first == nil {
			if b.strength == "required" && m != nil {
				if _, hasText := m["text"]; hasText || len(codings) > 0 {
					w.issue("warning", "code-invalid", l, "binding", e.profile, fmt.Sprintf("no code provided, and a code is required from the value set %s", b.url))
				}
			}
			return
		}
		if anyUnknown {
			w.issue("information", "informational", l, "binding", e.profile, fmt.Sprintf("the codes could not be checked against %s locally (external code system)", b.url))
			return
		}
		sys, _ := first["system"].(string)
		code, _ := first["code"].(string)
		w.bindingResult(e, sev, l, false, true, sys, code)
	}
}

func (w *walker) coding(e *elemPlan, x *expansion, sev string, m map[string]any, l *loc) {
	code, _ := m["code"].(string)
	if code == "" {
		return
	}
	sys, _ := m["system"].(string)
	in, known := x.member(sys, code)
	w.bindingResult(e, sev, l, in, known, sys, code)
}

func (w *walker) bindingResult(e *elemPlan, sev string, l *loc, in, known bool, sys, code string) {
	if in {
		return
	}
	what := "'" + code + "'"
	if sys != "" {
		what = "'" + sys + "#" + code + "'"
	}
	if !known {
		w.issue("information", "informational", l, "binding", e.profile, fmt.Sprintf("the code %s was not checked against %s: its code system is not available locally", what, e.binding.url))
		return
	}
	w.issue(sev, "code-invalid", l, "binding", e.profile, fmt.Sprintf("the code %s is not in the value set %s (%s binding)", what, e.binding.url, e.binding.strength))
}

func guessCodedType(val any) string {
	switch x := val.(type) {
	case string:
		return "code"
	case map[string]any:
		if _, ok := x["coding"]; ok {
			return "CodeableConcept"
		}
		if _, ok := x["text"]; ok {
			return "CodeableConcept"
		}
		if _, ok := x["value"]; ok {
			return "Quantity"
		}
		return "Coding"
	}
	return ""
}

// findConcept searches a concept tree (CodeSystem.Lookup needs the index
// only the embedded terminology builds).
func findConcept(list []profiles.Concept, code string) *profiles.Concept {
	for i := range list {
		if list[i].Code == code {
			return &list[i]
		}
		if c := findConcept(list[i].Concept, code); c != nil {
			return c
		}
	}
	return nil
}
