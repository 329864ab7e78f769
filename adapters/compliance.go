package adapters

import (
	"time"
)

// The values of compliance_status.
const (
	ComplianceCompliant       = "compliant"
	ComplianceWithRestriction = "compliant-with-restrictions"
	ComplianceNonCompliant    = "non-compliant"
	ComplianceExpired         = "expired"
	ComplianceUnknown         = "unknown"
)

// FitnessForWorkCode is the national pack's code of a fitness-for-work
// conclusion, as a token search value (system|code).
func (p Pack) FitnessForWorkCode() string {
	return p.Canonical() + "/CodeSystem/workforce-observation|fitness-for-work"
}

// ComplianceOf derives compliance_status from the patient's Observations,
// at now. Only the conclusions of a fitness-for-work assessment count
// (code {canonical}/CodeSystem/workforce-observation#fitness-for-work,
// the national FitnessForWorkObservation profile) with status final,
// amended or corrected; others are ignored. The latest of them (by
// effectiveDateTime, then meta.lastUpdated) decides:
//   - fit → "compliant", fit-with-restrictions →
//     "compliant-with-restrictions", unless its valid-until component is
//     a date before today (now, UTC): then "expired";
//   - temporarily-unfit or permanently-unfit → "non-compliant";
//   - any other outcome, or no such Observation → "unknown".
func (p Pack) ComplianceOf(observations []map[string]any, now time.Time) string {
	wo := p.Canonical() + "/CodeSystem/workforce-observation"
	var latest map[string]any
	var latestAt, latestUpdated string
	for _, o := range observations {
		if !hasCoding(o["code"], wo, "fitness-for-work") {
			continue
		}
		switch o["status"] {
		case "final", "amended", "corrected":
		default:
			continue
		}
		at := instantKey(o["effectiveDateTime"])
		meta, _ := o["meta"].(map[string]any)
		updated := instantKey(meta["lastUpdated"])
		if latest == nil || at > latestAt || at == latestAt && updated > latestUpdated {
			latest, latestAt, latestUpdated = o, at, updated
		}
	}
	if latest == nil {
		return ComplianceUnknown
	}
	var status string
	switch codeIn(latest["valueCodeableConcept"], p.Canonical()+"/CodeSystem/fitness-for-work-outcome") {
	case "fit":
		status = ComplianceCompliant
	case "fit-with-restrictions":
		status = ComplianceWithRestriction
	case "temporarily-unfit", "permanently-unfit":
		return ComplianceNonCompliant
	default:
		return ComplianceUnknown
	}
	comps, _ := latest["component"].([]any)
	for _, x := range comps {
		c, _ := x.(map[string]any)
		if !hasCoding(c["code"], wo, "valid-until") {
			continue
		}
		if until, _ := c["valueDateTime"].(string); until != "" && expiredBy(datePart(until), now) {
			return ComplianceExpired
		}
	}
	return status
}

// expiredBy reports whether a validity that runs through the date (YYYY,
// YYYY-MM or YYYY-MM-DD, inclusive) has ended by now.
func expiredBy(date string, now time.Time) bool {
	today := now.UTC().Format(time.DateOnly)
	if len(date) > len(today) {
		return false
	}
	return today[:len(date)] > date
}

// instantKey orders FHIR dates and dateTimes: the instant in UTC as
// RFC 3339 with nanoseconds (partial dates at their start), or the string
// itself when it does not parse.
func instantKey(v any) string {
	s, _ := v.(string)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", time.DateOnly, "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
		}
	}
	return s
}
