package httpserver

import (
	"net/http"
	"strings"
)

// trimTrailingSlash makes a trailing slash mean the same as none:
// "/fhir/" is the FHIR base and "/fhir/Patient/" the Patient type, as
// clients expect (fhir-kit-client posts Bundles to base + "/"). One slash
// is dropped, so "/fhir/Patient//" still names nothing. A redirect would
// not do: clients do not repeat a POST body after a 301.
func trimTrailingSlash(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			u := *r.URL
			u.Path = p[:len(p)-1]
			if u.RawPath != "" {
				u.RawPath = strings.TrimSuffix(u.RawPath, "/")
			}
			r2 := *r
			r2.URL = &u
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}

// headAsGet serves HEAD as GET on every route (RFC 9110 §9.3.2: the same
// answer without its content). The server discards the body of a HEAD
// response by itself: net/http's ResponseWriter knows the request was a
// HEAD whatever the handlers are told. Content-Length is sent where the
// handler sets it (every FHIR answer) or the body fits net/http's buffer.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			r2 := *r
			r2.Method = http.MethodGet
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}
