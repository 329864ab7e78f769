package adapters

import (
	"time"
)

// The medical_status values of a screening (the national
// fitness-for-work outcomes; "unfit" is the outcome code
// permanently-unfit).
const (
	MedicalFit                 = "fit"
	MedicalFitWithRestrictions = "fit-with-restrictions"
	MedicalTemporarilyUnfit    = "temporarily-unfit"
	MedicalUnfit               = "unfit"
)

// MedicalStatuses lists the allowed medical_status values, in the order
// an error message names them.
var MedicalStatuses = []string{MedicalFit, MedicalFitWithRestrictions, MedicalTemporarilyUnfit, MedicalUnfit}

// The values of the compliance answer's status.
const (
	WorkerFitToWork           = "fit-to-work"
	WorkerFitWithRestrictions = "fit-with-restrictions"
	WorkerNotFit              = "not-fit"
	WorkerScreeningOverdue    = "screening-overdue"
	WorkerScreeningRequired   = "screening-required"
)

// Screening is one recorded screening as the compliance formula reads it.
type Screening struct {
	MedicalStatus  string    // one of MedicalStatuses
	ScreeningDate  string    // YYYY-MM-DD
	ExpiryDate     string    // YYYY-MM-DD, the last day the screening is valid
	RecordedAt     time.Time // when it was stored; orders screenings of one day
	Certifications []string  // certification names, as posted
}

// WorkerCompliance is the result of the compliance formula.
type WorkerCompliance struct {
	Status              string
	CertificationsValid bool
	NextScreeningDue    string // YYYY-MM-DD
	ComplianceScore     int    // 0–100
}

// WorkerCompliance computes a worker's compliance at now from their role
// and screenings, by this formula (all dates are UTC calendar days; today
// is now's date in UTC):
//
// Latest screening: the one with the greatest screening_date, then the
// greatest RecordedAt; of screenings equal on both, the last in the slice.
// It is expired when today is after its expiry_date: a screening is valid
// through its expiry day itself. Screenings dated after today are not set
// aside (the input validation refuses them), so that the result never
// depends on now except through the comparisons below.
//
// status: no screening → screening-required; the latest expired →
// screening-overdue, whatever its outcome; else fit → fit-to-work,
// fit-with-restrictions → fit-with-restrictions, temporarily-unfit and
// unfit → not-fit.
//
// Certifications: every screening names certifications; a name stands for
// its key (Requirements.CertificationKey: case-insensitive, and through the
// certification-type CodeSystem and the aliases). A certification is held
// until the latest expiry_date among the screenings that name it: a later
// screening renews it, and no screening shortens a certificate already
// issued. It is valid today when today is on or before that date. A
// required group (alternatives such as BOSIET or FOET) is met when one of
// its alternatives is valid; its expiry is the latest of its alternatives'.
//
// certifications_valid: every required group is met (true when the role
// requires none).
//
// next_screening_due: the earliest of the latest screening's expiry_date
// and each required group's expiry; a required group none of whose
// certifications was ever held is due today, and so is the screening when
// there is none. It is before today when something is overdue.
//
// compliance_score = ⌊50·F + 30·C + 20·T⌋, computed in integers (no
// rounding error):
//   - F = 1 for fit, ½ for fit-with-restrictions, 0 for the others, for
//     an expired latest screening, and when there is none;
//   - C = met groups / required groups, 1 when none are required;
//   - T = d/30 clamped to [0, 1], d the days from today to
//     next_screening_due: 1 at 30 days or more, 29/30 at 29, 0 on the due
//     day itself, 0 when overdue.
//
// So a fit worker with every certification valid and 30 days or more to
// go scores 100, and on the last valid day 80. The score never rises when
// only now moves forward (F, C and T can only fall), and never falls when
// a certification is added to a screening that is valid today (its expiry
// can only lengthen, a missing group's "today" can only move later).
func (r *Requirements) WorkerCompliance(role string, screenings []Screening, now time.Time) WorkerCompliance {
	today := dayNumber(now.UTC().Format(time.DateOnly))

	latest := -1
	for i, s := range screenings {
		if latest < 0 || !screeningBefore(s, screenings[latest]) {
			latest = i
		}
	}

	// held: certification key → the day number its validity ends
	held := map[string]int{}
	for _, s := range screenings {
		end := dayNumber(s.ExpiryDate)
		for _, name := range s.Certifications {
			k := r.CertificationKey(name)
			if k == "" {
				continue
			}
			if prev, ok := held[k]; !ok || end > prev {
				held[k] = end
			}
		}
	}

	var out WorkerCompliance
	f2 := 0 // 2·F
	due := today
	if latest < 0 {
		out.Status = WorkerScreeningRequired
	} else {
		s := screenings[latest]
		due = dayNumber(s.ExpiryDate)
		switch {
		case today > due:
			out.Status = WorkerScreeningOverdue
		case s.MedicalStatus == MedicalFit:
			out.Status, f2 = WorkerFitToWork, 2
		case s.MedicalStatus == MedicalFitWithRestrictions:
			out.Status, f2 = WorkerFitWithRestrictions, 1
		default:
			out.Status = WorkerNotFit
		}
	}

	groups := r.Required(role)
	met := 0
	for _, g := range groups {
		end, has := 0, false
		for _, alt := range g {
			if e, ok := held[r.CertificationKey(alt)]; ok && (!has || e > end) {
				end, has = e, true
			}
		}
		if !has {
			end = today
		} else if end >= today {
			met++
		}
		due = min(due, end)
	}
	n := len(groups)
	out.CertificationsValid = met == n
	if n == 0 {
		n, met = 1, 1
	}
	d := min(max(due-today, 0), 30)
	// 50·F + 30·met/n + 20·d/30 = (750·f2·n + 900·met + 20·d·n) / (30·n)
	out.ComplianceScore = (750*f2*n + 900*met + 20*d*n) / (30 * n)
	out.NextScreeningDue = dayString(due)
	return out
}

// screeningBefore orders screenings by screening_date, then recorded time.
func screeningBefore(a, b Screening) bool {
	if a.ScreeningDate != b.ScreeningDate {
		return dayNumber(a.ScreeningDate) < dayNumber(b.ScreeningDate)
	}
	return a.RecordedAt.Before(b.RecordedAt)
}

// dayNumber is the day of a YYYY-MM-DD date counted from 1970-01-01 (the
// inputs are validated; an unreadable date counts as day 0, long past).
func dayNumber(s string) int {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0
	}
	return int(t.Unix() / 86400)
}

func dayString(n int) string {
	return time.Unix(int64(n)*86400, 0).UTC().Format(time.DateOnly)
}
