package adapters

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidEmployeeID(t *testing.T) {
	for id, ok := range map[string]bool{
		"EMP-1": true, "EMP-0042": true, "EMP-": false, "emp-1": false, "EMP-1a": false,
		"EMP-١": false, " EMP-1": false, "EMP-1\n": false, "PT-1": false, "": false,
	} {
		err := ValidEmployeeID(id)
		if (err == nil) != ok {
			t.Errorf("%q: error %v, want ok=%v", id, err, ok)
		}
		var fe *FieldError
		if err != nil && (!errors.As(err, &fe) || fe.Field != "employee_id") {
			t.Errorf("%q: %v does not name employee_id", id, err)
		}
	}
}

func TestNewWorkerValidate(t *testing.T) {
	good := NewWorker{Name: "Ada Nilsen", EmployeeID: "EMP-7", Company: "Example Energy", Role: "Roustabout"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, w := range map[string]NewWorker{
		"employee_id": {Name: "A", EmployeeID: "E-7", Company: "C", Role: "R"},
		"name":        {Name: "  ", EmployeeID: "EMP-7", Company: "C", Role: "R"},
		"company":     {Name: "A", EmployeeID: "EMP-7", Role: "R"},
		"role":        {Name: "A", EmployeeID: "EMP-7", Company: "C"},
	} {
		var fe *FieldError
		if err := w.Validate(); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%+v: error %v, want one naming %s", w, err, field)
		}
	}
}

func TestNewScreeningValidate(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 30, 0, 0, time.FixedZone("UTC+2", 2*3600)) // 2026-02-28 22:30 UTC
	good := NewScreening{MedicalStatus: "fit", ScreeningDate: "2026-02-28", ExpiryDate: "2026-02-28", Certifications: []string{"BOSIET"}, ProviderName: "Dr A"}
	if err := good.Validate(now); err != nil {
		t.Fatalf("a screening today (UTC) that expires the same day: %v", err)
	}
	restricted := good
	restricted.MedicalStatus, restricted.Restrictions = MedicalFitWithRestrictions, []string{"day-shift-only"}
	if err := restricted.Validate(now); err != nil {
		t.Fatalf("fit with a restriction named: %v", err)
	}
	many := make([]string, MaxCertifications+1)
	for i := range many {
		many[i] = "H2S"
	}
	for _, c := range []struct {
		name  string
		edit  func(*NewScreening)
		field string
		says  string
	}{
		{"unknown status", func(s *NewScreening) { s.MedicalStatus = "healthy" }, "medical_status", "fit, fit-with-restrictions, temporarily-unfit, unfit"},
		{"the code, not the body value", func(s *NewScreening) { s.MedicalStatus = "permanently-unfit" }, "medical_status", "not one of"},
		{"29 February of a common year", func(s *NewScreening) { s.ScreeningDate = "2025-02-29" }, "screening_date", "not a date"},
		{"31 April", func(s *NewScreening) { s.ExpiryDate = "2026-04-31" }, "expiry_date", "not a date"},
		{"a dateTime", func(s *NewScreening) { s.ScreeningDate = "2026-02-01T00:00:00Z" }, "screening_date", "not a date"},
		{"one-digit month", func(s *NewScreening) { s.ExpiryDate = "2026-3-01" }, "expiry_date", "not a date"},
		{"tomorrow in UTC", func(s *NewScreening) { s.ScreeningDate, s.ExpiryDate = "2026-03-01", "2027-03-01" }, "screening_date", "in the future"},
		{"expiry before screening", func(s *NewScreening) { s.ExpiryDate = "2026-02-27" }, "expiry_date", "before screening_date"},
		{"fit with restrictions, none named", func(s *NewScreening) { s.MedicalStatus = MedicalFitWithRestrictions }, "restrictions", "nat-ffw-1"},
		{"restrictions of a fit outcome", func(s *NewScreening) { s.Restrictions = []string{"day-shift-only"} }, "restrictions", "only a fit-with-restrictions"},

		{"101 certifications", func(s *NewScreening) { s.Certifications = many }, "certifications", "at most 100"},
		{"a name of 201 characters", func(s *NewScreening) { s.Certifications = []string{"H2S", strings.Repeat("é", 201)} }, "certifications[1]", "201 characters; at most 200"},
		{"a blank name", func(s *NewScreening) { s.Certifications = []string{" "} }, "certifications[0]", "blank"},
	} {
		s := good
		c.edit(&s)
		err := s.Validate(now)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", c.name, err, c.field, c.says)
		}
	}
	s := good
	s.Certifications = many[:MaxCertifications]
	s.Certifications[0] = strings.Repeat("é", MaxCertificationLength)
	if err := s.Validate(now); err != nil {
		t.Errorf("100 certifications, one of 200 characters: %v", err)
	}
}
