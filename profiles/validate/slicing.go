package validate

import (
	"fmt"
	"slices"
	"strings"
)

// slicingPlan is a compiled ElementDefinition.slicing with its slices.
type slicingPlan struct {
	discs       []discriminator
	rules       string // closed, open, openAtEnd
	ordered     bool
	slices      []*slicePlan
	unsupported string // why the slices cannot be told apart here
}

type discriminator struct {
	typ   string // value, pattern, type, profile, exists
	path  string
	steps []pathStep
}

// pathStep is one step of a discriminator path.
type pathStep struct {
	name string // JSON key (a choice key once ofType() is applied)
	url  string // extension('url')
	this bool
}

type slicePlan struct {
	elem   *elemPlan
	expect []expectation // one per discriminator
}

// expectation is what a slice requires at a discriminator path.
type expectation struct {
	kind     byte // 'f' fixed, 'p' pattern, 'e' exists, 't' types, 'r' profiles, 0 none
	val      any
	exists   bool
	types    []string
	profiles []string
}

// parsePath parses the discriminator path subset supported: names,
// $this, extension('url') and ofType(T) after a choice name.
func parsePath(p string) ([]pathStep, bool) {
	var steps []pathStep
	for p != "" {
		var seg string
		depth, quote := 0, false
		i := 0
		for ; i < len(p); i++ {
			c := p[i]
			if c == '\'' {
				quote = !quote
			} else if !quote && c == '(' {
				depth++
			} else if !quote && c == ')' {
				depth--
			} else if !quote && depth == 0 && c == '.' {
				break
			}
		}
		seg = p[:i]
		if i < len(p) {
			p = p[i+1:]
		} else {
			p = ""
		}
		switch {
		case seg == "$this":
			steps = append(steps, pathStep{this: true})
		case len(seg) >= len("extension('')") && strings.HasPrefix(seg, "extension('") && strings.HasSuffix(seg, "')"):
			steps = append(steps, pathStep{name: "extension", url: seg[len("extension('") : len(seg)-2]})
		case strings.HasPrefix(seg, "ofType(") && strings.HasSuffix(seg, ")"):
			if len(steps) == 0 || steps[len(steps)-1].this {
				return nil, false
			}
			t := seg[len("ofType(") : len(seg)-1]
			if t == "" {
				return nil, false
			}
			last := &steps[len(steps)-1]
			last.name += strings.ToUpper(t[:1]) + t[1:]
		case strings.ContainsAny(seg, "()[]"):
			return nil, false
		default:
			steps = append(steps, pathStep{name: seg})
		}
	}
	return steps, true
}

// navigate follows steps from val, flattening arrays.
func navigate(val any, steps []pathStep) []any {
	cur := []any{val}
	for _, st := range steps {
		if st.this {
			continue
		}
		var next []any
		for _, c := range cur {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			v, has := m[st.name]
			if !has {
				// a choice element named without its type
				for k, x := range m {
					if len(k) > len(st.name) && strings.HasPrefix(k, st.name) && k[len(st.name)] >= 'A' && k[len(st.name)] <= 'Z' {
						v, has = x, true
						break
					}
				}
			}
			if !has {
				continue
			}
			if arr, ok := v.([]any); ok {
				for _, x := range arr {
					if st.url != "" {
						if xm, ok := x.(map[string]any); !ok || xm["url"] != st.url {
							continue
						}
					}
					next = append(next, x)
				}
			} else if st.url == "" {
				next = append(next, v)
			}
		}
		cur = next
	}
	return cur
}

