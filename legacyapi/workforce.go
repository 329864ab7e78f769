package legacyapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/httpserver"
	"github.com/kiln-fhir/kiln/profiles/national"
)

// Workforce configures the workforce endpoints (/workforce…) over the
// workforce partition's FHIR service. The EMP id never becomes a resource
// id: workers, employers and screenings get random opaque ids, and the
// EMP id lives only in the Patient's identifier. A worker is found again
// through a claim record whose id is a blind tag of the EMP id (Tag), so
// that neither the store's records nor its resource ids hold it.
type Workforce struct {
	// FHIR is the workforce partition's FHIR service.
	FHIR FHIR
	// Records are the workforce partition's records: the claims of EMP
	// ids and employers, and the Idempotency-Key answers of these
	// endpoints (which hold EMP ids, so they stay in the partition).
	Records Records
	// Tag is a keyed one-way tag of a value (HMAC under the partition's
	// index key): the same value always gets the same tag.
	Tag func(value string) string
	// Requirements are the certifications each role needs (nil:
	// adapters.DefaultRequirements).
	Requirements *adapters.Requirements
}

// Limits of the workforce endpoints.
const (
	maxWorkerBytes    = 16 << 10
	maxScreeningBytes = 64 << 10 // 100 certifications of 200 characters fit
	// maxWorkerRecords bounds the screenings and the certifications read
	// to compute one worker's compliance; past it the answer is refused
	// rather than computed from a part of them.
	maxWorkerRecords = 10_000
	// claimTimeout is how long an unfinished registration holds its EMP
	// id: a claim older than this whose Patient was never written (the
	// server stopped mid-way) is taken over.
	claimTimeout = time.Minute
)

// Record kinds of the workforce partition.
const (
	workerClaimKind   = "workforce-worker"
	employerClaimKind = "workforce-employer"
)

// claim is the value of a worker or employer claim record. A worker's
// claim is pending until its Patient is written, then done: a done claim
// is a registered worker, found without reading the Patient (so that a
// workforce:write token, which may not read, can record screenings).
type claim struct {
	ID   string    `json:"id"` // the Patient's or the Organization's id
	At   time.Time `json:"at"`
	Done bool      `json:"done,omitempty"`
}

// newOpaqueID is a random resource id: a UUID (version 4), the form of
// the ids the server assigns, which the sealed partition keeps in its
// index as references (store/sealed: only such ids are accepted there).
// Version 4, not the time-ordered version 7 of the server's own ids: a
// worker's ids tell nothing of when they were made.
func newOpaqueID() string {
	var u [16]byte
	rand.Read(u[:])         // never fails (crypto/rand, Go ≥ 1.24)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// badBody answers a body value the adapters refused: 400 naming the
// field.
func badBody(w http.ResponseWriter, err error) {
	var fe *adapters.FieldError
	if !errors.As(err, &fe) {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_body", err.Error())
		return
	}
	httpserver.WriteErrorDetails(w, http.StatusBadRequest, "invalid_body", fe.Error(),
		[]httpserver.FieldProblem{{Field: fe.Field, Problem: fe.Message}})
}

// registerWorker is POST /workforce (workforce:write): a WorkforcePatient
// with a random id, and its employer's Organization (one per company,
// compared case-insensitively) → 201 {employee_id, status: "registered",
// created_at} with Location /workforce/{employee_id}. The same
// employee_id twice is a 409, decided by the claim record's
// compare-and-swap. Idempotency-Key works as on POST /patients.
func (a *API) registerWorker(w http.ResponseWriter, r *http.Request) {
	wf := a.cfg.Workforce
	p, ok := a.allow(w, r, auth.PartitionWorkforce, auth.EndpointWorkforce, auth.OpCreate)
	if !ok {
		return
	}
	v, ok := a.readJSON(w, r, schemaWorkerCreate, maxWorkerBytes)
	if !ok {
		return
	}
	canon, _ := json.Marshal(v)
	var in adapters.NewWorker
	if err := json.Unmarshal(canon, &in); err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_body", "the body does not match the "+schemaWorkerCreate+" schema")
		return
	}
	if err := in.Validate(); err != nil {
		badBody(w, err)
		return
	}
	a.createOnce(w, r, wf.Records, p.Subject, canon, func(ctx context.Context) ([]byte, string, error) {
		body, err := a.newWorker(ctx, in)
		return body, "/workforce/" + in.EmployeeID, err
	})
}

