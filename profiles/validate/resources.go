package validate

// Resources inside resources (contained, Bundle entries) and the
// references between them.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/profiles"
)

// resCtx is the resource a node belongs to: %resource, the container of
// a contained resource and the enclosing Bundle, for reference resolution.
type resCtx struct {
	res       map[string]any
	rt        string
	container *resCtx // the resource holding this contained one
	bundle    *resCtx // the nearest enclosing Bundle
	opts      []fhirpath.Option
	fewOpts   []fhirpath.Option
	entries   map[string]map[string]any // Bundle entries by fullUrl and Type/id
}

// root is the resource whose contained list "#id" references look in.
func (rc *resCtx) root() *resCtx {
	for rc.container != nil {
		rc = rc.container
	}
	return rc
}

// resolve finds a referenced resource among contained resources and the
// entries of the enclosing Bundle.
func (rc *resCtx) resolve(ref string) map[string]any {
	if id, ok := strings.CutPrefix(ref, "#"); ok {
		r := rc.root()
		if id == "" {
			return r.res
		}
		cs, _ := r.res["contained"].([]any)
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok && m["id"] == id {
				return m
			}
		}
		return nil
	}
	b := rc.bundle
	if rc.rt == "Bundle" && b == nil {
		b = rc
	}
	for ; b != nil; b = b.bundle {
		if r := b.entry(ref); r != nil {
			return r
		}
	}
	return nil
}

// entry finds a Bundle entry's resource by fullUrl (or its tail) or by
// Type/id, through an index built on first use.
func (rc *resCtx) entry(ref string) map[string]any {
	if rc.entries == nil {
		rc.entries = map[string]map[string]any{}
		list, _ := rc.res["entry"].([]any)
		add := func(k string, r map[string]any) {
			if _, dup := rc.entries[k]; !dup && k != "" {
				rc.entries[k] = r
			}
		}
		for _, e := range list {
			em, _ := e.(map[string]any)
			res, _ := em["resource"].(map[string]any)
			if res == nil {
				continue
			}
			full, _ := em["fullUrl"].(string)
			add(full, res)
			rt, _ := res["resourceType"].(string)
			id, _ := res["id"].(string)
			if rt != "" && id != "" {
				add(rt+"/"+id, res)
			}
		}
	}
	if r, ok := rc.entries[ref]; ok {
		return r
	}
	// a relative reference matching the tail of an absolute fullUrl
	if t := refTail(ref); t != "" {
		if r, ok := rc.entries[t]; ok {
			return r
		}
	}
	return nil
}

// refTail is "Type/id" of an absolute reference URL, or "".
func refTail(ref string) string {
	parts := strings.Split(ref, "/")
	if n := len(parts); n >= 4 && parts[n-2] == "_history" {
		parts = parts[:n-2]
	}
	if n := len(parts); n >= 3 && profiles.IsResourceType(parts[n-2]) {
		return parts[n-2] + "/" + parts[n-1]
	}
	return ""
}

// nestedCtx is the resource context of a contained resource or of a
// resource inside another (a Bundle entry, a Parameters value).
func (w *walker) nestedCtx(rc *resCtx, e *elemPlan, m map[string]any) *resCtx {
	rt, _ := m["resourceType"].(string)
	n := &resCtx{res: m, rt: rt}
	if e.name == "contained" {
		n.container = rc
		n.bundle = rc.bundle
	} else {
		n.bundle = rc.bundle
		if rc.rt == "Bundle" {
			n.bundle = rc
		}
	}
	return n
}

// maxNestedProfiles bounds the profiles a contained resource or a Bundle
// entry is walked against: each is a walk of the whole resource.
const maxNestedProfiles = 16

// nestedResource validates a contained resource or a Bundle entry against
// the base definition of its type and its known meta.profile.
func (w *walker) nestedResource(rc *resCtx, e *elemPlan, m map[string]any, l *loc) {
	rt, _ := m["resourceType"].(string)
	tp := w.v.typePlan(rt)
	if tp == nil || tp.kind != "resource" || tp.abstract {
		w.issue("error", "structure", l, "structure", e.profile, fmt.Sprintf("unknown resource type '%s'", rt))
		return
	}
	nrc := w.nestedCtx(rc, e, m)
	w.item(nrc, tp.root, nil, m, nil, l)
	if meta, ok := m["meta"].(map[string]any); ok {
		ps, _ := meta["profile"].([]any)
		seen := make(map[string]bool, len(ps))
		for _, p := range ps {
			u, _ := p.(string)
			if u == "" || seen[u] {
				continue // each profile once: a repeated URL must not repeat the walk
			}
			seen[u] = true
			if len(seen) > maxNestedProfiles {
				w.issue("error", "too-costly", l, "profile", "", fmt.Sprintf("more than %d profiles in meta.profile; the rest were not checked", maxNestedProfiles))
				break
			}
			pp := w.v.profile(u)
			if pp == nil {
				w.issue("information", "informational", l, "profile", "", "meta.profile '"+u+"' is not known; not checked")
				continue
			}
			if pp.sd.Type != rt {
				w.issue("error", "structure", l, "profile", u, "resource type '"+rt+"' does not match the profile's type '"+pp.sd.Type+"'")
				continue
			}
			w.item(nrc, pp.root, nil, m, nil, l)
		}
	}
}

// checkReference checks the type of a Reference's target against the
// allowed target profiles.
func (w *walker) checkReference(rc *resCtx, e *elemPlan, t *typeRef, m map[string]any, l *loc) {
	ref, _ := m["reference"].(string)
	typ, _ := m["type"].(string)
	if ref != "" {
		if r := rc.resolve(ref); r != nil {
			typ, _ = r["resourceType"].(string)
		} else if !strings.HasPrefix(ref, "#") && !strings.HasPrefix(ref, "urn:") {
			typ = refType(ref)
		}
	}
	if typ == "" || slices.Contains(t.targets, typ) {
		return
	}
	what := ref
	if what == "" {
		what = "type " + typ
	}
	w.issue("error", "structure", l, "reference", e.profile, fmt.Sprintf("the reference %s points to a %s; allowed targets: %s", what, typ, strings.Join(t.targets, ", ")))
}

// refType is the resource type of a literal reference "Type/id",
// "Type/id/_history/v" or an absolute URL ending so; "" when there is none.
func refType(ref string) string {
	if i := strings.IndexAny(ref, "?#"); i >= 0 {
		ref = ref[:i]
	}
	parts := strings.Split(ref, "/")
	if n := len(parts); n >= 4 && parts[n-2] == "_history" {
		parts = parts[:n-2]
	}
	if n := len(parts); n >= 2 && profiles.IsResourceType(parts[n-2]) {
		return parts[n-2]
	}
	return ""
}
