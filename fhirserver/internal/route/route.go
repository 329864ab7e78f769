// Package route matches request paths against the FHIR API's route
// templates: literal segments, and {type}, {id}, {vid} and {ctype}; {type}
// and {ctype} take a resource type's name, the others any segment but an
// empty one. It matches as the REST layer's router does, so that a
// Bundle's entries find the route their request would.
package route

import (
	"net/http"
	"slices"
	"strings"
)

// Table is a list of routes, each a method and a path template, matched
// in order.
type Table struct {
	methods, paths []string
	allowed        map[string]string // path template → Allowed
}

// NewTable returns the table of the routes methods[i] paths[i].
func NewTable(methods, paths []string) *Table {
	t := &Table{methods: methods, paths: paths, allowed: map[string]string{}}
	for _, p := range paths {
		var allow []string
		for i := range paths {
			if paths[i] == p {
				allow = append(allow, methods[i])
			}
		}
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		t.allowed[p] = strings.Join(allow, ", ")
	}
	return t
}

// Allowed lists the methods of the routes at a path template, in the
// table's order, and HEAD wherever GET is (a server answers HEAD as GET).
func (t *Table) Allowed(path string) string { return t.allowed[path] }

// Match returns the first route whose path and method match, with the
// path's segments; else (i < 0), when some route's path matches, the
// methods the first such path takes (a 405's Allow), or "" (a 404).
func (t *Table) Match(method, path string) (i int, v Vars, allow string) {
	first := -1
	for i := range t.paths {
		var v Vars
		if !MatchPath(t.paths[i], path, &v) {
			continue
		}
		if t.methods[i] == method {
			return i, v, ""
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		return -1, Vars{}, t.allowed[t.paths[first]]
	}
	return -1, Vars{}, ""
}

// Vars are the segments a path gives a route's {type}, {id}, {vid} and
// {ctype}.
type Vars struct{ Type, ID, VID, CType string }

// MatchPath matches a path against a route's path (its template),
// segment by segment, setting v's segments. Both are under the base: ""
// or starting with "/".
func MatchPath(tpl, path string, v *Vars) bool {
	if tpl == "" || path == "" {
		return tpl == path
	}
	if path[0] != '/' {
		return false
	}
	tpl, path = tpl[1:], path[1:]
	for {
		ts, trest, tmore := strings.Cut(tpl, "/")
		ps, prest, pmore := strings.Cut(path, "/")
		switch ts {
		case "{type}", "{ctype}":
			if !IsTypeName(ps) {
				return false
			}
			if ts == "{type}" {
				v.Type = ps
			} else {
				v.CType = ps
			}
		case "{id}", "{vid}":
			if ps == "" {
				return false
			}
			if ts == "{id}" {
				v.ID = ps
			} else {
				v.VID = ps
			}
		default:
			if ts != ps {
				return false
			}
		}
		if !tmore || !pmore {
			return tmore == pmore
		}
		tpl, path = trest, prest
	}
}

// IsTypeName reports whether a path segment has the shape of a resource
// type's name ([A-Z][A-Za-z]*), as the routes' {type} takes it; whether
// it is one is checked by fhirserver.Call.Admit.
func IsTypeName(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
