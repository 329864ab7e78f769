package fhirserver

import (
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/internal/route"
)

// Route is one interaction of the FHIR RESTful API at a method and a path
// under the service's base. The REST layer mounts the table, a Bundle's
// entries are routed by it (MatchRoute), and the CapabilityStatement is
// generated from it, so that it claims only what works.
type Route struct {
	// Name says what the route runs; the REST layer and Bundles find
	// their handler of it by name.
	Name   string
	Method string
	// Path is under the base ("" is the base itself): literal segments,
	// and {type}, {id}, {vid} and {ctype}; {type} and {ctype} are resource
	// type names ([A-Z][A-Za-z]*), the others any segment but an empty
	// one.
	Path string
	// Interaction is authorized (Call.Admit) before the route runs; ""
	// for a route that authorizes itself once it knows what it touches
	// (from the body, or a second resource type).
	Interaction Interaction
	// Audited is the interaction its AuditEvent names.
	Audited Access
}

// routes lists everything the service implements, in the order a request
// is matched against them.
var routes = func() []Route {
	in := func(name string, in Interaction, method, path string) Route {
		return Route{Name: name, Interaction: in, Method: method, Path: path, Audited: Access{Interaction: in}}
	}
	// Authorized by the route itself, and audited as an interaction it
	// names.
	by := func(name string, audited Interaction, op, method, path string) Route {
		return Route{Name: name, Method: method, Path: path, Audited: Access{Interaction: audited, Operation: op}}
	}
	const get, post, put, del, patch = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch
	return []Route{
		in("capabilities", Capabilities, get, "/metadata"),
		by("bundle", Batch, "", post, ""), // batch or transaction: authorized per entry
		in("search", SearchSystem, get, ""),
		in("search", SearchSystem, post, "/_search"),
		in("history", HistorySystem, get, "/_history"),
		by("reindex", Operation, "$reindex", post, "/$reindex"),
		in("search", SearchType, get, "/{type}"),
		in("create", Create, post, "/{type}"),
		in("conditional-update", Update, put, "/{type}"),
		in("conditional-delete", Delete, del, "/{type}"),
		in("conditional-patch", Patch, patch, "/{type}"),
		in("search", SearchType, post, "/{type}/_search"),
		in("history", HistoryType, get, "/{type}/_history"),
		by("reindex", Operation, "$reindex", post, "/{type}/$reindex"),
		by("validate", Operation, "$validate", post, "/{type}/$validate"),
		by("validate", Operation, "$validate", post, "/{type}/{id}/$validate"),
		by("validate", Operation, "$validate", get, "/{type}/{id}/$validate"),
		in("read", Read, get, "/{type}/{id}"),
		in("update", Update, put, "/{type}/{id}"),
		in("delete", Delete, del, "/{type}/{id}"),
		in("patch", Patch, patch, "/{type}/{id}"),
		in("history", HistoryInstance, get, "/{type}/{id}/_history"),
		by("everything", Operation, "$everything", get, "/{type}/{id}/$everything"),
		by("everything", Operation, "$everything", post, "/{type}/{id}/$everything"),
		by("search-compartment", SearchType, "", get, "/{type}/{id}/{ctype}"),
		in("vread", VRead, get, "/{type}/{id}/_history/{vid}"),
	}
}()

// Routes is the table of the service's routes, in the order a request is
// matched against them: the first whose path and method match.
func Routes() []Route { return routes }

// table matches requests against the routes.
var table = func() *route.Table {
	methods, paths := make([]string, len(routes)), make([]string, len(routes))
	for i, rt := range routes {
		methods[i], paths[i] = rt.Method, rt.Path
	}
	return route.NewTable(methods, paths)
}()

// AllowedMethods lists the methods of the routes at a path, in the table's
// order, and HEAD wherever GET is (the server answers HEAD as GET): the
// Allow header of a 405.
func AllowedMethods(path string) string { return table.Allowed(path) }

// RouteMatch is the route a method and path name, with the path's
// segments.
type RouteMatch struct {
	// Route is the route that matched, Index its place in Routes; nil
	// when none did.
	Route *Route
	Index int
	// Allow, when no route matched but one's path did (405), lists the
	// methods that path takes.
	Allow                string
	Type, ID, VID, CType string
}

// MatchRoute finds the route of a request: the first route whose path and
// method match; else, when some route's path matches, the methods the
// first such path takes (405); else nothing (404). path is under the base:
// "" or starting with "/".
func MatchRoute(method, path string) RouteMatch {
	i, v, allow := table.Match(method, path)
	if i < 0 {
		return RouteMatch{Allow: allow}
	}
	return RouteMatch{Route: &routes[i], Index: i, Type: v.Type, ID: v.ID, VID: v.VID, CType: v.CType}
}