func (a *API) newWorker(ctx context.Context, in adapters.NewWorker) ([]byte, error) {
	wf := a.cfg.Workforce
	rec, held, err := a.claim(ctx, workerClaimKind, wf.Tag("employee-id|"+in.EmployeeID), func(held *claim) error {
		switch {
		case held == nil:
			return nil
		case held.Done:
			return outcome.New(http.StatusConflict, "duplicate", "employee_id "+in.EmployeeID+" is already registered")
		case a.cfg.Now().Sub(held.At) < claimTimeout:
			return outcome.New(http.StatusConflict, "conflict", "employee_id "+in.EmployeeID+" is being registered by another request; retry later")
		}
		return nil // a registration that never finished: take it over, with its Patient id
	})
	if err != nil {
		return nil, err
	}
	release := func() {
		ctx := context.WithoutCancel(ctx)
		if cur, err := wf.Records.GetRecord(ctx, rec.Kind, rec.ID); err == nil && cur.Version == rec.Version {
			_ = wf.Records.DeleteRecord(ctx, rec.Kind, rec.ID)
		}
	}
	orgID, err := a.employer(ctx, in.Company)
	if err != nil {
		release()
		return nil, err
	}
	v, err := wf.FHIR.CreateWithID(ctx, "Patient", held.ID, a.pack.WorkerPatient(in, held.ID, orgID))
	if oe, ok := outcome.As(err); ok && oe.Status == http.StatusConflict {
		// A taken-over claim whose Patient was written after all: the
		// worker is registered.
		a.finishClaim(ctx, rec, held)
		return nil, outcome.New(http.StatusConflict, "duplicate", "employee_id "+in.EmployeeID+" is already registered")
	}
	if err != nil {
		release()
		return nil, err
	}
	a.finishClaim(ctx, rec, held)
	patient, err := decode(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a.pack.WorkerRegisteredOf(patient))
}

// finishClaim marks a worker's claim done. Should that fail, the claim
// stays pending: a later registration of the same EMP id takes it over
// after claimTimeout and gets 409 from the Patient's create, and then
// marks it done.
func (a *API) finishClaim(ctx context.Context, rec *store.Record, held claim) {
	held.Done = true
	value, _ := json.Marshal(held)
	next := store.Record{Kind: rec.Kind, ID: rec.ID, Version: rec.Version + 1, Value: value}
	if err := a.cfg.Workforce.Records.PutRecord(context.WithoutCancel(ctx), next); err != nil {
		a.cfg.Logger.WarnContext(ctx, "marking a worker's registration done failed", "request_id", httpserver.RequestID(ctx), "err", err)
	}
}

// employer returns the id of the company's Organization, creating both
// the claim and the Organization when they do not exist yet. It writes
// the Organization each time its claim is found (a create that gets 409
// when it exists), so that a registration never needs to read.
func (a *API) employer(ctx context.Context, company string) (string, error) {
	wf := a.cfg.Workforce
	key := strings.ToLower(strings.Join(strings.Fields(company), " "))
	_, held, err := a.claim(ctx, employerClaimKind, wf.Tag("employer|"+key), nil)
	if err != nil {
		return "", err
	}
	_, err = wf.FHIR.CreateWithID(ctx, "Organization", held.ID, a.pack.OrganizationResource(company, held.ID))
	if oe, ok := outcome.As(err); ok && oe.Status == http.StatusConflict {
		err = nil // created by an earlier registration
	}
	return held.ID, err
}

// claim takes the record kind/id for a new random resource id, or
// returns the claim another request holds. taken decides about a held
// claim: an error refuses, nil takes it over (a compare-and-swap on the
// held version, keeping its resource id). A nil taken keeps any held
// claim and returns it.
func (a *API) claim(ctx context.Context, kind, id string, taken func(held *claim) error) (*store.Record, claim, error) {
	records := a.cfg.Workforce.Records
	for range maxIDAttempts {
		c := claim{ID: newOpaqueID(), At: a.cfg.Now().UTC()}
		rec := store.Record{Kind: kind, ID: id, Version: 1}
		cur, err := records.GetRecord(ctx, kind, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, claim{}, err
		default:
			var held claim
			if err := json.Unmarshal(cur.Value, &held); err != nil {
				return nil, claim{}, err
			}
			if taken == nil {
				return cur, held, nil
			}
			if err := taken(&held); err != nil {
				return nil, claim{}, err
			}
			c.ID = held.ID
			rec.Version = cur.Version + 1
		}
		rec.Value, _ = json.Marshal(c)
		err = records.PutRecord(ctx, rec)
		if errors.Is(err, store.ErrConflict) {
			continue // another request wrote it first: look again
		}
		if err != nil {
			return nil, claim{}, err
		}
		return &rec, c, nil
	}
	return nil, claim{}, outcome.New(http.StatusConflict, "conflict", "the request conflicted with concurrent ones; retry it")
}

func isNotFound(err error) bool {
	oe, ok := outcome.As(err)
	return errors.Is(err, store.ErrNotFound) || ok && (oe.Status == http.StatusNotFound || oe.Status == http.StatusGone)
}

// workerOf finds the registered worker of the employee id in the path;
// ok false means the answer (404 for an unknown or malformed id) was
// written.
func (a *API) workerOf(w http.ResponseWriter, r *http.Request) (claim, string, bool) {
	wf := a.cfg.Workforce
	emp := mux.Vars(r)["id"]
	unknown := func() {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no worker with employee_id "+clipID(emp))
	}
	if adapters.ValidEmployeeID(emp) != nil {
		unknown()
		return claim{}, "", false
	}
	rec, err := wf.Records.GetRecord(r.Context(), workerClaimKind, wf.Tag("employee-id|"+emp))
	if errors.Is(err, store.ErrNotFound) {
		unknown()
		return claim{}, "", false
	}
	if err != nil {
		a.fail(w, r, err)
		return claim{}, "", false
	}
	var held claim
	if err := json.Unmarshal(rec.Value, &held); err != nil {
		a.fail(w, r, err)
		return claim{}, "", false
	}
	if !held.Done {
		unknown() // a registration still in progress, or one that failed
		return claim{}, "", false
	}
	return held, emp, true
}

