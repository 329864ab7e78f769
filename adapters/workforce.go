package adapters

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// NewWorker is the body of POST /workforce.
type NewWorker struct {
	Name         string `json:"name"`
	EmployeeID   string `json:"employee_id"`
	Company      string `json:"company"`
	Role         string `json:"role"`
	Department   string `json:"department"`
	ContactPhone string `json:"contact_phone"`
}

// NewScreening is the body of POST /workforce/{id}/screening.
type NewScreening struct {
	MedicalStatus  string   `json:"medical_status"`
	Certifications []string `json:"certifications"`
	ExpiryDate     string   `json:"expiry_date"`
	ScreeningDate  string   `json:"screening_date"`
	ProviderName   string   `json:"provider_name"`
	// Restrictions are the work restrictions of a fit-with-restrictions
	// outcome (codes of the national work-restriction CodeSystem): the
	// national profile requires at least one then (nat-ffw-1), and no
	// other outcome has any.
	Restrictions []string `json:"restrictions,omitempty"`
}

// Limits of a screening body.
const (
	MaxCertifications      = 100
	MaxCertificationLength = 200 // characters (runes), not bytes
)

// FieldError is a bad value in a body: Field names it as the JSON body
// does (certifications[3] for an element).
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

var employeeIDPattern = regexp.MustCompile(`^EMP-[0-9]+$`)

// ValidEmployeeID checks the form EMP-<digits> (ASCII digits, at least one).
func ValidEmployeeID(id string) error {
	if !employeeIDPattern.MatchString(id) {
		return &FieldError{"employee_id", "must be EMP- followed by digits, e.g. EMP-1042"}
	}
	return nil
}

// Validate checks a worker body beyond its JSON Schema: the employee_id
// form and that name, company and role are not blank. The first error
// found is returned.
func (w NewWorker) Validate() error {
	if err := ValidEmployeeID(w.EmployeeID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"name", w.Name}, {"company", w.Company}, {"role", w.Role}} {
		if strings.TrimSpace(f.v) == "" {
			return &FieldError{f.name, "must not be blank"}
		}
	}
	return nil
}

// Validate checks a screening body at now (the injected clock):
// medical_status is one of MedicalStatuses; screening_date and expiry_date
// are dates YYYY-MM-DD that exist; screening_date is not after today (UTC);
// expiry_date is not before screening_date (a same-day expiry is allowed);
// at most MaxCertifications certifications, each not blank and at most
// MaxCertificationLength characters. The first error found is returned.
func (s NewScreening) Validate(now time.Time) error {
	ok := false
	for _, m := range MedicalStatuses {
		ok = ok || s.MedicalStatus == m
	}
	if !ok {
		return &FieldError{"medical_status", fmt.Sprintf("%q is not one of %s", s.MedicalStatus, strings.Join(MedicalStatuses, ", "))}
	}
	sd, err := parseDay("screening_date", s.ScreeningDate)
	if err != nil {
		return err
	}
	ed, err := parseDay("expiry_date", s.ExpiryDate)
	if err != nil {
		return err
	}
	if today := now.UTC().Format(time.DateOnly); s.ScreeningDate > today {
		return &FieldError{"screening_date", fmt.Sprintf("%s is in the future (today is %s UTC)", s.ScreeningDate, today)}
	}
	if ed.Before(sd) {
		return &FieldError{"expiry_date", fmt.Sprintf("%s is before screening_date %s", s.ExpiryDate, s.ScreeningDate)}
	}
	switch {
	case s.MedicalStatus == MedicalFitWithRestrictions && len(s.Restrictions) == 0:
		return &FieldError{"restrictions", "a fit-with-restrictions outcome names at least one work restriction (the national profile's nat-ffw-1)"}
	case s.MedicalStatus != MedicalFitWithRestrictions && len(s.Restrictions) > 0:
		return &FieldError{"restrictions", "only a fit-with-restrictions outcome has work restrictions"}
	}
	if len(s.Certifications) > MaxCertifications {
		return &FieldError{"certifications", fmt.Sprintf("%d certifications; at most %d", len(s.Certifications), MaxCertifications)}
	}
	for i, c := range s.Certifications {
		field := fmt.Sprintf("certifications[%d]", i)
		if strings.TrimSpace(c) == "" {
			return &FieldError{field, "must not be blank"}
		}
		if n := utf8.RuneCountInString(c); n > MaxCertificationLength {
			return &FieldError{field, fmt.Sprintf("%d characters; at most %d", n, MaxCertificationLength)}
		}
	}
	return nil
}

// parseDay reads a YYYY-MM-DD date that exists (time.Parse refuses
// 2025-02-29 and 2025-04-31).
func parseDay(field, s string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil || len(s) != len(time.DateOnly) {
		return t, &FieldError{field, fmt.Sprintf("%q is not a date YYYY-MM-DD that exists", s)}
	}
	return t, nil
}