func (v *Validator) compileSlicing(e *elemPlan) *slicingPlan {
	s := e.slicingDef
	sp := &slicingPlan{rules: s.Rules, ordered: s.Ordered}
	if sp.rules == "" {
		sp.rules = "open"
	}
	for _, d := range s.Discriminator {
		steps, ok := parsePath(d.Path)
		if !ok {
			sp.unsupported = fmt.Sprintf("discriminator path '%s' is not supported", d.Path)
		}
		switch d.Type {
		case "value", "pattern", "type", "profile", "exists":
		default:
			sp.unsupported = fmt.Sprintf("discriminator type '%s' is not supported", d.Type)
		}
		sp.discs = append(sp.discs, discriminator{typ: d.Type, path: d.Path, steps: steps})
	}
	if len(sp.discs) == 0 && len(e.slices) > 0 {
		sp.unsupported = "slicing without discriminators is not supported"
	}
	for _, sl := range e.slices {
		p := &slicePlan{elem: sl}
		for _, d := range sp.discs {
			p.expect = append(p.expect, expectFor(sl, d))
		}
		sp.slices = append(sp.slices, p)
	}
	return sp
}

// expectFor finds what a slice requires at a discriminator's path.
func expectFor(sl *elemPlan, d discriminator) expectation {
	cur := sl
	for i, st := range d.steps {
		if st.this {
			continue
		}
		if d.typ == "value" || d.typ == "pattern" {
			if cur.fixed != nil || cur.pattern != nil {
				return fromValue(cur, d.steps[i:])
			}
		}
		var next *elemPlan
		for _, c := range cur.children {
			if c.name == st.name || (c.choice && strings.HasPrefix(st.name, c.name)) {
				next = c
				break
			}
			for _, t := range c.types {
				if t.key == st.name {
					next = c
				}
			}
		}
		if next != nil && st.url != "" {
			var found *elemPlan
			for _, s := range next.slices {
				if extURL(s) == st.url {
					found = s
				}
			}
			next = found
		}
		if next == nil {
			if len(d.steps) == 1 && st.name == "url" && (d.typ == "value" || d.typ == "pattern") {
				if u := extURL(sl); u != "" {
					return expectation{kind: 'f', val: u}
				}
			}
			if d.typ == "exists" {
				return expectation{}
			}
			return expectation{}
		}
		cur = next
	}
	switch d.typ {
	case "value", "pattern":
		if cur.fixed != nil || cur.pattern != nil {
			return fromValue(cur, nil)
		}
	case "exists":
		if cur.min >= 1 {
			return expectation{kind: 'e', exists: true}
		}
		if cur.max == 0 {
			return expectation{kind: 'e', exists: false}
		}
	case "type":
		var ts []string
		for _, t := range cur.types {
			ts = append(ts, t.code)
		}
		if len(ts) > 0 {
			return expectation{kind: 't', types: ts}
		}
	case "profile":
		var ps []string
		for _, t := range cur.types {
			ps = append(ps, t.profiles...)
		}
		if len(ps) > 0 {
			return expectation{kind: 'r', profiles: ps}
		}
	}
	return expectation{}
}

// fromValue takes the expected value from a fixed or pattern value,
// navigating into it by the remaining steps.
func fromValue(e *elemPlan, rest []pathStep) expectation {
	kind, val := byte('p'), e.pattern
	if e.fixed != nil {
		kind, val = 'f', e.fixed
	}
	if len(rest) > 0 {
		vals := navigate(val, rest)
		if len(vals) == 0 {
			return expectation{}
		}
		val = vals[0]
	}
	return expectation{kind: kind, val: val}
}

// extURL is the url an extension slice stands for: its fixed url child
// or its type profile.
func extURL(s *elemPlan) string {
	for _, c := range s.children {
		if c.name == "url" {
			if u, ok := c.fixed.(string); ok {
				return u
			}
		}
	}
	for _, t := range s.types {
		if len(t.profiles) > 0 {
			return t.profiles[0]
		}
	}
	return ""
}

