package legacyapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// The OpenAPI 3.1 document of the platform endpoints (GET /openapi.json,
// public). Bodies are the JSON Schema files of schemas/, as they are
// used to check requests; scopes are the bearer scheme's security
// requirements. TestOpenAPIMatchesRoutes keeps it in step with Routes.

// errorStatuses describes the error answers an operation may give.
var errorText = map[string]string{
	"400": "Malformed request: bad JSON, or the body fails its schema (details lists each field's problem).",
	"401": "No valid bearer token.",
	"403": "The token's scopes (or role) do not allow this.",
	"404": "No such patient.",
	"409": "Conflict: a request with this Idempotency-Key is still in progress (Retry-After), or no free id was found.",
	"413": "The body is too large.",
	"415": "The body is not application/json.",
	"422": "The Idempotency-Key was used with another body, or the FHIR Patient fails the national profile.",
	"429": "Too many attempts; retry after Retry-After seconds.",
	"501": "Erasure is not available on this server.",
}

type operation struct {
	summary, description string
	scopes               []string // nil: public
	roles                []string
	request              string         // schema name of the body, "" for none
	idempotent           bool           // takes Idempotency-Key
	ok                   string         // success status
	okSchemas            []string       // its body (oneOf when several)
	okHeaders            map[string]any // headers of the success answer
	errors               []string
}

// operations describes every platform route, by "METHOD path".
var operations = map[string]operation{
	"POST /auth/login": {
		summary:     "Log in with e-mail and password",
		description: "Returns an access token (RS256 JWT, one hour) with the user's scopes and role, and a refresh token. Unknown e-mails and wrong passwords get the same 401.",
		request:     schemaLoginRequest, ok: "200", okSchemas: []string{schemaLoginResponse},
		errors: []string{"400", "401", "429"},
	},
	"POST /patients": {
		summary: "Register a patient",
		description: "Creates the FHIR Patient PT-<n> (national Patient profile, platform identifier, name, telecom, birthDate, address.text, active). " +
			"With an Idempotency-Key, a retry with the same key and body (per caller, for 24 hours) returns the first answer (Idempotent-Replayed: true) and creates nothing; the same key with another body is a 422.",
		scopes: []string{"patients:write"}, request: schemaPatientCreate, idempotent: true,
		ok: "201", okSchemas: []string{schemaPatientCreated},
		okHeaders: map[string]any{"Location": map[string]any{"description": "/patients/{patient_id}", "schema": map[string]any{"type": "string"}}},
		errors:    []string{"400", "401", "403", "409", "413", "415", "422"},
	},
	"GET /patients/{id}": {
		summary: "A patient's clinical summary",
		description: "Built from the FHIR Patient, its Conditions (medical_history) and its latest fitness-for-work Observation (compliance_status). " +
			"For an erased patient: only patient_id, status \"anonymized\" and anonymized_at.",
		scopes: []string{"patients:read"}, ok: "200", okSchemas: []string{schemaPatientSummary, schemaPatientErased},
		errors: []string{"401", "403", "404"},
	},
	"DELETE /patients/{id}": {
		summary: "Erase a patient (right to erasure)",
		description: "Anonymizes the patient's data: the Patient and its history lose every identifying element, references to it are scrubbed, clinical data are kept for statistics. " +
			"Needs patients:write and the role admin or privacy_officer. Idempotent: a second call answers the same.",
		scopes: []string{"patients:write"}, roles: []string{"admin", "privacy_officer"},
		ok: "200", okSchemas: []string{schemaPatientErased},
		errors: []string{"401", "403", "404", "501"},
	},
	"GET /openapi.json": {
		summary: "This document", ok: "200",
	},
}

func opKey(method, path string) string { return method + " " + path }

// openAPIDoc is the rendered document of one API, built on first use.
type openAPIDoc struct {
	once sync.Once
	doc  []byte
}

func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	a.openapi.once.Do(func() { a.openapi.doc, _ = json.MarshalIndent(a.OpenAPI(), "", "  ") })
	writeRaw(w, http.StatusOK, a.openapi.doc, "")
}

// OpenAPI returns the OpenAPI 3.1 document of the API's routes.
func (a *API) OpenAPI() map[string]any {
	components := map[string]any{}
	ref := func(name string) map[string]any {
		return map[string]any{"$ref": "#/components/schemas/" + schemaTitle(a.schemas.docs[name])}
	}
	for _, doc := range a.schemas.docs {
		s := maps.Clone(doc)
		delete(s, "$schema")
		delete(s, "$id")
		components[schemaTitle(doc)] = s
	}
	errResp := func(code string) map[string]any {
		return map[string]any{"description": errorText[code], "content": map[string]any{"application/json": map[string]any{"schema": ref(schemaError)}}}
	}
	paths := map[string]any{}
	for _, rt := range a.Routes() {
		op, ok := operations[opKey(rt.Method, rt.Path)]
		o := map[string]any{"operationId": operationID(rt.Method, rt.Path)}
		if !ok {
			o["x-undocumented"] = true
		}
		o["summary"] = op.summary
		if op.description != "" {
			o["description"] = op.description
		}
		if op.scopes == nil {
			o["security"] = []any{}
		} else {
			o["security"] = []any{map[string]any{"bearer": op.scopes}}
		}
		if op.roles != nil {
			o["x-kiln-roles"] = op.roles
		}
		var params []any
		if strings.Contains(rt.Path, "{id}") {
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
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref(op.request)}}}
		}
		okResp := map[string]any{"description": "Success."}
		switch len(op.okSchemas) {
		case 0:
			okResp["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
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
		for _, code := range op.errors {
			responses[code] = errResp(code)
		}
		o["responses"] = responses
		item, _ := paths[rt.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.Path] = item
		}
		item[strings.ToLower(rt.Method)] = o
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Kiln platform API",
			"version":     "1",
			"description": "The platform's JSON endpoints, thin adapters over the FHIR R4 API at /fhir (the same store; a patient's id is the same in both). Errors have one shape: {\"error\": {\"code\", \"message\", \"details\": [{\"field\", \"problem\"}]}}.",
		},
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"paths":             paths,
		"components": map[string]any{
			"schemas": components,
			"securitySchemes": map[string]any{"bearer": map[string]any{
				"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
				"description": "An access token from POST /auth/login or POST /auth/token; the security requirements list the scopes each operation needs.",
			}},
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
	r := strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_")
	return strings.ToLower(method) + r.Replace(path)
}
