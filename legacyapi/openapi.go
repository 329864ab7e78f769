package legacyapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The OpenAPI 3.1 document of the platform endpoints (GET /openapi.json,
// public; `kiln openapi` prints it without a server). Bodies are the JSON
// Schema files of schemas/, as they are used to check requests; scopes are
// the bearer scheme's security requirements. The document describes the
// routes of API.Routes and those of auth.Service.Routes outside /fhir
// (/auth/token… and the discovery documents): TestOpenAPIMatchesRoutes
// keeps it in step with both, and cmd/kiln's TestOpenAPIMatchesMux with
// the server's router.

// errorText describes the platform error answers (the Error body) an
// operation may give; an operation may say more in its own words.
var errorText = map[string]string{
	"400": "Malformed request: bad JSON, or the body fails its schema (details lists each field's problem).",
	"401": "No valid bearer token (WWW-Authenticate: Bearer).",
	"403": "The token's scopes (or role) do not allow this.",
	"404": "No such patient.",
	"409": "Conflict: a request with this Idempotency-Key is still in progress (Retry-After), or no free id was found.",
	"413": "The body is too large.",
	"415": "The body is not application/json.",
	"422": "The Idempotency-Key was used with another body, or the FHIR Patient fails the national profile.",
	"429": "Too many requests from this address (or failed logins for this account); retry after Retry-After seconds.",
	"501": "Erasure is not available on this server.",
	"503": "The store could not be reached; retry later.",
}

// Security requirements (the schemes are in the document's components).
var (
	public = []map[string][]string{}
	// clientAuth: a client authenticating itself (RFC 6749 §2.3). Only
	// client_secret_basic is an HTTP scheme; client_secret_post and
	// private_key_jwt travel in the form, which the empty requirement
	// (no HTTP authentication) stands for.
	clientAuth = []map[string][]string{{"clientBasic": {}}, {}}
	// clientOrBearer: a client's credentials (as clientAuth) or a bearer
	// token, never both.
	clientOrBearer = []map[string][]string{{"clientBasic": {}}, {"bearer": {}}, {}}
)

func bearerScopes(scopes ...string) []map[string][]string {
	return []map[string][]string{{"bearer": append([]string{}, scopes...)}}
}

type operation struct {
	tag                  string
	summary, description string
	security             []map[string][]string // nil: public
	roles                []string
	request              string         // schema name of the body, "" for none
	form                 bool           // the body is application/x-www-form-urlencoded
	idempotent           bool           // takes Idempotency-Key
	ok                   string         // success status
	okText               string         // its description ("Success." when empty)
	okSchemas            []string       // its body (oneOf when several; none: no body)
	okHeaders            map[string]any // headers of the success answer
	errors               map[string]string
	oauthErrors          map[string]string // answers with the RFC 6749 body
}

const (
	tagAuth      = "Authentication"
	tagOAuth     = "OAuth 2.0"
	tagPatients  = "Patients"
	tagDiscovery = "Discovery"
	tagWorkforce = "Workforce"
)

var tags = []any{
	map[string]any{"name": tagAuth, "description": "Users log in with e-mail and password and get a bearer token (and a refresh token)."},
	map[string]any{"name": tagOAuth, "description": "Machine clients get tokens with their credentials (RFC 6749 client_credentials); tokens are refreshed, revoked (RFC 7009) and introspected (RFC 7662). Errors have the RFC 6749 body {\"error\", \"error_description\"}."},
	map[string]any{"name": tagPatients, "description": "The platform's patient endpoints, over the FHIR Patient of /fhir (the same id, PT-<n>)."},
	map[string]any{"name": tagWorkforce, "description": "Workforce medical compliance (oil and gas), in the isolated workforce partition, also served as FHIR at /workforce/fhir. Needs the workforce:read or workforce:write scope; clinical scopes and the admin role do not reach it."},
	map[string]any{"name": tagDiscovery, "description": "Documents that describe the server: its OAuth metadata, its signing keys and this document."},
}

// rateLimited and oauthRateLimited: the /auth endpoints' per-address
// limit answers 429 before the request is read, in the endpoint's error
// shape. oauthTooLarge and oauthEncoding: the OAuth endpoints' body
// limit, and the content codings the server decodes.
const (
	rateLimited      = "Too many requests from this address; retry after Retry-After seconds."
	oauthRateLimited = "temporarily_unavailable: too many requests from this address; retry after Retry-After seconds."
	oauthTooLarge    = "invalid_request: the form is larger than 64 KiB (decoded, when sent gzip-encoded)."
	oauthEncoding    = "invalid_request: the body has a Content-Encoding other than gzip (or gzip twice); Accept-Encoding names what is accepted."
)

// operations describes every platform route, by "METHOD path".
var operations = map[string]operation{
	"POST /auth/login": {
		tag:         tagAuth,
		summary:     "Log in with e-mail and password",
		description: "Returns an access token (RS256 JWT, one hour) with the user's scopes and role, and a refresh token (for POST /auth/token, grant_type=refresh_token). Unknown e-mails, wrong passwords and disabled accounts get the same 401 after the same work. Failed logins are throttled per account and per address.",
		security:    public,
		request:     schemaLoginRequest, ok: "200", okSchemas: []string{schemaLoginResponse},
		errors: map[string]string{"400": "", "401": "Wrong e-mail or password (code invalid_credentials).", "413": "", "415": "", "429": "", "503": ""},
	},
	"POST /auth/logout": {
		tag:         tagAuth,
		summary:     "Log out: revoke the presented access token",
		description: "Revokes the bearer token of the request until it expires; later requests with it get 401. To end a refresh token too, revoke it at POST /auth/revoke.",
		security:    bearerScopes(),
		ok:          "200", okSchemas: []string{schemaLogoutResponse},
		errors: map[string]string{"401": "", "429": rateLimited, "503": "The revocation could not be stored; retry later."},
	},
	"POST /auth/token": {
		tag:     tagOAuth,
		summary: "Get a token: client credentials or a refresh token",
		description: "grant_type=client_credentials: a machine client authenticates with exactly one method, client_secret_basic (HTTP Basic with the form-urlencoded client id and secret, RFC 6749 §2.3.1), client_secret_post or private_key_jwt (RFC 7523), and gets a one-hour access token with those of the scopes it asked for that it holds (invalid_scope only when it holds none of them or names one that does not exist; the scope of the answer says what it got) or, without scope, every scope it holds. " +
			"grant_type=refresh_token: a user's refresh token from /auth/login is exchanged for a new access token and a new refresh token; the used one is spent. Refresh tokens are issued only to users: a refresh request that names a client (its credentials or a client_id) must authenticate it and then gets invalid_grant, and the refresh token is left as it was. " +
			"Users log in at POST /auth/login, not here. Answers are Cache-Control: no-store.",
		security: clientAuth,
		request:  schemaTokenRequest, form: true, ok: "200", okSchemas: []string{schemaTokenResponse},
		oauthErrors: map[string]string{
			"400": "invalid_request (not a form, no grant_type, or a parameter given twice), unsupported_grant_type, invalid_grant (the refresh token is unknown, expired, revoked or spent, or was presented by a client) or invalid_scope (none of the requested scopes is held by the client, or no such scope).",
			"401": "invalid_client: the client authentication failed, none or more than one method was used, or a body client_id differs from the Basic one. WWW-Authenticate: Basic only when the request used Basic.",
			"413": oauthTooLarge,
			"415": oauthEncoding,
			"429": oauthRateLimited,
		},
	},
	"POST /auth/revoke": {
		tag:     tagOAuth,
		summary: "Revoke a token (RFC 7009)",
		description: "Revokes an access token (until it expires) or a refresh token (with every refresh token of its family). The caller authenticates: a token issued to a client only by that client, with its credentials; a user's tokens by the same user, with a bearer token of theirs; admin (a bearer token with the admin role) any token. " +
			"An unknown, invalid or expired token is answered 200 as well (RFC 7009 §2.2).",
		security: clientOrBearer,
		request:  schemaRevokeRequest, form: true, ok: "200", okText: "Revoked, or not a valid token. No body.",
		oauthErrors: map[string]string{
			"400": "invalid_request (not a form, no token, a parameter given twice, or client credentials and a bearer token at once) or unauthorized_client (the token was not issued to the caller; it stays valid).",
			"401": "invalid_client (no authentication, or the client authentication failed; WWW-Authenticate: Basic only when Basic was used) or invalid_token (the caller's bearer token is not valid; WWW-Authenticate: Bearer).",
			"413": oauthTooLarge,
			"415": oauthEncoding,
			"429": oauthRateLimited,
			"503": "temporarily_unavailable: the revocation could not be stored; retry later.",
		},
	},
	"POST /auth/introspect": {
		tag:     tagOAuth,
		summary: "Introspect a token (RFC 7662)",
		description: "Tells whether an access token is active and, if so, its scopes, subject, client, role and lifetime. The caller authenticates as a client (client_secret_basic, client_secret_post or private_key_jwt) or with a bearer token. " +
			"Only admin, the client the token was issued to, and resource-server clients learn a token's details; for any other caller every token is {\"active\": false}. " +
			"A call whose caller authenticated does not count against the per-address rate limit (a resource server may introspect every token it receives); other calls do.",
		security: clientOrBearer,
		request:  schemaIntrospectRequest, form: true, ok: "200", okSchemas: []string{schemaIntrospection},
		oauthErrors: map[string]string{
			"400": "invalid_request: not a form, no token, a parameter given twice, or client credentials and a bearer token at once.",
			"401": "invalid_client (no authentication, or the client authentication failed; WWW-Authenticate: Basic only when Basic was used) or invalid_token (the caller's bearer token is not valid).",
			"413": oauthTooLarge,
			"415": oauthEncoding,
			"429": oauthRateLimited,
			"503": "temporarily_unavailable: the token could not be checked; retry later.",
		},
	},
	"POST /patients": {
		tag:     tagPatients,
		summary: "Register a patient",
		description: "Creates the FHIR Patient PT-<n> (national Patient profile, platform identifier, name, telecom, birthDate, address.text, active). " +
			"With an Idempotency-Key, a retry with the same key and body (per caller, for 24 hours) returns the first answer (Idempotent-Replayed: true) and creates nothing; the same key with another body is a 422.",
		security: bearerScopes("patients:write"), request: schemaPatientCreate, idempotent: true,
		ok: "201", okSchemas: []string{schemaPatientCreated},
		okHeaders: map[string]any{"Location": map[string]any{"description": "/patients/{patient_id}", "schema": map[string]any{"type": "string"}}},
		errors:    map[string]string{"400": "", "401": "", "403": "", "409": "", "413": "", "415": "", "422": ""},
	},
	"GET /patients/{id}": {
		tag:     tagPatients,
		summary: "A patient's clinical summary",
		description: "Built from the FHIR Patient, its Conditions (medical_history) and its latest fitness-for-work Observation (compliance_status). " +
			"For an erased patient: only patient_id, status \"anonymized\" and anonymized_at.",
		security: bearerScopes("patients:read"), ok: "200", okSchemas: []string{schemaPatientSummary, schemaPatientErased},
		errors: map[string]string{"401": "", "403": "", "404": ""},
	},
	"DELETE /patients/{id}": {
		tag:     tagPatients,
		summary: "Erase a patient (right to erasure)",
		description: "Anonymizes the patient's data: the Patient and its history lose every identifying element, references to it are scrubbed, clinical data are kept for statistics. " +
			"Needs patients:write and the role admin or privacy_officer. Idempotent: a second call answers the same.",
		security: bearerScopes("patients:write"), roles: []string{"admin", "privacy_officer"},
		ok: "200", okSchemas: []string{schemaPatientErased},
		errors: map[string]string{"401": "", "403": "", "404": "", "501": ""},
	},
	"POST /workforce": {
		tag:     tagWorkforce,
		summary: "Register a worker",
		description: "Creates the worker's FHIR Patient (national WorkforcePatient profile) with a random id, the employee_id as its identifier, and the employer's Organization (one per company). " +
			"The same employee_id twice is a 409, also when the requests run at once. Idempotency-Key works as on POST /patients.",
		security: bearerScopes("workforce:write"), request: schemaWorkerCreate, idempotent: true,
		ok: "201", okSchemas: []string{schemaWorkerRegistered},
		okHeaders: map[string]any{"Location": map[string]any{"description": "/workforce/{employee_id}", "schema": map[string]any{"type": "string"}}},
		errors: map[string]string{"400": "Malformed request: bad JSON, an unknown field, or a field that fails its schema (an employee_id not of the form EMP-<digits>…); details names each field.",
			"401": "", "403": "",
			"409": "The employee_id is already registered (or being registered by a request still running), or a request with this Idempotency-Key is still in progress (Retry-After).",
			"413": "", "415": "", "422": "The Idempotency-Key was used with another body, or the FHIR resources fail the national profiles."},
	},
	"POST /workforce/{id}/screening": {
		tag:         tagWorkforce,
		summary:     "Record a medical screening",
		description: "Stores a FitnessForWorkObservation (outcome, effective = screening_date, performer = provider_name, a valid-until component = expiry_date) and one WorkforceCertification DocumentReference per certification, valid from screening_date through expiry_date.",
		security:    bearerScopes("workforce:write"), request: schemaScreeningCreate,
		ok: "201", okSchemas: []string{schemaScreeningRecorded},
		errors: map[string]string{"400": "Malformed request: bad JSON, an unknown field, a medical_status that is not one of the four outcomes (the message lists them), fit-with-restrictions without restrictions (or restrictions with another outcome), an invalid date, a screening_date in the future, an expiry_date before the screening_date, more than 100 certifications or a name over 200 characters; details names the field.",
			"401": "", "403": "", "404": "No worker with this employee_id.", "413": "", "415": "",
			"422": "The FHIR resources fail the national profiles."},
	},
	"GET /workforce/{id}/compliance": {
		tag:         tagWorkforce,
		summary:     "A worker's compliance, computed now",
		description: "Computed at every request from the stored screenings: status from the latest screening, certifications_valid, next_screening_due and compliance_score = ⌊50·F + 30·C + 20·T⌋ (see the README). No score is stored.",
		security:    bearerScopes("workforce:read"), ok: "200", okSchemas: []string{schemaWorkerCompliance},
		errors: map[string]string{"401": "", "403": "", "404": "No worker with this employee_id.",
			"422": "too_many_records: the worker has more than 10,000 screenings or certifications."},
	},
	"GET /openapi.json": {
		tag: tagDiscovery, summary: "This document", security: public, ok: "200",
	},
	"GET /.well-known/openid-configuration": {
		tag:         tagDiscovery,
		summary:     "OAuth 2.0 authorization server metadata",
		description: "The issuer, its endpoints, the grant types and client authentication methods the token endpoint accepts, and the scopes (OpenID Connect Discovery 1.0; RFC 8414).",
		security:    public, ok: "200", okSchemas: []string{schemaOpenIDConfiguration},
	},
	"GET /.well-known/jwks.json": {
		tag:         tagDiscovery,
		summary:     "The keys that verify Kiln's tokens",
		description: "The public signing keys (JWK Set): a token's kid names its key. Cacheable for 5 minutes.",
		security:    public, ok: "200", okSchemas: []string{schemaJWKS},
		errors: map[string]string{"503": "The key set could not be read; retry later."},
	},
}

func opKey(method, path string) string { return method + " " + path }

// endpoint is a route's method and path, what the document describes.
type endpoint struct{ method, path string }

// endpoints are the routes the API's document describes: its own and,
// with Config.Auth, the issuer's outside the FHIR bases (the SMART
// configuration under a base belongs to that FHIR API).
func (a *API) endpoints() []endpoint {
	var out []endpoint
	for _, rt := range a.Routes() {
		out = append(out, endpoint{rt.Method, rt.Path})
	}
	if a.cfg.Auth != nil {
		a.cfg.Auth.Routes(func(method, path string, _ http.Handler) {
			if !a.cfg.Auth.IsFHIRPath(path) {
				out = append(out, endpoint{method, path})
			}
		})
	}
	return out
}

// openAPIDoc is the rendered document of one API, built on first use.
type openAPIDoc struct {
	once sync.Once
	doc  []byte
}

func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	a.openapi.once.Do(func() { a.openapi.doc, _ = json.MarshalIndent(a.OpenAPI(), "", "  ") })
	writeRaw(w, http.StatusOK, a.openapi.doc, "")
}

