// Package httpserver holds Kiln's HTTP plumbing shared by every route: the
// middleware chain, the TLS 1.3-only listener, the self-signed development
// certificate, and graceful shutdown.
package httpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// hsts is sent on every response: the server only ever speaks TLS.
const hsts = "max-age=63072000; includeSubDomains"

type ctxKey int

const (
	requestIDKey ctxKey = iota
	routeKey
)

// RequestID returns the id of the request carried by ctx ("" if none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// LabelRoute is router middleware (mux.Router.Use) that tells the access log
// which route served the request. The log shows the route's template, never
// the path, because paths hold client-chosen ids.
func LabelRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if label, ok := r.Context().Value(routeKey).(*string); ok {
			if rt := mux.CurrentRoute(r); rt != nil {
				if tpl, err := rt.GetPathTemplate(); err == nil {
					*label = routeLabel(tpl)
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// routeLabels caches plainTemplate per route template: routes are few and
// fixed, and this runs on every request.
var routeLabels sync.Map

func routeLabel(tpl string) string {
	if l, ok := routeLabels.Load(tpl); ok {
		return l.(string)
	}
	l := plainTemplate(tpl)
	routeLabels.Store(tpl, l)
	return l
}

// plainTemplate drops the patterns from a route template:
// "/fhir/{type:[A-Z][A-Za-z]*}/{id}" → "/fhir/{type}/{id}".
func plainTemplate(tpl string) string {
	var b strings.Builder
	depth := 0
	skipping := false
	for _, c := range tpl {
		switch {
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				skipping = false
			}
		case c == ':' && depth == 1:
			skipping = true
		}
		if !skipping || c == '}' && depth == 0 {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// Options configure Chain.
type Options struct {
	Logger *slog.Logger
	// MaxBody caps every request body, encoded and decoded.
	MaxBody int64
	// CORSOrigins may call from a browser (none by default).
	CORSOrigins Origins
	// FHIRBases are the path prefixes of FHIR APIs (e.g. "/fhir"): errors
	// the chain itself answers there are OperationOutcomes. OAuthPaths are
	// the OAuth endpoints, whose clients read the RFC 6749 error body.
	// Elsewhere errors have the platform's JSON error body.
	FHIRBases, OAuthPaths []string
}

// Chain wraps h with the middleware every route gets, outermost first:
// request id, security headers, access log, CORS (preflights are answered
// here, before authentication), HEAD as GET, response compression, panic
// recovery, deadline, trailing slash, request-body decoding, body limit.
// Authentication and scope enforcement are not here: the FHIR service's
// single authorization point checks each interaction (see
// fhirserver.Authorizer), because one HTTP request (a Bundle) can hold many.
// Panics become the platform's JSON error; the FHIR API recovers its own
// (see Recover) to answer with an OperationOutcome.
func Chain(h http.Handler, o Options) http.Handler {
	h = limitBody(h, o.MaxBody)
	h = decodeBody(h, o.MaxBody, o.Error)
	h = trimTrailingSlash(h)
	h = deadline(h)
	h = Recover(o.Logger, func(w http.ResponseWriter, r *http.Request) {
		o.Error(w, r, http.StatusInternalServerError, "internal", "internal server error")
	})(h)
	h = compress(h)
	// Before compression: gzhttp leaves HEAD alone, and a HEAD must get
	// the headers its GET would (Content-Encoding included).
	h = headAsGet(h)
	h = cors(h, o.CORSOrigins, o.Error)
	h = accessLog(h, o.Logger)
	h = securityHeaders(h)
	return requestID(h)
}

// Error answers an error found outside the APIs' own handlers (by the
// chain, or by the router: no route, wrong method) in the error shape of
// the API the path belongs to.
func (o Options) Error(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	p := strings.TrimSuffix(r.URL.Path, "/") // the chain may answer before the slash is trimmed
	for _, base := range o.FHIRBases {
		if p == base || strings.HasPrefix(p, base+"/") {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.WriteHeader(status)
			_, _ = w.Write(outcome.New(status, fhirIssueCode(status), message).Resource())
			return
		}
	}
	if slices.Contains(o.OAuthPaths, p) {
		body, _ := json.Marshal(map[string]string{"error": oauthErrorCode(status), "error_description": message})
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	WriteError(w, status, code, message)
}

// oauthErrorCode is the RFC 6749 §5.2 error code of the statuses the
// chain answers.
func oauthErrorCode(status int) string {
	switch status {
	case http.StatusForbidden:
		return "access_denied"
	case http.StatusInternalServerError:
		return "server_error"
	}
	return "invalid_request"
}

// fhirIssueCode is the OperationOutcome issue code of the statuses the
// chain and the router answer.
func fhirIssueCode(status int) string {
	switch status {
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not-found"
	case http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return "not-supported"
	case http.StatusInternalServerError:
		return "exception"
	}
	return "invalid"
}

// requestTimeout bounds the work of one request, so a handler waiting on a
// busy store gives up instead of committing after its client has left.
const requestTimeout = 2 * time.Minute

func deadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			var b [16]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// validRequestID accepts a caller's id only if it is short and plain, so it
// cannot inject anything into logs or headers.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Strict-Transport-Security", hsts)
		h.Set("X-Content-Type-Options", "nosniff")
		// Responses carry health data: no cache may keep them.
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// recorder remembers the status and size of a response for the access log
// and for panic recovery.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// accessLog logs one line per request. It logs the route template, never
// the path (ids), the query string (search parameters carry names and birth
// dates), bodies, or headers (tokens).
func accessLog(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		route := "unmatched"
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), routeKey, &route)))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("request_id", RequestID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes),
			slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("proto", r.Proto),
		)
	})
}

// Recover returns middleware that turns a handler panic into a 500 written
// by internalError (unless the response had already started), and logs the
// panic with its stack.
func Recover(log *slog.Logger, internalError http.HandlerFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &recorder{ResponseWriter: w}
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				if p == http.ErrAbortHandler {
					panic(p) // the handler chose to abort the connection
				}
				log.ErrorContext(r.Context(), "panic serving request",
					"request_id", RequestID(r.Context()), "method", r.Method,
					"panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					internalError(rec, r)
				}
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

// WriteError answers a platform (non-FHIR) endpoint with the JSON error body.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	WriteErrorDetails(w, status, code, message, nil)
}

// WriteErrorDetails is WriteError with the problems found, one per field
// (e.g. each failed check of a request body); none leaves details out.
func WriteErrorDetails(w http.ResponseWriter, status int, code, message string, details []FieldProblem) {
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: code, Message: message, Details: details}})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ErrorBody is the JSON error shape of the platform's non-FHIR endpoints:
// {"error": {"code", "message", "details": [{"field", "problem"}]}}, with
// details only when there are field problems to report.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes one error of a platform endpoint.
type ErrorDetail struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details []FieldProblem `json:"details,omitempty"`
}

// FieldProblem is one problem with one field of a request: Field is its
// path in the body ("first_name", "address"; "" for the body as a whole),
// Problem says what is wrong without echoing the value.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// limitBody caps every request body. Handlers apply tighter limits of their
// own (e.g. per FHIR resource); this is the backstop for all routes.
func limitBody(next http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}
