package legacyapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// The JSON Schemas of the platform bodies: request bodies are checked
// against them, and the OpenAPI document serves them.
//
//go:embed schemas/*.json
var schemaFiles embed.FS

// schemaBase is the base of the schemas' $id (never fetched).
const schemaBase = "https://kiln.invalid/schemas/"

// Schema names (files under schemas/, without .json).
const (
	schemaPatientCreate  = "patient-create"
	schemaPatientCreated = "patient-created"
	schemaPatientSummary = "patient-summary"
	schemaPatientErased  = "patient-erased"
	schemaLoginRequest   = "login-request"
	schemaLoginResponse  = "login-response"
	schemaError          = "error"
	// The workforce endpoints.
	schemaWorkerCreate      = "workforce-worker"
	schemaWorkerRegistered  = "workforce-registered"
	schemaScreeningCreate   = "workforce-screening"
	schemaScreeningRecorded = "workforce-screening-recorded"
	schemaWorkerCompliance  = "workforce-compliance"
	// Bodies of the issuer's endpoints (fhirserver/auth), described in the
	// OpenAPI document only: those handlers read forms, not JSON.
	schemaLogoutResponse      = "logout-response"
	schemaTokenRequest        = "token-request"
	schemaTokenResponse       = "token-response"
	schemaRevokeRequest       = "revoke-request"
	schemaIntrospectRequest   = "introspect-request"
	schemaIntrospection       = "introspection"
	schemaOAuthError          = "oauth-error"
	schemaJWKS                = "jwks"
	schemaOpenIDConfiguration = "openid-configuration"
)

// schemas holds the compiled schemas and their documents.
type schemas struct {
	compiled map[string]*jsonschema.Schema
	docs     map[string]map[string]any
}

// earliestBirth is the earliest date of birth accepted.
const earliestBirth = "1900-01-01"

// loadSchemas compiles every schema file once. The format "birth-date" is
// a full date (YYYY-MM-DD, a real calendar date) from 1900-01-01 up to
// today (UTC), the date the national Patient profile's nat-pat-3 checks
// too, so that no body the schema accepts is refused by the profile.
func loadSchemas(now func() time.Time) (*schemas, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "birth-date", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := time.Parse(time.DateOnly, s)
		if err != nil || len(s) != len(time.DateOnly) {
			return errors.New("must be a date YYYY-MM-DD")
		}
		if s < earliestBirth {
			return errors.New("must not be before " + earliestBirth)
		}
		if today := now().UTC().Format(time.DateOnly); s > today {
			return errors.New("must not be in the future")
		}
		return nil
	}})
	out := &schemas{compiled: map[string]*jsonschema.Schema{}, docs: map[string]map[string]any{}}
	entries, err := fs.ReadDir(schemaFiles, "schemas")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".json")
		b, err := schemaFiles.ReadFile("schemas/" + e.Name())
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", e.Name(), err)
		}
		if err := c.AddResource(schemaBase+e.Name(), doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", e.Name(), err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("schema %s: %w", e.Name(), err)
		}
		out.docs[name] = m
	}
	for name := range out.docs {
		sch, err := c.Compile(schemaBase + name + ".json")
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		out.compiled[name] = sch
	}
	return out, nil
}

// check validates a decoded JSON value (numbers as json.Number) against
// the schema and returns the problems found, one per field, sorted.
func (s *schemas) check(name string, v any) []httpserver.FieldProblem {
	err := s.compiled[name].Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []httpserver.FieldProblem{{Field: "", Problem: "could not be checked"}}
	}
	var out []httpserver.FieldProblem
	add := func(field, problem string) {
		p := httpserver.FieldProblem{Field: field, Problem: problem}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := fieldPath(e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				add(join(field, m), "is required")
			}
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				add(join(field, p), "is not a known field")
			}
		case *kind.Enum:
			words := make([]string, len(k.Want))
			for i, v := range k.Want {
				words[i] = fmt.Sprint(v)
			}
			add(field, "must be one of: "+strings.Join(words, ", "))
		case *kind.MaxItems:
			add(field, "must hold at most "+strconv.Itoa(k.Want)+" items")
		case *kind.Type:
			add(field, "must be "+typeWords(k.Want))
		case *kind.MinLength:
			if k.Want <= 1 {
				add(field, "must not be empty")
			} else {
				add(field, "must be at least "+strconv.Itoa(k.Want)+" characters long")
			}
		case *kind.MaxLength:
			add(field, "must be at most "+strconv.Itoa(k.Want)+" characters long")
		case *kind.Pattern:
			add(field, patternProblem(field))
		case *kind.Format:
			switch {
			case k.Want == "email":
				add(field, "must be an e-mail address")
			case k.Err != nil && k.Want == "birth-date":
				add(field, k.Err.Error())
			default:
				add(field, "must be a valid "+k.Want)
			}
		default:
			add(field, "has an invalid value")
		}
	}
	walk(ve)
	slices.SortFunc(out, func(a, b httpserver.FieldProblem) int {
		return strings.Compare(a.Field+"\x00"+a.Problem, b.Field+"\x00"+b.Problem)
	})
	return out
}

// fieldPath names a location in the body as the error details do:
// certifications[3], address.city.
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

func join(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

func typeWords(want []string) string {
	words := make([]string, len(want))
	for i, t := range want {
		switch t {
		case "object", "array", "integer":
			words[i] = "an " + t
		case "null":
			words[i] = "null"
		default:
			words[i] = "a " + t
		}
	}
	return strings.Join(words, " or ")
}

// patternProblem says what a field's pattern asks for, without echoing
// the value.
func patternProblem(field string) string {
	switch field {
	case "first_name", "last_name":
		return "must not be blank or hold control characters"
	case "phone":
		return "must be a phone number: digits, spaces, hyphens, dots and parentheses, with an optional leading +"
	case "email":
		return "must be an e-mail address whose domain has a dot"
	case "address":
		return "must not be blank"
	case "employee_id":
		return "must be EMP- followed by digits, e.g. EMP-1042"
	case "contact_phone":
		return "must be a phone number: digits, spaces, hyphens, dots and parentheses, with an optional leading +"
	case "name", "company", "role", "department", "provider_name":
		return "must not be blank or hold control characters"
	}
	if strings.HasPrefix(field, "certifications[") {
		return "must not be blank"
	}
	return "has an invalid format"
}

// read reads a platform request body and checks it against the named
// schema (the one JSON guard of the platform endpoints): 415 unless it is application/json, 413 when larger than max,
// 400 when it is not one JSON value or fails the schema (with details).
// It returns the decoded value (numbers as json.Number).
func (s *schemas) read(w http.ResponseWriter, r *http.Request, schema string, max int64) (any, bool) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		httpserver.WriteError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json")
		return nil, false
	}
	if r.ContentLength > max {
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "the body is larger than "+strconv.FormatInt(max, 10)+" bytes")
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || int64(len(body)) > max {
		httpserver.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "the body is larger than "+strconv.FormatInt(max, 10)+" bytes")
		return nil, false
	}
	if err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_json", "the body could not be read")
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_json", "the body is not valid JSON")
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_json", "the body must hold one JSON value only")
		return nil, false
	}
	if problems := s.check(schema, v); len(problems) > 0 {
		httpserver.WriteErrorDetails(w, http.StatusBadRequest, "invalid_body", "the body does not match the "+schema+" schema", problems)
		return nil, false
	}
	return v, true
}
