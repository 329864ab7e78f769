package adapters

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The workforce profiles and identifier system of the national pack.
func (p Pack) WorkforcePatientProfile() string { return p.profile("WorkforcePatient") }
func (p Pack) ObservationProfile() string      { return p.profile("Observation") }
func (p Pack) FitnessForWorkProfile() string   { return p.profile("FitnessForWorkObservation") }
func (p Pack) CertificationProfile() string    { return p.profile("WorkforceCertification") }
func (p Pack) EmployeeIDSystem() string        { return p.Canonical() + "/sid/employee-id" }
func (p Pack) profile(name string) string      { return strings.TrimRight(p.ProfileURL, "/") + "/" + name }
func (p Pack) codeSystem(id string) string     { return p.Canonical() + "/CodeSystem/" + id }

// The extensions of a WorkforcePatient. The pack defines employer and job
// role; it has no department extension yet, so department goes in
// {profile_url}/workforce-department (valueString), which the validator
// reports as an unknown extension (a warning) until the pack defines it.
func (p Pack) EmployerExtension() string   { return p.profile("workforce-employer") }
func (p Pack) JobRoleExtension() string    { return p.profile("workforce-job-role") }
func (p Pack) DepartmentExtension() string { return p.profile("workforce-department") }

const (
	observationCategory = "http://terminology.hl7.org/CodeSystem/observation-category"
	dataAbsentReason    = "http://hl7.org/fhir/StructureDefinition/data-absent-reason"
)

// outcomeCodes maps medical_status to the fitness-for-work-outcome code
// and display; "unfit" is the code permanently-unfit.
var outcomeCodes = map[string][2]string{
	MedicalFit:                 {"fit", "Fit"},
	MedicalFitWithRestrictions: {"fit-with-restrictions", "Fit with restrictions"},
	MedicalTemporarilyUnfit:    {"temporarily-unfit", "Temporarily unfit"},
	MedicalUnfit:               {"permanently-unfit", "Permanently unfit"},
}

type jsonObject = map[string]any

func ref(typ, id string) jsonObject { return jsonObject{"reference": typ + "/" + id} }

func coding(system, code, display string) jsonObject {
	c := jsonObject{"system": system, "code": code}
	if display != "" {
		c["display"] = display
	}
	return c
}

func concept(codings ...jsonObject) jsonObject {
	list := make([]any, len(codings))
	for i, c := range codings {
		list[i] = c
	}
	return jsonObject{"coding": list}
}

func absent() jsonObject {
	return jsonObject{"extension": []any{jsonObject{"url": dataAbsentReason, "valueCode": "unknown"}}}
}

// marshal writes a resource with resourceType first, as FHIR JSON is
// usually read, and the other elements in key order.
func marshal(res jsonObject) []byte {
	typ := res["resourceType"]
	delete(res, "resourceType")
	b, err := json.Marshal(res)
	if err != nil {
		panic("adapters: marshal a resource: " + err.Error()) // maps of strings: cannot fail
	}
	head, _ := json.Marshal(typ)
	out := append([]byte(`{"resourceType":`), head...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...)
}

// OrganizationResource maps a company onto the Organization a worker's
// employer extension points to (id chosen by the caller): active, name.
// The pack has no Organization profile; the employer profile is the
// extension on the WorkforcePatient.
func (p Pack) OrganizationResource(company, id string) []byte {
	return marshal(jsonObject{"resourceType": "Organization", "id": id, "active": true, "name": strings.TrimSpace(company)})
}

