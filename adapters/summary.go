package adapters

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Summary is the body of GET /patients/{id} for a patient that was not
// erased.
type Summary struct {
	PatientID   string  `json:"patient_id"`
	FirstName   string  `json:"first_name"`
	LastName    string  `json:"last_name"`
	DateOfBirth string  `json:"date_of_birth"`
	Phone       *string `json:"phone"` // nil: no phone number

	MedicalHistory   []HistoryEntry `json:"medical_history"`
	ComplianceStatus string         `json:"compliance_status"`
}

// HistoryEntry is one Condition in a Summary.
type HistoryEntry struct {
	Condition string `json:"condition"`
	// DiagnosedDate is YYYY-MM-DD, or the coarser YYYY or YYYY-MM a
	// Condition recorded; nil when the Condition has no onset or recorded
	// date.
	DiagnosedDate *string `json:"diagnosed_date"`
	Status        string  `json:"status"` // StatusManaged or StatusResolved
}

// The status of a history entry.
const (
	StatusManaged  = "managed"
	StatusResolved = "resolved"
)

// SummaryOf builds the summary of a patient from the Patient, its
// Conditions and its fitness-for-work Observations (see ComplianceOf), at
// now. The mapping of each Condition:
//   - condition: code.text, else the first coding's display, else its
//     code, else "unspecified condition";
//   - diagnosed_date: the date part of onsetDateTime or onsetPeriod.start,
//     else of recordedDate (onsetAge, onsetRange and onsetString carry no
//     date);
//   - status: clinicalStatus active, recurrence or relapse → "managed";
//     inactive, remission or resolved → "resolved"; no clinicalStatus →
//     "managed" (a recorded condition is shown as current unless it says
//     otherwise).
//
// Conditions whose verificationStatus is entered-in-error or refuted are
// left out: they are not part of the patient's history. Entries are
// sorted by diagnosed_date (entries without one last), then by condition.
func (p Pack) SummaryOf(patient map[string]any, conditions, observations []map[string]any, now time.Time) Summary {
	np := NewPatientOf(patient)
	id, _ := patient["id"].(string)
	s := Summary{
		PatientID:        id,
		FirstName:        np.FirstName,
		LastName:         np.LastName,
		DateOfBirth:      np.DateOfBirth,
		MedicalHistory:   []HistoryEntry{},
		ComplianceStatus: p.ComplianceOf(observations, now),
	}
	if np.Phone != "" {
		s.Phone = &np.Phone
	}
	for _, c := range conditions {
		if e, ok := historyEntry(c); ok {
			s.MedicalHistory = append(s.MedicalHistory, e)
		}
	}
	slices.SortStableFunc(s.MedicalHistory, func(a, b HistoryEntry) int {
		switch {
		case a.DiagnosedDate == nil && b.DiagnosedDate != nil:
			return 1
		case a.DiagnosedDate != nil && b.DiagnosedDate == nil:
			return -1
		case a.DiagnosedDate != nil && b.DiagnosedDate != nil:
			if c := cmp.Compare(*a.DiagnosedDate, *b.DiagnosedDate); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.Condition, b.Condition)
	})
	return s
}

func historyEntry(c map[string]any) (HistoryEntry, bool) {
	switch conceptCode(c["verificationStatus"]) {
	case "entered-in-error", "refuted":
		return HistoryEntry{}, false
	}
	e := HistoryEntry{Condition: conceptText(c["code"]), Status: StatusManaged}
	if e.Condition == "" {
		e.Condition = "unspecified condition"
	}
	switch conceptCode(c["clinicalStatus"]) {
	case "inactive", "remission", "resolved":
		e.Status = StatusResolved
	}
	date := ""
	if s, ok := c["onsetDateTime"].(string); ok {
		date = s
	} else if per, ok := c["onsetPeriod"].(map[string]any); ok {
		date, _ = per["start"].(string)
	}
	if date == "" {
		date, _ = c["recordedDate"].(string)
	}
	if date != "" {
		d := datePart(date)
		e.DiagnosedDate = &d
	}
	return e, true
}

// datePart is the date of a FHIR date or dateTime, as written (YYYY,
// YYYY-MM or YYYY-MM-DD): the recorded local date, not shifted to UTC.
func datePart(s string) string {
	if i := strings.IndexByte(s, 'T'); i >= 0 {
		return s[:i]
	}
	return s
}

// conceptText is a CodeableConcept's text, else its first coding's
// display, else that coding's code.
func conceptText(v any) string {
	cc, _ := v.(map[string]any)
	if t, _ := cc["text"].(string); t != "" {
		return t
	}
	codings, _ := cc["coding"].([]any)
	if len(codings) == 0 {
		return ""
	}
	c, _ := codings[0].(map[string]any)
	if d, _ := c["display"].(string); d != "" {
		return d
	}
	code, _ := c["code"].(string)
	return code
}

// conceptCode is the code of a CodeableConcept's first coding that has one.
func conceptCode(v any) string {
	cc, _ := v.(map[string]any)
	codings, _ := cc["coding"].([]any)
	for _, x := range codings {
		if c, ok := x.(map[string]any); ok {
			if code, _ := c["code"].(string); code != "" {
				return code
			}
		}
	}
	return ""
}

// hasCoding reports whether a CodeableConcept has the coding system|code.
func hasCoding(v any, system, code string) bool {
	cc, _ := v.(map[string]any)
	codings, _ := cc["coding"].([]any)
	for _, x := range codings {
		if c, ok := x.(map[string]any); ok && c["system"] == system && c["code"] == code {
			return true
		}
	}
	return false
}

// codeIn returns the code of a CodeableConcept's first coding of system.
func codeIn(v any, system string) string {
	cc, _ := v.(map[string]any)
	codings, _ := cc["coding"].([]any)
	for _, x := range codings {
		if c, ok := x.(map[string]any); ok && c["system"] == system {
			code, _ := c["code"].(string)
			return code
		}
	}
	return ""
}
