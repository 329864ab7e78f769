package legacyapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/httpserver"
)

// maxPatientBytes bounds a POST /patients body: six short strings.
const maxPatientBytes = 16 << 10

// patientSequence is the name of the sequence of PT-<n>.
const patientSequence = "patient"

// maxIDAttempts bounds the ids tried for one new patient: a number whose
// PT-<n> already exists (created through /fhir with a client-chosen id) is
// skipped.
const maxIDAttempts = 8

// Limits of the searches behind a summary.
const (
	maxHistory      = 1000
	maxFitnessForWk = 100
)

// readJSON reads a platform request body and checks it against the named
// schema; see schemas.read.
func (a *API) readJSON(w http.ResponseWriter, r *http.Request, schema string, max int64) (any, bool) {
	return a.schemas.read(w, r, schema, max)
}

// patientCreated is the answer of POST /patients.
type patientCreated struct {
	PatientID string `json:"patient_id"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

// patientErased is the answer of DELETE /patients/{id}.
type patientErased = adapters.Erased

// createPatient is POST /patients (patients:write): the body → a FHIR
// Patient PT-<n>, created through the FHIR service (validated against the
// national Patient profile like any write) → 201 {patient_id, status,
// created_at} with Location. With an Idempotency-Key, a retry gets the
// first answer (see idempotency.go).
func (a *API) createPatient(w http.ResponseWriter, r *http.Request) {
	p, ok := a.allow(w, r, auth.PartitionClinical, auth.EndpointPatients, auth.OpCreate)
	if !ok {
		return
	}
	v, ok := a.readJSON(w, r, schemaPatientCreate, maxPatientBytes)
	if !ok {
		return
	}
	canon, _ := json.Marshal(v) // sorted keys: the same body in another order is the same request
	var in adapters.NewPatient
	if err := json.Unmarshal(canon, &in); err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_body", "the body does not match the "+schemaPatientCreate+" schema")
		return
	}
	a.createOnce(w, r, a.cfg.Records, p.Subject, canon, func(context.Context) ([]byte, string, error) {
		created, err := a.newPatient(r, in)
		if err != nil {
			return nil, "", err
		}
		body, err := json.Marshal(created)
		return body, "/patients/" + created.PatientID, err
	})
}

func (a *API) newPatient(r *http.Request, in adapters.NewPatient) (*patientCreated, error) {
	ctx := r.Context()
	for range maxIDAttempts {
		n, err := a.cfg.Sequence.NextValue(ctx, patientSequence)
		if err != nil {
			return nil, err
		}
		id := "PT-" + strconv.FormatInt(n, 10)
		v, err := a.cfg.FHIR.CreateWithID(ctx, "Patient", id, a.pack.PatientResource(in, id))
		if oe, ok := outcome.As(err); ok && oe.Status == http.StatusConflict {
			continue // PT-<n> was taken outside the platform API
		}
		if err != nil {
			return nil, err
		}
		return &patientCreated{PatientID: id, Status: "active", CreatedAt: v.LastUpdated.UTC().Format(time.RFC3339)}, nil
	}
	return nil, outcome.New(http.StatusConflict, "conflict", "no free patient id was found; retry the request")
}

// getPatient is GET /patients/{id} (patients:read): the summary built from
// the Patient, its Conditions and its fitness-for-work Observations; for
// an erased patient, only {patient_id, status: "anonymized",
// anonymized_at}. 404 when there is no such Patient.
func (a *API) getPatient(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.allow(w, r, auth.PartitionClinical, auth.EndpointPatients, auth.OpRead); !ok {
		return
	}
	id := mux.Vars(r)["id"]
	ctx := r.Context()
	pv, err := a.cfg.FHIR.Read(ctx, "Patient", id)
	if oe, ok := outcome.As(err); ok && (oe.Status == http.StatusNotFound || oe.Status == http.StatusGone || oe.Status == http.StatusBadRequest) {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no patient "+strconv.Quote(id))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	patient, err := decode(pv)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if adapters.IsAnonymized(patient) {
		writeJSON(w, http.StatusOK, adapters.ErasedOf(patient), "")
		return
	}
	ref := "Patient/" + id
	conditions, err := a.searchDecoded(r, "Condition", url.Values{"subject": {ref}}, maxHistory)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	observations, err := a.searchDecoded(r, "Observation", url.Values{"subject": {ref}, "code": {a.pack.FitnessForWorkCode()}, "_sort": {"-date"}}, maxFitnessForWk)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.pack.SummaryOf(patient, conditions, observations, a.cfg.Now()), "")
}

func (a *API) searchDecoded(r *http.Request, typ string, params url.Values, limit int) ([]map[string]any, error) {
	return a.searchIn(r, a.cfg.FHIR, typ, params, limit, nil)
}

// searchIn runs a search on fhir and decodes the matches: the root
// elements keep accepts (nil: all).
func (a *API) searchIn(r *http.Request, fhir FHIR, typ string, params url.Values, limit int, keep func(string) bool) ([]map[string]any, error) {
	vs, err := fhir.SearchAll(r.Context(), typ, params, limit)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(vs))
	for _, v := range vs {
		var m map[string]any
		if keep != nil {
			m, err = fhirjson.DecodeMembers(v.Body, keep)
		} else {
			m, err = decode(v)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// decode reads a stored resource as encoding/json would with UseNumber,
// in fhirjson's single pass (a third of the time: a worker's compliance
// decodes every screening and certification on each request).
func decode(v *store.Version) (map[string]any, error) {
	return fhirjson.Decode(v.Body)
}

// erasePatient is DELETE /patients/{id} (patients:write and the role admin
// or privacy_officer, decided by the policy table): the eraser anonymizes
// the patient's data → 200 {patient_id, status: "anonymized",
// anonymized_at}; again for an erased patient (idempotent); 404 for an
// unknown id.
func (a *API) erasePatient(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.allow(w, r, auth.PartitionClinical, auth.EndpointPatients, auth.OpDelete); !ok {
		return
	}
	if a.cfg.Eraser == nil {
		httpserver.WriteError(w, http.StatusNotImplemented, "not_implemented", "erasure is not available on this server")
		return
	}
	id := mux.Vars(r)["id"]
	at, err := a.cfg.Eraser.ErasePatient(r.Context(), id)
	oe, isOutcome := outcome.As(err)
	switch {
	case errors.Is(err, store.ErrNotFound) || isOutcome && (oe.Status == http.StatusNotFound || oe.Status == http.StatusGone):
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no patient "+strconv.Quote(id))
	case err != nil:
		a.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, patientErased{PatientID: id, Status: "anonymized", AnonymizedAt: at.UTC().Format(time.RFC3339)}, "")
	}
}

// writeJSON answers with v as JSON, and a Location when location is set.
func writeJSON(w http.ResponseWriter, status int, v any, location string) {
	b, err := json.Marshal(v)
	if err != nil {
		httpserver.WriteError(w, http.StatusInternalServerError, "internal", "the answer could not be encoded")
		return
	}
	writeRaw(w, status, b, location)
}

func writeRaw(w http.ResponseWriter, status int, body []byte, location string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if location != "" {
		w.Header().Set("Location", location)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