// WorkerPatient maps a worker onto a WorkforcePatient. patientID and orgID
// are the opaque ids the caller chose for the Patient and its employer's
// Organization; the EMP id is never an id, only the identifier
// {canonical}/sid/employee-id (type v2-0203 EI, assigner the employer).
//   - meta.profile: the national Patient and WorkforcePatient;
//   - extensions: employer (valueReference Organization/orgID with the
//     company as display), job role (valueCodeableConcept with the role as
//     text: roles are free text, and the binding is extensible), and
//     department (valueString, when given);
//   - name: text = the name as given; family = its last word and given =
//     the words before it; a one-word name is a given name with the
//     family marked absent (data-absent-reason unknown);
//   - telecom: the phone (use work), when given;
//   - birthDate: the body has none and the national Patient requires it,
//     so it is marked absent (data-absent-reason unknown);
//   - active: true.
func (p Pack) WorkerPatient(w NewWorker, patientID, orgID string) []byte {
	employer := ref("Organization", orgID)
	employer["display"] = strings.TrimSpace(w.Company)
	ext := []any{
		jsonObject{"url": p.EmployerExtension(), "valueReference": employer},
		jsonObject{"url": p.JobRoleExtension(), "valueCodeableConcept": jsonObject{"text": strings.TrimSpace(w.Role)}},
	}
	if v := strings.TrimSpace(w.Department); v != "" {
		ext = append(ext, jsonObject{"url": p.DepartmentExtension(), "valueString": v})
	}
	name := jsonObject{"use": "official", "text": strings.Join(strings.Fields(w.Name), " ")}
	words := strings.Fields(w.Name)
	if len(words) > 1 {
		name["family"] = words[len(words)-1]
		name["given"] = words[:len(words)-1]
	} else {
		name["_family"] = absent()
		name["given"] = words
	}
	pt := jsonObject{
		"resourceType": "Patient",
		"id":           patientID,
		"meta":         jsonObject{"profile": []string{p.PatientProfile(), p.WorkforcePatientProfile()}},
		"extension":    ext,
		"identifier": []any{jsonObject{
			"use":      "official",
			"type":     concept(coding(v20203, "EI", "")),
			"system":   p.EmployeeIDSystem(),
			"value":    strings.TrimSpace(w.EmployeeID),
			"assigner": ref("Organization", orgID),
		}},
		"active":     true,
		"name":       []any{name},
		"_birthDate": absent(),
	}
	if v := strings.TrimSpace(w.ContactPhone); v != "" {
		pt["telecom"] = []any{jsonObject{"system": "phone", "value": v, "use": "work"}}
	}
	return marshal(pt)
}

// NewWorkerOf reads a WorkforcePatient and its employer Organization back
// into the worker body: the inverse of WorkerPatient and
// OrganizationResource. The company is the Organization's name, else the
// employer extension's display; the name is the official name's text,
// else its given names and family joined.
func (p Pack) NewWorkerOf(patient, organization map[string]any) NewWorker {
	var w NewWorker
	w.EmployeeID = p.EmployeeIDOf(patient)
	if n := pickName(patient); n != nil {
		w.Name, _ = n["text"].(string)
		if w.Name == "" {
			fam, _ := n["family"].(string)
			w.Name = strings.TrimSpace(strings.Join(append(strings_(n["given"]), fam), " "))
		}
	}
	w.ContactPhone = contact(patient, "phone")
	w.Company, _ = organization["name"].(string)
	for _, x := range asList(patient["extension"]) {
		e, _ := x.(map[string]any)
		switch e["url"] {
		case p.EmployerExtension():
			if w.Company == "" {
				r, _ := e["valueReference"].(map[string]any)
				w.Company, _ = r["display"].(string)
			}
		case p.JobRoleExtension():
			cc, _ := e["valueCodeableConcept"].(map[string]any)
			w.Role = conceptText(cc)
		case p.DepartmentExtension():
			w.Department, _ = e["valueString"].(string)
		}
	}
	return w
}

// EmployeeIDOf is the value of the Patient's first employee-id identifier.
func (p Pack) EmployeeIDOf(patient map[string]any) string {
	for _, x := range asList(patient["identifier"]) {
		id, _ := x.(map[string]any)
		if id["system"] == p.EmployeeIDSystem() {
			v, _ := id["value"].(string)
			return v
		}
	}
	return ""
}

// ScreeningIDs are the opaque ids the caller chose for the resources of
// one screening: the Observation, and one DocumentReference per
// certification, in the body's order.
type ScreeningIDs struct {
	Observation    string
	Certifications []string
}

