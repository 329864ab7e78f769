// Package legacyapi serves the platform's own JSON endpoints as thin
// handlers over the FHIR service and the auth issuer (DESIGN.md).
package legacyapi

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// maxLoginBytes bounds a login body: an email and a password.
const maxLoginBytes = 8 << 10

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// loginSchemas are the schemas Login checks its body with (the same
// files the platform API and its OpenAPI document use).
var loginSchemas = sync.OnceValues(func() (*schemas, error) { return loadSchemas(time.Now) })

// Login is POST /auth/login: {"email", "password"} → the platform's token
// response (access_token, expires_in, token_type, user_role, scope, and a
// refresh_token). Wrong credentials, an unknown email and a disabled
// account all get the same 401 after the same work; a body that is not
// application/json is a 415, one that fails the login-request schema a
// 400 with the fields at fault; too many failures a 429 with Retry-After.
func Login(svc *auth.Service) http.Handler {
	return svc.Limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sch, err := loginSchemas()
		if err != nil { // the embedded schemas compile in every test run
			httpserver.WriteError(w, http.StatusInternalServerError, "internal_error", "the login schema could not be loaded")
			return
		}
		v, ok := sch.read(w, r, "login-request", maxLoginBytes)
		if !ok {
			return
		}
		m := v.(map[string]any) // the schema requires an object of two strings
		req := loginRequest{Email: m["email"].(string), Password: m["password"].(string)}
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