// OpenAPI returns the OpenAPI 3.1 document of the API's routes (and the
// issuer's, with Config.Auth), for a server at Config.BaseURL.
func (a *API) OpenAPI() map[string]any {
	return document(a.cfg.BaseURL, a.schemas, a.endpoints())
}

// Document returns the OpenAPI 3.1 document that `kiln serve` serves at
// /openapi.json for a server at baseURL: every platform endpoint, the
// issuer's included. No server or store is needed.
func Document(baseURL string) (map[string]any, error) {
	sch, err := loadSchemas(time.Now)
	if err != nil {
		return nil, err
	}
	var all []endpoint
	for _, key := range slices.Sorted(maps.Keys(operations)) {
		method, path, _ := strings.Cut(key, " ")
		all = append(all, endpoint{method, path})
	}
	return document(baseURL, sch, all), nil
}

func document(baseURL string, sch *schemas, eps []endpoint) map[string]any {
	components := map[string]any{}
	ref := func(name string) map[string]any {
		return map[string]any{"$ref": "#/components/schemas/" + schemaTitle(sch.docs[name])}
	}
	used := map[string]bool{}
	for _, ep := range eps {
		op := operations[opKey(ep.method, ep.path)]
		for _, s := range append(slices.Clone(op.okSchemas), op.request) {
			used[s] = s != ""
		}
		if len(op.errors) > 0 {
			used[schemaError] = true
		}
		if len(op.oauthErrors) > 0 {
			used[schemaOAuthError] = true
		}
	}
	for name, doc := range sch.docs {
		if !used[name] {
			continue // a document without /auth/* has no OAuth bodies
		}
		s := maps.Clone(doc)
		delete(s, "$schema")
		delete(s, "$id")
		components[schemaTitle(doc)] = s
	}
	errResp := func(schema, text string) map[string]any {
		return map[string]any{"description": text, "content": map[string]any{"application/json": map[string]any{"schema": ref(schema)}}}
	}
	paths := map[string]any{}
	usedTags := map[string]bool{}
	for _, ep := range eps {
		op, ok := operations[opKey(ep.method, ep.path)]
		o := map[string]any{"operationId": operationID(ep.method, ep.path)}
		if !ok {
			o["x-undocumented"] = true
		}
		o["summary"] = op.summary
		if op.tag != "" {
			o["tags"] = []string{op.tag}
			usedTags[op.tag] = true
		}
		if op.description != "" {
			o["description"] = op.description
		}
		o["security"] = op.security
		if op.roles != nil {
			o["x-kiln-roles"] = op.roles
		}
		var params []any
		switch {
		case strings.HasPrefix(ep.path, "/workforce/{id}"):
			params = append(params, map[string]any{"name": "id", "in": "path", "required": true,
				"description": "The worker's employee_id, EMP-<digits>.", "schema": map[string]any{"type": "string", "examples": []any{"EMP-1042"}}})
		case strings.Contains(ep.path, "{id}"):
			params = append(params, map[string]any{"name": "id", "in": "path", "required": true,
				"description": "The platform patient id, PT-<n> (the FHIR Patient's id).", "schema": map[string]any{"type": "string", "examples": []any{"PT-1"}}})
		}
		if op.idempotent {
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false,
				"description": "Makes a retry safe: the same key and body return the first answer for 24 hours.",
				"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": maxKeyLength}})
		}
		if params != nil {
			o["parameters"] = params
		}
		if op.request != "" {
			media := "application/json"
			if op.form {
				media = "application/x-www-form-urlencoded"
			}
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{media: map[string]any{"schema": ref(op.request)}}}
		}
		okResp := map[string]any{"description": "Success."}
		if op.okText != "" {
			okResp["description"] = op.okText
		}
		switch len(op.okSchemas) {
		case 0:
			if ep.path == "/openapi.json" {
				okResp["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
			}
		case 1:
			okResp["content"] = map[string]any{"application/json": map[string]any{"schema": ref(op.okSchemas[0])}}
		default:
			var one []any
			for _, s := range op.okSchemas {
				one = append(one, ref(s))
			}
			okResp["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"oneOf": one}}}
		}
		if op.okHeaders != nil {
			okResp["headers"] = op.okHeaders
		}
		responses := map[string]any{op.ok: okResp}
		for code, text := range op.errors {
			if text == "" {
				text = errorText[code]
			}
			responses[code] = errResp(schemaError, text)
		}
		for code, text := range op.oauthErrors {
			responses[code] = errResp(schemaOAuthError, text)
		}
		o["responses"] = responses
		item, _ := paths[ep.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[ep.path] = item
		}
		item[strings.ToLower(ep.method)] = o
	}
	var docTags []any
	for _, t := range tags {
		if usedTags[t.(map[string]any)["name"].(string)] {
			docTags = append(docTags, t)
		}
	}
	server := map[string]any{"url": baseURL, "description": "This server (its configured base URL)."}
	if baseURL == "" {
		server = map[string]any{"url": "/", "description": "The server that served this document."}
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "Kiln platform API",
			"version": "1",
			"description": "The platform's JSON endpoints, thin adapters over the FHIR R4 API at /fhir (the same store; a patient's id is the same in both), and the OAuth 2.0 endpoints of Kiln's token issuer. " +
				"The platform endpoints answer errors with {\"error\": {\"code\", \"message\", \"details\": [{\"field\", \"problem\"}]}}; the OAuth endpoints with the RFC 6749 body {\"error\", \"error_description\"}. " +
				"The FHIR API is described by its CapabilityStatement (GET /fhir/metadata), not here.",
		},
		"servers":           []any{server},
		"tags":              docTags,
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"paths":             paths,
		"components": map[string]any{
			"schemas": components,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{
					"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
					"description": "An access token from POST /auth/login or POST /auth/token; the security requirements list the scopes each operation needs.",
				},
				"clientBasic": map[string]any{
					"type": "http", "scheme": "basic",
					"description": "client_secret_basic (RFC 6749 §2.3.1): the client id and secret, each form-urlencoded, joined by a colon, in Base64. The other client authentication methods (client_secret_post, private_key_jwt) travel in the form.",
				},
			},
		},
	}
}

func schemaTitle(doc map[string]any) string {
	t, _ := doc["title"].(string)
	return t
}

// operationID names an operation from its route: "POST /patients/{id}" →
// "post_patients_id".
func operationID(method, path string) string {
	r := strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_", "-", "_")
	return strings.ToLower(method) + r.Replace(path)
}