// ScreeningResources maps a screening of the worker whose Patient is
// patientID, recorded at recordedAt, onto a FitnessForWorkObservation and
// one WorkforceCertification DocumentReference per certification named.
//
// The Observation: meta.profile national Observation and
// FitnessForWorkObservation; status final; category exam; code
// workforce-observation#fitness-for-work; subject the Patient;
// effectiveDateTime = screening_date; issued = recordedAt (UTC, the
// recorded time that orders screenings of one day); performer = [{display:
// provider_name}]; valueCodeableConcept = the outcome (unfit →
// permanently-unfit); a valid-until component = expiry_date; a
// work-restriction component per restriction.
//
// Each DocumentReference: meta.profile WorkforceCertification; status
// current; type = the certification-type coding when the name resolves to
// one (r.CertificationType), with the name as posted in type.text;
// category workforce-certification; subject the Patient; date =
// recordedAt; author = [{display: provider_name}]; content = one
// attachment titled with the name; context.period = screening_date to
// expiry_date; context.related = the Observation (so that a screening's
// certifications are found again, and nat-cert-1 holds for medicals).
//
// ids.Certifications must have one id per certification: it is an error
// otherwise.
func (p Pack) ScreeningResources(r *Requirements, s NewScreening, patientID string, ids ScreeningIDs, recordedAt time.Time) (observation []byte, certifications [][]byte, err error) {
	if len(ids.Certifications) != len(s.Certifications) {
		return nil, nil, fmt.Errorf("adapters: %d certification ids for %d certifications", len(ids.Certifications), len(s.Certifications))
	}
	outcome, ok := outcomeCodes[s.MedicalStatus]
	if !ok {
		return nil, nil, &FieldError{"medical_status", fmt.Sprintf("%q is not one of %s", s.MedicalStatus, strings.Join(MedicalStatuses, ", "))}
	}
	wo := p.codeSystem("workforce-observation")
	provider := strings.TrimSpace(s.ProviderName)
	recorded := recordedAt.UTC().Format(time.RFC3339Nano)
	obs := jsonObject{
		"resourceType":         "Observation",
		"id":                   ids.Observation,
		"meta":                 jsonObject{"profile": []string{p.ObservationProfile(), p.FitnessForWorkProfile()}},
		"status":               "final",
		"category":             []any{concept(coding(observationCategory, "exam", "Exam"))},
		"code":                 concept(coding(wo, "fitness-for-work", "Fitness for work")),
		"subject":              ref("Patient", patientID),
		"effectiveDateTime":    s.ScreeningDate,
		"issued":               recorded,
		"performer":            []any{jsonObject{"display": provider}},
		"valueCodeableConcept": concept(coding(p.codeSystem("fitness-for-work-outcome"), outcome[0], outcome[1])),
		"component": []any{jsonObject{
			"code":          concept(coding(wo, "valid-until", "Valid until")),
			"valueDateTime": s.ExpiryDate,
		}},
	}
	for _, code := range s.Restrictions {
		obs["component"] = append(obs["component"].([]any), jsonObject{
			"code":                 concept(coding(wo, "work-restriction", "Work restriction")),
			"valueCodeableConcept": concept(coding(p.codeSystem("work-restriction"), code, "")),
		})
	}
	observation = marshal(obs)
	for i, name := range s.Certifications {
		name = strings.TrimSpace(name)
		typ := jsonObject{"text": name}
		if c, ok := r.CertificationType(name); ok {
			typ["coding"] = []any{coding(p.codeSystem("certification-type"), c.Code, c.Display)}
		}
		doc := jsonObject{
			"resourceType": "DocumentReference",
			"id":           ids.Certifications[i],
			"meta":         jsonObject{"profile": []string{p.CertificationProfile()}},
			"status":       "current",
			"type":         typ,
			"category":     []any{concept(coding(p.codeSystem("document-category"), "workforce-certification", "Workforce certification"))},
			"subject":      ref("Patient", patientID),
			"date":         recorded,
			"author":       []any{jsonObject{"display": provider}},
			"content":      []any{jsonObject{"attachment": jsonObject{"title": name}}},
			"context": jsonObject{
				"period":  jsonObject{"start": s.ScreeningDate, "end": s.ExpiryDate},
				"related": []any{ref("Observation", ids.Observation)},
			},
		}
		certifications = append(certifications, marshal(doc))
	}
	return observation, certifications, nil
}

