// Package route matches request paths against the FHIR API's route
// templates: literal segments, and {type}, {id}, {vid} and {ctype}; {type}
// and {ctype} take a resource type's name, the others any segment but an
// empty one. It matches as the REST layer's router does, so that a
// Bundle's entries find the route their request would.
package route

import "strings"

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
