package httpserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// CORS headers. A browser app (a SMART app, a clinic web app) sends these
// request headers and must be able to read these response headers.
var (
	corsAllowMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
	corsAllowHeaders = strings.Join([]string{
		"Authorization", "Content-Type", "Content-Encoding", "Accept", "Prefer", "If-Match", "If-None-Exist",
		"If-None-Match", "If-Modified-Since", "Idempotency-Key", "X-Request-Id",
	}, ", ")
	corsExposeHeaders = strings.Join([]string{
		"Location", "ETag", "Content-Location", "Last-Modified", "X-Request-Id", "Retry-After", "WWW-Authenticate",
		"Idempotent-Replayed",
	}, ", ")
)

// corsMaxAge is how long (seconds) a browser may cache a preflight answer.
const corsMaxAge = "600"

// Origins is the set of origins whose browser apps may call Kiln: each a
// serialized origin (scheme://host[:port]), or "*" for any.
type Origins struct {
	any  bool
	list map[string]bool
}

// ParseOrigins reads a comma- or space-separated list of origins. "*"
// allows any origin, but then never with credentials (the CORS protocol
// forbids it, and a wildcard must not let every site ride on a user's
// cookies); listed origins are allowed with credentials.
func ParseOrigins(s string) (Origins, error) {
	o := Origins{list: map[string]bool{}}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "*" {
			o.any = true
			continue
		}
		u, err := url.Parse(f)
		if !isASCII(f) {
			return Origins{}, fmt.Errorf("CORS origin %q: write an internationalized host name in its ASCII (punycode) form, as browsers send it", f)
		}
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Origins{}, fmt.Errorf("CORS origin %q: want scheme://host[:port] without a path, or *", f)
		}
		// Browsers send the origin in lower case, without a default port.
		origin := strings.ToLower(u.Scheme + "://" + u.Host)
		origin = strings.TrimSuffix(origin, map[string]string{"https": ":443", "http": ":80"}[u.Scheme])
		o.list[origin] = true
	}
	return o, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// None reports whether no origin is allowed.
func (o Origins) None() bool { return !o.any && len(o.list) == 0 }

// allows reports whether origin may call, and whether with credentials.
func (o Origins) allows(origin string) (ok, credentials bool) {
	if o.list[origin] {
		return true, true
	}
	return o.any, false
}

// cors answers preflight requests before anything else runs (they carry
// no token, so authentication must not see them), and lets allowed
// origins read the answers of their actual requests. refuse writes the
// 403 of a preflight from an origin that is not allowed.
func cors(next http.Handler, origins Origins, refuse func(w http.ResponseWriter, r *http.Request, status int, code, message string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		// The answer depends on Origin even when it is absent or refused:
		// a shared cache must not hand one origin's answer to another.
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != ""
		ok, credentials := false, false
		if origin != "" {
			ok, credentials = origins.allows(origin)
		}
		if ok {
			if credentials {
				h.Set("Access-Control-Allow-Origin", origin)
				h.Set("Access-Control-Allow-Credentials", "true")
			} else {
				h.Set("Access-Control-Allow-Origin", "*")
			}
		}
		if !preflight {
			if ok {
				h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
			}
			next.ServeHTTP(w, r)
			return
		}
		if !ok {
			refuse(w, r, http.StatusForbidden, "forbidden", "cross-origin requests from this origin are not allowed")
			return
		}
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
	})
}