// NewScreeningOf reads a FitnessForWorkObservation and its certifications
// back into the screening body: the inverse of ScreeningResources. The
// certifications are the DocumentReferences given whose context.related
// names the Observation (others are ignored), in the order given; a name
// is type.text, else the type's display, else its code.
func (p Pack) NewScreeningOf(observation map[string]any, certifications []map[string]any) NewScreening {
	s := NewScreening{Certifications: []string{}}
	code := codeIn(observation["valueCodeableConcept"], p.codeSystem("fitness-for-work-outcome"))
	for status, c := range outcomeCodes {
		if c[0] == code {
			s.MedicalStatus = status
		}
	}
	s.ScreeningDate = datePart(str(observation["effectiveDateTime"]))
	for _, x := range asList(observation["component"]) {
		c, _ := x.(map[string]any)
		switch {
		case hasCoding(c["code"], p.codeSystem("workforce-observation"), "valid-until"):
			s.ExpiryDate = datePart(str(c["valueDateTime"]))
		case hasCoding(c["code"], p.codeSystem("workforce-observation"), "work-restriction"):
			if r := codeIn(c["valueCodeableConcept"], p.codeSystem("work-restriction")); r != "" {
				s.Restrictions = append(s.Restrictions, r)
			}
		}
	}
	if perf := asList(observation["performer"]); len(perf) > 0 {
		r, _ := perf[0].(map[string]any)
		s.ProviderName, _ = r["display"].(string)
	}
	id, _ := observation["id"].(string)
	for _, d := range certifications {
		if relatedTo(d, "Observation/"+id) {
			typ, _ := d["type"].(map[string]any)
			s.Certifications = append(s.Certifications, conceptText(typ))
		}
	}
	return s
}

// ScreeningsOf turns a worker's FitnessForWorkObservations (other
// Observations are ignored: another code, or a status other than final,
// amended or corrected) and their certification DocumentReferences into
// the compliance formula's input. A screening's recorded time is its
// issued instant, else its meta.lastUpdated; a certification counts with
// its screening's expiry_date, and only while its DocumentReference is
// current.
func (p Pack) ScreeningsOf(observations, certifications []map[string]any) []Screening {
	var out []Screening
	// The current certifications by the Observation they name, so that
	// each screening reads its own: linear in the two lists, not their
	// product.
	byScreening := map[string][]map[string]any{}
	for _, d := range certifications {
		if d["status"] != "current" {
			continue
		}
		ctx, _ := d["context"].(map[string]any)
		for _, x := range asList(ctx["related"]) {
			r, _ := x.(map[string]any)
			if k := lastTwoSegments(str(r["reference"])); strings.HasPrefix(k, "Observation/") {
				byScreening[k] = append(byScreening[k], d)
			}
		}
	}
	for _, o := range observations {
		if !hasCoding(o["code"], p.codeSystem("workforce-observation"), "fitness-for-work") {
			continue
		}
		switch o["status"] {
		case "final", "amended", "corrected":
		default:
			continue
		}
		ns := p.NewScreeningOf(o, byScreening["Observation/"+str(o["id"])])
		if ns.MedicalStatus == "" {
			continue // an outcome the formula does not know
		}
		out = append(out, Screening{
			MedicalStatus:  ns.MedicalStatus,
			ScreeningDate:  ns.ScreeningDate,
			ExpiryDate:     ns.ExpiryDate,
			RecordedAt:     recordedAt(o),
			Certifications: ns.Certifications,
		})
	}
	return out
}

// lastTwoSegments is "Type/id" of a relative or absolute reference.
func lastTwoSegments(ref string) string {
	i := strings.LastIndexByte(ref, '/')
	if i <= 0 {
		return ""
	}
	if j := strings.LastIndexByte(ref[:i], '/'); j >= 0 {
		return ref[j+1:]
	}
	return ref
}