// clipID keeps an id from the path short in an error message.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// recordScreening is POST /workforce/{id}/screening (workforce:write): a
// FitnessForWorkObservation and one WorkforceCertification
// DocumentReference per certification, with random ids → 201
// {screening_id, employee_id, medical_status, screening_date,
// expiry_date, recorded_at}. The certifications are written first and
// the Observation last: a certification counts only through the
// Observation it names, so a screening cut short counts not at all.
func (a *API) recordScreening(w http.ResponseWriter, r *http.Request) {
	wf := a.cfg.Workforce
	if _, ok := a.allow(w, r, auth.PartitionWorkforce, auth.EndpointWorkforce, auth.OpCreate); !ok {
		return
	}
	v, ok := a.readJSON(w, r, schemaScreeningCreate, maxScreeningBytes)
	if !ok {
		return
	}
	canon, _ := json.Marshal(v)
	var in adapters.NewScreening
	if err := json.Unmarshal(canon, &in); err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_body", "the body does not match the "+schemaScreeningCreate+" schema")
		return
	}
	now := a.cfg.Now()
	if err := in.Validate(now); err != nil {
		badBody(w, err)
		return
	}
	worker, emp, ok := a.workerOf(w, r)
	if !ok {
		return
	}
	patientID := worker.ID
	ids := adapters.ScreeningIDs{Observation: newOpaqueID()}
	for range in.Certifications {
		ids.Certifications = append(ids.Certifications, newOpaqueID())
	}
	obs, certs, err := a.pack.ScreeningResources(wf.Requirements, in, patientID, ids, now)
	if err != nil {
		badBody(w, err) // Validate refused every value ScreeningResources refuses
		return
	}
	ctx := r.Context()
	for i, c := range certs {
		if _, err := wf.FHIR.CreateWithID(ctx, "DocumentReference", ids.Certifications[i], c); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	ov, err := wf.FHIR.CreateWithID(ctx, "Observation", ids.Observation, obs)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	stored, err := decode(ov)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, a.pack.ScreeningRecordedOf(stored, emp), "")
}

// complianceElements are the elements of each type that the compliance
// formula reads (adapters.ScreeningsOf): only these are decoded.
var complianceElements = map[string]func(string) bool{
	"Observation": func(n string) bool {
		switch n {
		case "id", "meta", "status", "code", "effectiveDateTime", "issued", "performer", "valueCodeableConcept", "component":
			return true
		}
		return false
	},
	"DocumentReference": func(n string) bool {
		switch n {
		case "id", "status", "type", "context":
			return true
		}
		return false
	},
}

// compliance is GET /workforce/{id}/compliance (workforce:read): computed
// at every request from the worker's stored Patient, Observations and
// certification DocumentReferences (adapters.ComplianceAnswerOf); no
// score is stored.
func (a *API) compliance(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.allow(w, r, auth.PartitionWorkforce, auth.EndpointWorkforce, auth.OpRead); !ok {
		return
	}
	worker, _, ok := a.workerOf(w, r)
	if !ok {
		return
	}
	pv, err := a.cfg.Workforce.FHIR.Read(r.Context(), "Patient", worker.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	patient, err := decode(pv)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	subject := url.Values{"subject": {"Patient/" + worker.ID}}
	var lists [2][]map[string]any
	for i, typ := range []string{"Observation", "DocumentReference"} {
		list, err := a.searchIn(r, a.cfg.Workforce.FHIR, typ, subject, maxWorkerRecords+1, complianceElements[typ])
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if len(list) > maxWorkerRecords {
			httpserver.WriteError(w, http.StatusUnprocessableEntity, "too_many_records",
				"the worker has more than 10000 screenings or certifications; compliance is not computed from a part of them")
			return
		}
		lists[i] = list
	}
	writeJSON(w, http.StatusOK, a.pack.ComplianceAnswerOf(a.cfg.Workforce.Requirements, patient, lists[0], lists[1], a.cfg.Now()), "")
}

// WorkforceRequirements is the role table of the compliance score: the
// JSON file's (adapters.LoadRequirements; --workforce-requirements) or,
// for nil, the built-in default, resolving certification names through
// the national certification-type CodeSystem.
func WorkforceRequirements(file []byte) (*adapters.Requirements, error) {
	r := adapters.DefaultRequirements()
	if file != nil {
		var err error
		if r, err = adapters.LoadRequirements(file); err != nil {
			return nil, err
		}
	}
	cs, err := national.Files.ReadFile("CodeSystem-certification-type.json")
	if err != nil {
		return nil, err
	}
	concepts, err := adapters.ConceptsOf(cs)
	if err != nil {
		return nil, err
	}
	return r.WithCertificationTypes(concepts), nil
}
