package adapters

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The security label of anonymized data (v3 ObservationValue ANONYED).
const (
	SecurityLabelSystem     = "http://terminology.hl7.org/CodeSystem/v3-ObservationValue"
	SecurityLabelAnonymized = "ANONYED"
)

// The Patient elements erasure removes outright: they identify the
// person directly, or (narrative, extensions, links to other Patient
// records) may carry copies of what does.
var erasedPatientElements = []string{
	"name", "telecom", "photo", "contact", "text", "extension", "modifierExtension", "link",
}

// The parts of an address erasure removes; state, country, use, type and
// period are kept (coarse enough for statistics).
var erasedAddressParts = []string{"line", "city", "postalCode", "text", "district", "extension"}

// AnonymizePatient returns a copy of the Patient res with its identifying
// data removed or generalized, for the right to erasure:
//   - name, telecom, photo, contact, link, the narrative (text), extension
//     and modifierExtension are removed, with the extensions of primitive
//     elements (_birthDate, …);
//   - each address loses line, city, postalCode, district, text and its
//     extensions (an address left empty is removed);
//   - identifiers are removed except the platform identifier (system
//     …/sid/patient-id with the resource id as value);
//   - birthDate is generalized to its year, and removed when the year
//     could mean an age of 90 or more at now (now's year − birth year ≥
//     90: ages over 89 are not disclosed);
//   - meta.security gains ANONYED (v3 ObservationValue), once;
//   - active becomes false.
//
// gender, id and meta (but for the label) are kept, and so is every
// other element (e.g. managingOrganization, generalPractitioner).
// AnonymizePatient is idempotent.
func AnonymizePatient(res map[string]any, now time.Time) map[string]any {
	out := deepCopy(res)
	for _, k := range erasedPatientElements {
		delete(out, k)
	}
	for k := range out {
		if strings.HasPrefix(k, "_") {
			delete(out, k)
		}
	}
	if addrs, ok := out["address"].([]any); ok {
		var kept []any
		for _, x := range addrs {
			a, ok := x.(map[string]any)
			if !ok {
				continue
			}
			for _, k := range erasedAddressParts {
				delete(a, k)
			}
			for k := range a {
				if strings.HasPrefix(k, "_") {
					delete(a, k)
				}
			}
			if hasAny(a, "state", "country") {
				kept = append(kept, a)
			}
		}
		setOrDelete(out, "address", kept)
	}
	id, _ := out["id"].(string)
	if ids, ok := out["identifier"].([]any); ok {
		var kept []any
		for _, x := range ids {
			if ident, ok := x.(map[string]any); ok && isPlatformID(ident, id) {
				kept = append(kept, ident)
			}
		}
		setOrDelete(out, "identifier", kept)
	}
	if bd, ok := out["birthDate"].(string); ok {
		year, err := strconv.Atoi(bd[:min(4, len(bd))])
		if err != nil || now.Year()-year >= 90 {
			delete(out, "birthDate")
		} else {
			out["birthDate"] = bd[:4]
		}
	}
	meta, _ := out["meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		out["meta"] = meta
	}
	labels, _ := meta["security"].([]any)
	if !slices.ContainsFunc(labels, func(x any) bool {
		c, _ := x.(map[string]any)
		return c["system"] == SecurityLabelSystem && c["code"] == SecurityLabelAnonymized
	}) {
		meta["security"] = append(labels, map[string]any{"system": SecurityLabelSystem, "code": SecurityLabelAnonymized, "display": "anonymized"})
	}
	out["active"] = false
	return out
}

// isPlatformID reports whether an identifier is the platform's own id of
// the Patient: a …/sid/patient-id system and the resource id as value.
func isPlatformID(ident map[string]any, id string) bool {
	sys, _ := ident["system"].(string)
	return id != "" && ident["value"] == id && strings.HasSuffix(sys, "/sid/patient-id")
}

// IsAnonymized reports whether a resource carries the ANONYED label.
func IsAnonymized(res map[string]any) bool {
	meta, _ := res["meta"].(map[string]any)
	labels, _ := meta["security"].([]any)
	return slices.ContainsFunc(labels, func(x any) bool {
		c, _ := x.(map[string]any)
		return c["system"] == SecurityLabelSystem && c["code"] == SecurityLabelAnonymized
	})
}

// IdentifyingStrings returns the identifying values of a Patient as it was
// before erasure (names, the whole name, phone numbers, e-mail addresses,
// address lines and texts, identifier values other than the platform id),
// each at least 3 characters long: what ScrubReferencing removes from
// the free text of the resources that reference the patient.
func IdentifyingStrings(patient map[string]any) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len([]rune(s)) >= 3 && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	names, _ := patient["name"].([]any)
	for _, x := range names {
		n, _ := x.(map[string]any)
		given := strings_(n["given"])
		family, _ := n["family"].(string)
		text, _ := n["text"].(string)
		add(text)
		add(strings.Join(append(slices.Clone(given), family), " "))
		add(family)
		for _, g := range given {
			add(g)
		}
	}
	for _, k := range []string{"telecom", "address", "identifier"} {
		list, _ := patient[k].([]any)
		for _, x := range list {
			m, _ := x.(map[string]any)
			switch k {
			case "telecom":
				v, _ := m["value"].(string)
				add(v)
			case "address":
				t, _ := m["text"].(string)
				add(t)
				for _, l := range strings_(m["line"]) {
					add(l)
				}
			case "identifier":
				if !isPlatformID(m, stringOf(patient["id"])) {
					v, _ := m["value"].(string)
					add(v)
				}
			}
		}
	}
	// Longest first, so a full name is removed before its parts.
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Redacted replaces identifying data in the free text of scrubbed
// resources.
const Redacted = "[removed]"

