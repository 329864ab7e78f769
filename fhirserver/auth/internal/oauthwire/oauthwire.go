// Package oauthwire is the HTTP vocabulary of the issuer's OAuth
// endpoints: the form body (one value per parameter), the client
// credentials and bearer token a request carries, the RFC 6749 §5.2
// error body, the RFC 6750 challenges and Retry-After.
package oauthwire

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Error answers with the RFC 6749 §5.2 error body (no-store).
func Error(w http.ResponseWriter, status int, code, description string) {
	NoStore(w)
	WriteJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// InvalidClient answers a failed client authentication: 401 with the
// RFC 6749 §5.2 body, and a Basic challenge only when the client used the
// Basic scheme (§5.2: the challenge matches the scheme used). A client
// authenticating in the body gets no challenge, which clients such as
// openid-client would otherwise report instead of the body.
func InvalidClient(w http.ResponseWriter, r *http.Request, description string) {
	if UsedScheme(r, "Basic") {
		w.Header().Set("WWW-Authenticate", `Basic realm="kiln"`)
	}
	Error(w, http.StatusUnauthorized, "invalid_client", description)
}

// InvalidToken answers a bad bearer token at an OAuth endpoint (RFC 6750
// §3), with the RFC 6749 body.
func InvalidToken(w http.ResponseWriter, reason string) {
	w.Header().Set("WWW-Authenticate", TokenChallenge(reason))
	Error(w, http.StatusUnauthorized, "invalid_token", reason)
}

// NoStore forbids caching the answer (RFC 6749 §5.1).
func NoStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// maxFormBytes bounds a form body, decoded.
const maxFormBytes = 64 << 10

// singleParams are the OAuth parameters a request may carry at most once
// (RFC 6749 §3.1, §3.2; RFC 7009 and 7662 take the same rule): a second
// value would leave it to chance which one is checked.
var singleParams = []string{"grant_type", "scope", "refresh_token", "client_id", "client_secret",
	"client_assertion", "client_assertion_type", "token", "token_type_hint"}

// ParseForm reads the form body of an OAuth endpoint into r.PostForm,
// answering (and reporting false) when it cannot: a media type other than
// application/x-www-form-urlencoded (compared case-insensitively, with
// any parameters), a body over 64 KiB decoded (413), one that could not
// be read (a broken gzip encoding), a malformed form, or a parameter
// repeated. An empty form is a form: the endpoint says what it lacks.
func ParseForm(w http.ResponseWriter, r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		Error(w, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		Error(w, http.StatusRequestEntityTooLarge, "invalid_request", "the body is too large (at most 64 KiB)")
		return false
	case err != nil:
		Error(w, http.StatusBadRequest, "invalid_request", "the body could not be read")
		return false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		Error(w, http.StatusBadRequest, "invalid_request", "the body is not a valid application/x-www-form-urlencoded form")
		return false
	}
	for _, name := range singleParams {
		if len(form[name]) > 1 {
			Error(w, http.StatusBadRequest, "invalid_request", "the parameter "+name+" is repeated")
			return false
		}
	}
	r.PostForm = form
	return true
}

// RefreshByClient reports whether a refresh_token request names a client:
// by its credentials, or by a client_id (Kiln's clients are all
// confidential, so one that names itself must authenticate, RFC 6749 §6).
// A Basic header with an empty id and secret names nobody: it is what
// golang.org/x/oauth2 sends for a configuration without a client, as a
// user refreshing a login's tokens has.
func RefreshByClient(r *http.Request) bool {
	if id, secret, ok := r.BasicAuth(); ok && id == "" && secret == "" {
		return r.PostForm.Get("client_id") != "" || r.PostForm.Get("client_secret") != "" || r.PostForm.Get("client_assertion") != ""
	}
	return ClientCredentials(r) || r.PostForm.Get("client_id") != ""
}

// JWTBearer is the client_assertion_type of private_key_jwt (RFC 7523).
const JWTBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// ClientCredentials reports whether the request carries client
// credentials (a client_id alone authenticates nothing).
func ClientCredentials(r *http.Request) bool {
	return UsedScheme(r, "Basic") || r.PostForm.Get("client_secret") != "" || r.PostForm.Get("client_assertion") != ""
}

// Bearer is the request's bearer token, if its Authorization has one.
func Bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// UsedScheme reports whether the request's Authorization names scheme
// (Basic, Bearer), whatever follows.
func UsedScheme(r *http.Request, scheme string) bool {
	s, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(s, scheme)
}

// TokenChallenge is the WWW-Authenticate of a refused bearer token
// (RFC 6750 §3.1).
func TokenChallenge(reason string) string {
	return `Bearer realm="kiln", error="invalid_token", error_description="` + strings.ReplaceAll(reason, `"`, "'") + `"`
}

// TooMany answers a rate-limited request with the RFC 6749 body: RFC
// 6749 has no code for a rate limit, so the 429 says
// temporarily_unavailable, with Retry-After.
func TooMany(w http.ResponseWriter, wait time.Duration) {
	SetRetryAfter(w, wait)
	Error(w, http.StatusTooManyRequests, "temporarily_unavailable", "too many requests; retry later")
}

// SetRetryAfter sets Retry-After to wait in whole seconds, at least 1.
func SetRetryAfter(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
}