// slice assigns the items of a sliced element to slices and checks the
// slicing rules and the slices' cardinality and content.
func (w *walker) slice(rc *resCtx, c *elemPlan, items []gathered, l *loc) {
	sp := c.slicing
	if sp.unsupported != "" {
		if len(items) > 0 {
			w.issue("information", "not-supported", child(l, c.name, -1), "slicing", c.profile, sp.unsupported+"; slices not checked")
		}
		return
	}
	counts := make([]int, len(sp.slices))
	prev, unmatchedSeen := -1, false
	for _, it := range items {
		si := -1
		for i, s := range sp.slices {
			if w.matches(rc, sp, s, it) {
				si = i
				break
			}
		}
		if si < 0 {
			switch sp.rules {
			case "closed":
				w.issue("error", "structure", it.l, "slicing", c.profile, fmt.Sprintf("the item matches none of the slices of %s, and the slicing is closed", c.name))
			case "openAtEnd":
				unmatchedSeen = true
			}
			continue
		}
		if unmatchedSeen {
			w.issue("error", "structure", it.l, "slicing", c.profile, fmt.Sprintf("slice %s follows an item that matches no slice; unmatched items must come at the end (openAtEnd)", sp.slices[si].elem.sliceName))
		}
		if sp.ordered && si < prev {
			w.issue("error", "structure", it.l, "slicing", c.profile, fmt.Sprintf("slice %s is out of order (the slicing is ordered)", sp.slices[si].elem.sliceName))
		}
		prev = max(prev, si)
		counts[si]++
		s := sp.slices[si].elem
		t := it.t
		for _, st := range s.types {
			if it.t != nil && st.code == it.t.code {
				t = st
				break
			}
		}
		if t == it.t && len(s.types) == 1 {
			t = s.types[0]
		}
		w.item(rc, s, t, it.val, it.sib, it.l)
	}
	for i, s := range sp.slices {
		e := s.elem
		if counts[i] < e.min || (e.max >= 0 && counts[i] > e.max) {
			w.cardinality(e, counts[i], l)
		}
	}
}

// matches reports whether an item belongs to a slice.
func (w *walker) matches(rc *resCtx, sp *slicingPlan, s *slicePlan, it gathered) bool {
	for i, d := range sp.discs {
		ex := s.expect[i]
		if ex.kind == 0 {
			continue
		}
		var vals []any
		if len(d.steps) == 1 && d.steps[0].this {
			vals = []any{it.val}
		} else {
			vals = navigate(it.val, d.steps)
		}
		switch ex.kind {
		case 'f', 'p':
			ok := false
			for _, v := range vals {
				if (ex.kind == 'f' && equalJSON(v, ex.val)) || (ex.kind == 'p' && containsJSON(v, ex.val)) {
					ok = true
					break
				}
			}
			if !ok {
				return false
			}
		case 'e':
			if (len(vals) > 0) != ex.exists {
				return false
			}
		case 't':
			typ := ""
			if len(d.steps) == 1 && d.steps[0].this {
				if it.t != nil {
					typ = it.t.code
				}
				if m, ok := it.val.(map[string]any); ok {
					if rt, ok := m["resourceType"].(string); ok {
						typ = rt
					}
				}
			} else if len(vals) > 0 {
				if m, ok := vals[0].(map[string]any); ok {
					typ, _ = m["resourceType"].(string)
				}
			}
			if !slices.Contains(ex.types, typ) {
				return false
			}
		case 'r':
			ok := false
			for _, v := range vals {
				for _, p := range ex.profiles {
					if w.conforms(rc, p, v) {
						ok = true
					}
				}
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// conforms validates val against a profile without keeping the issues.
func (w *walker) conforms(rc *resCtx, url string, val any) bool {
	pp := w.v.profile(url)
	if pp == nil {
		return false
	}
	n := len(w.issues)
	r := rc
	if m, ok := val.(map[string]any); ok {
		if rt, _ := m["resourceType"].(string); rt != "" {
			r = &resCtx{res: m, rt: rt, bundle: rc.bundle}
			if rc.rt == "Bundle" {
				r.bundle = rc
			}
		}
	}
	w.speculative++
	w.item(r, pp.root, nil, val, nil, &loc{name: pp.sd.Type, index: -1})
	w.speculative--
	ok := true
	for _, is := range w.issues[n:] {
		if is.Severity == "error" {
			ok = false
		}
	}
	w.issues = w.issues[:n]
	return ok
}