// Keys whose string values are codes, ids or URLs, never free text:
// ScrubReferencing leaves them alone.
var notFreeText = map[string]bool{
	"reference": true, "system": true, "code": true, "url": true, "id": true, "version": true,
	"resourceType": true, "status": true, "unit": true, "contentType": true, "language": true,
}

// ScrubReferencing returns a copy of a resource that references the
// patient patientRef ("Patient/PT-12") with the copies of the patient's
// identifying data removed, and whether anything changed:
//   - every Reference to patientRef (relative, or an absolute URL ending
//     in /patientRef) loses its display and its identifier;
//   - the narrative (text) is removed, of the resource and of its
//     contained resources: it is generated from data that may name the
//     patient, and FHIR does not require it;
//   - in every other string that is free text (not a reference, system,
//     code, id, URL, status, unit, language or content type), each
//     occurrence of one of identifying (see IdentifyingStrings; compared
//     case-insensitively, as whole words) is replaced with "[removed]".
//
// Clinical content (codes, values, dates, other references) is kept, so
// the resource still counts in statistics.
func ScrubReferencing(res map[string]any, patientRef string, identifying ...string) (map[string]any, bool) {
	out := deepCopy(res)
	sc := scrubber{ref: patientRef, re: wordsPattern(identifying)}
	sc.object(out, true)
	return out, sc.changed
}

type scrubber struct {
	ref     string
	re      *regexp.Regexp
	changed bool
}

func (sc *scrubber) object(m map[string]any, resource bool) {
	if resource {
		if _, ok := m["text"].(map[string]any); ok {
			delete(m, "text")
			sc.changed = true
		}
	}
	if ref, ok := m["reference"].(string); ok && (ref == sc.ref || strings.HasSuffix(ref, "/"+sc.ref)) {
		for _, k := range []string{"display", "identifier", "_display"} {
			if _, ok := m[k]; ok {
				delete(m, k)
				sc.changed = true
			}
		}
	}
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			sc.object(x, k == "resource" && x["resourceType"] != nil)
		case []any:
			sc.array(k, x)
		case string:
			if !notFreeText[k] {
				if s := sc.redact(x); s != x {
					m[k] = s
				}
			}
		}
	}
}

func (sc *scrubber) array(key string, list []any) {
	for i, v := range list {
		switch x := v.(type) {
		case map[string]any:
			sc.object(x, key == "contained")
		case []any:
			sc.array(key, x)
		case string:
			if !notFreeText[key] {
				if s := sc.redact(x); s != x {
					list[i] = s
				}
			}
		}
	}
}

func (sc *scrubber) redact(s string) string {
	if sc.re == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range sc.re.FindAllStringIndex(s, -1) {
		// Whole words only: "Ann" is not removed from "Annual".
		if wordRuneBefore(s, m[0]) || wordRuneAfter(s, m[1]) {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(Redacted)
		last = m[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	sc.changed = true
	return b.String()
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func wordRuneBefore(s string, i int) bool {
	r, n := utf8.DecodeLastRuneInString(s[:i])
	return n > 0 && isWordRune(r)
}

func wordRuneAfter(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return n > 0 && isWordRune(r)
}

// wordsPattern matches any of words, case-insensitively, longest first;
// nil for none.
func wordsPattern(words []string) *regexp.Regexp {
	var alts []string
	for _, w := range words {
		if w = strings.TrimSpace(w); len([]rune(w)) >= 3 {
			alts = append(alts, regexp.QuoteMeta(w))
		}
	}
	if len(alts) == 0 {
		return nil
	}
	slices.SortStableFunc(alts, func(a, b string) int { return len(b) - len(a) })
	return regexp.MustCompile(`(?i)(?:` + strings.Join(alts, "|") + `)`)
}

// Erased is the body of GET /patients/{id} once the patient was erased:
// the platform id, status "anonymized" and when (the time the anonymized
// Patient was written: its meta.lastUpdated). Nothing else is shown: the
// summary's identifying fields are gone, and the medical history and
// compliance status of an erased patient are kept for statistics only,
// not served per patient.
type Erased struct {
	PatientID    string `json:"patient_id"`
	Status       string `json:"status"`
	AnonymizedAt string `json:"anonymized_at"`
}

// ErasedOf is the Erased body of an anonymized Patient.
func ErasedOf(patient map[string]any) Erased {
	meta, _ := patient["meta"].(map[string]any)
	at, _ := meta["lastUpdated"].(string)
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		at = t.UTC().Format(time.RFC3339)
	}
	return Erased{PatientID: stringOf(patient["id"]), Status: "anonymized", AnonymizedAt: at}
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

func setOrDelete(m map[string]any, key string, list []any) {
	if len(list) == 0 {
		delete(m, key)
		return
	}
	m[key] = list
}

// deepCopy copies a decoded JSON value (maps, slices and scalars, with
// json.Number or float64 numbers).
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return deepCopy(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	case json.Number, string, bool, float64, nil:
		return x
	}
	return v
}