func recordedAt(o map[string]any) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, str(o["issued"])); err == nil {
		return t.UTC()
	}
	meta, _ := o["meta"].(map[string]any)
	t, _ := time.Parse(time.RFC3339Nano, str(meta["lastUpdated"]))
	return t.UTC()
}

// WorkerRegistered is the answer of POST /workforce.
type WorkerRegistered struct {
	EmployeeID string `json:"employee_id"`
	Status     string `json:"status"`
	CreatedAt  string `json:"created_at"`
}

// WorkerRegisteredOf is the answer for a stored WorkforcePatient:
// created_at is its meta.lastUpdated as stored (the first version's).
func (p Pack) WorkerRegisteredOf(patient map[string]any) WorkerRegistered {
	meta, _ := patient["meta"].(map[string]any)
	return WorkerRegistered{EmployeeID: p.EmployeeIDOf(patient), Status: "registered", CreatedAt: str(meta["lastUpdated"])}
}

// ScreeningRecorded is the answer of POST /workforce/{id}/screening.
type ScreeningRecorded struct {
	ScreeningID   string `json:"screening_id"`
	EmployeeID    string `json:"employee_id"`
	MedicalStatus string `json:"medical_status"`
	ScreeningDate string `json:"screening_date"`
	ExpiryDate    string `json:"expiry_date"`
	RecordedAt    string `json:"recorded_at"`
}

// ScreeningRecordedOf is the answer for a stored FitnessForWorkObservation
// of the worker employeeID: screening_id is the Observation's (opaque) id,
// recorded_at its issued instant (else meta.lastUpdated) in RFC 3339 UTC.
func (p Pack) ScreeningRecordedOf(observation map[string]any, employeeID string) ScreeningRecorded {
	s := p.NewScreeningOf(observation, nil)
	return ScreeningRecorded{
		ScreeningID:   str(observation["id"]),
		EmployeeID:    employeeID,
		MedicalStatus: s.MedicalStatus,
		ScreeningDate: s.ScreeningDate,
		ExpiryDate:    s.ExpiryDate,
		RecordedAt:    recordedAt(observation).Format(time.RFC3339Nano),
	}
}

// ComplianceAnswer is the answer of GET /workforce/{id}/compliance.
type ComplianceAnswer struct {
	EmployeeID          string `json:"employee_id"`
	Name                string `json:"name"`
	Status              string `json:"status"`
	CertificationsValid bool   `json:"certifications_valid"`
	NextScreeningDue    string `json:"next_screening_due"`
	ComplianceScore     int    `json:"compliance_score"`
}

// ComplianceAnswerOf computes the compliance answer at now from the
// stored resources of one worker: their WorkforcePatient, Observations and
// certification DocumentReferences (see ScreeningsOf and
// Requirements.WorkerCompliance).
func (p Pack) ComplianceAnswerOf(r *Requirements, patient map[string]any, observations, certifications []map[string]any, now time.Time) ComplianceAnswer {
	w := p.NewWorkerOf(patient, nil)
	c := r.WorkerCompliance(w.Role, p.ScreeningsOf(observations, certifications), now)
	return ComplianceAnswer{
		EmployeeID:          w.EmployeeID,
		Name:                w.Name,
		Status:              c.Status,
		CertificationsValid: c.CertificationsValid,
		NextScreeningDue:    c.NextScreeningDue,
		ComplianceScore:     c.ComplianceScore,
	}
}

func relatedTo(doc map[string]any, reference string) bool {
	ctx, _ := doc["context"].(map[string]any)
	for _, x := range asList(ctx["related"]) {
		r, _ := x.(map[string]any)
		if s := str(r["reference"]); s == reference || strings.HasSuffix(s, "/"+reference) {
			return true
		}
	}
	return false
}

func asList(v any) []any { l, _ := v.([]any); return l }
func str(v any) string   { s, _ := v.(string); return s }
