// Package legacyapi serves the platform's own JSON endpoints as thin
// handlers over the FHIR service and the auth issuer (DESIGN.md).
package legacyapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/httpserver"
)

// maxLoginBytes bounds a login body: an email and a password.
const maxLoginBytes = 8 << 10

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// Login is POST /auth/login: {"email", "password"} → the platform's token
// response (access_token, expires_in, token_type, user_role, scope, and a
// refresh_token). Wrong credentials, an unknown email and a disabled
// account all get the same 401 after the same work; a malformed body is a
// 400; too many failures a 429 with Retry-After.
func Login(svc *auth.Service) http.Handler {
	return svc.Limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxLoginBytes+1))
		if err != nil || len(body) > maxLoginBytes {
			httpserver.WriteError(w, http.StatusBadRequest, "invalid_request", "the body must be a small JSON object")
			return
		}
		var req loginRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || dec.More() {
			httpserver.WriteError(w, http.StatusBadRequest, "invalid_request", `the body must be {"email": "...", "password": "..."}`)
			return
		}
		if req.Email == "" || req.Password == "" {
			httpserver.WriteError(w, http.StatusBadRequest, "invalid_request", "email and password are required")
			return
		}
		resp, err := svc.Login(r.Context(), req.Email, req.Password, auth.ClientIP(r))
		var te *auth.ThrottledError
		switch {
		case errors.As(err, &te):
			auth.TooMany(w, te.Wait)
		case errors.Is(err, auth.ErrBadCredentials):
			httpserver.WriteError(w, http.StatusUnauthorized, "invalid_credentials", "invalid email or password")
		case err != nil:
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the login could not be checked")
		default:
			auth.WriteToken(w, resp)
		}
	}))
}
