package search

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The expected IR below is derived by hand from the FHIR R4 search page
// and the key and row encodings of package index, not printed from
// the parser.

var testNow = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func testOpts() ParseOptions {
	return ParseOptions{DefaultCount: 20, MaxCount: 100, BaseURL: "https://kiln.test/fhir", Now: testNow}
}

// params builds url.Values from name, value pairs (already decoded, as the
// HTTP layer hands them over).
func params(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

func mustParse(t *testing.T, types []string, v url.Values) *Parsed {
	t.Helper()
	p, err := testRegistry(t).Parse(types, v, testOpts())
	if err != nil {
		t.Fatalf("Parse(%v, %v): %v", types, v, err)
	}
	return p
}

func keyM(keys ...string) Match { return Match{Op: OpKey, Keys: keys} }
func notM(keys ...string) Match { return Match{Op: OpKey, Keys: keys, Not: true} }
func prefixM(p string) Match    { return Match{Op: OpKeyPrefix, Prefix: p} }

// coded lists the keys of system|code and |code for each code, in order.
func coded(param, system string, codes ...string) []string {
	var out []string
	for _, c := range codes {
		out = append(out, param+"\x1f"+system+"|"+c, param+"\x1f|"+c)
	}
	return out
}

func cl(param string, ms ...Match) Clause {
	return Clause{Param: param, Any: ms}
}
func numM(param string, c Cmp, lo, hi, approx float64) Match {
	return Match{Op: OpNumber, Param: param, Cmp: c, NumLow: lo, NumHigh: hi, Approx: approx}
}
func dateM(param string, c Cmp, lo, hi time.Time, approx float64) Match {
	return Match{Op: OpDate, Param: param, Cmp: c, Low: lo.UnixMicro(), High: hi.UnixMicro(), Approx: approx}
}
func tUTC(y, m, d, h, min, s int) time.Time {
	return time.Date(y, time.Month(m), d, h, min, s, 0, time.UTC)
}
func chainM(ref, typ string, where ...Clause) Match {
	return Match{Op: OpChain, Param: ref, Chain: &Chain{RefParam: ref, Query: &Query{Types: []string{typ}, Where: where}}}
}
func hasM(ref, typ string, where ...Clause) Match {
	return Match{Op: OpHas, Has: &Has{Param: ref, Query: &Query{Types: []string{typ}, Where: where}}}
}

const (
	gender = "http://hl7.org/fhir/administrative-gender"
	obsSt  = "http://hl7.org/fhir/observation-status"
)

func TestParseWhere(t *testing.T) {
	day := float64(24 * time.Hour / time.Microsecond)
	tests := []struct {
		name  string
		typ   string
		query url.Values
		want  []Clause
	}{
		// string
		{"string prefix normalized", "Patient", params("name", "Müller"), []Clause{cl("name", prefixM("name\x1fmuller"), prefixM("family\x1fmuller"), prefixM("given\x1fmuller"))}}, // name covers family and given
		{"string exact", "Patient", params("name:exact", "Müller"), []Clause{cl("name:exact", keyM("name:exact\x1fMüller"), keyM("family:exact\x1fMüller"), keyM("given:exact\x1fMüller"))}},
		{"string contains", "Patient", params("name:contains", "ULL"), []Clause{cl("name:contains", Match{Op: OpKeyContains, Prefix: "name\x1f", Contains: "ull"},
			Match{Op: OpKeyContains, Prefix: "family\x1f", Contains: "ull"}, Match{Op: OpKeyContains, Prefix: "given\x1f", Contains: "ull"})}},
		{"comma is OR", "Patient", params("family", "a,b"), []Clause{cl("family", prefixM("family\x1fa"), prefixM("family\x1fb"))}},
		{"escaped comma", "Patient", params("family", `a\,b`), []Clause{cl("family", prefixM("family\x1fa,b"))}},
		{"escaped backslash", "Patient", params("family", `a\\,b`), []Clause{cl("family", prefixM(`family`+"\x1f"+`a\`), prefixM("family\x1fb"))}},
		{"repeat is AND", "Patient", params("family", "a", "family", "b"), []Clause{cl("family", prefixM("family\x1fa")), cl("family", prefixM("family\x1fb"))}},

		// token
		{"token code", "Patient", params("gender", "male"), []Clause{cl("gender", keyM("gender\x1fmale"))}},
		{"token system|code", "Observation", params("code", "http://loinc.org|8480-6"), []Clause{cl("code", keyM("code\x1fhttp://loinc.org|8480-6"))}},
		{"token |code", "Observation", params("code", "|8480-6"), []Clause{cl("code", keyM("code\x1f|8480-6"))}},
		// "system|" is no key of its own: the keys that start with it.
		{"token system|", "Observation", params("code", "http://loinc.org|"), []Clause{cl("code", prefixM("code\x1fhttp://loinc.org|"))}},
		{"token not system|", "Observation", params("code:not", "http://loinc.org|"),
			[]Clause{cl("code:not", Match{Op: OpKeyPrefix, Prefix: "code\x1fhttp://loinc.org|", Not: true})}},
		// Negations must all hold: each is a clause.
		{"token not system| and code", "Observation", params("code:not", "http://loinc.org|,8480-6,http://snomed.info/sct|"),
			[]Clause{cl("code:not", Match{Op: OpKeyPrefix, Prefix: "code\x1fhttp://loinc.org|", Not: true}),
				cl("code:not", Match{Op: OpKeyPrefix, Prefix: "code\x1fhttp://snomed.info/sct|", Not: true}),
				cl("code:not", notM("code\x1f8480-6"))}},
		{"identifier system|", "Observation", params("subject:identifier", "http://mrn|"), []Clause{cl("subject:identifier", prefixM("subject:identifier\x1fhttp://mrn|"))}},
		{"token escaped bar", "Patient", params("identifier", `http://a|x\|y`), []Clause{cl("identifier", keyM("identifier\x1fhttp://a|x|y"))}},
		{"token or", "Patient", params("gender", "male,female"), []Clause{cl("gender", keyM("gender\x1fmale"), keyM("gender\x1ffemale"))}},
		{"token not is none of", "Patient", params("gender:not", "male,female"), []Clause{cl("gender:not", notM("gender\x1ffemale", "gender\x1fmale"))}},
		{"token text", "Observation", params("code:text", "Blood  Pressure"), []Clause{cl("code:text", prefixM("code:text\x1fblood pressure"))}},
		{"token of-type", "Patient", params("identifier:of-type", "http://terminology.hl7.org/CodeSystem/v2-0203|MR|446053"),
			[]Clause{cl("identifier:of-type", keyM("identifier:of-type\x1fhttp://terminology.hl7.org/CodeSystem/v2-0203|MR|446053"))}},
		// A code of a CodeSystem held here also matches code elements,
		// stored without a system ("|code").
		{"token implied system", "Patient", params("gender", gender+"|female"), []Clause{cl("gender", keyM("gender\x1f"+gender+"|female", "gender\x1f|female"))}},
		{"token not implied system", "Patient", params("gender:not", gender+"|female"), []Clause{cl("gender:not", notM("gender\x1f"+gender+"|female", "gender\x1f|female"))}},
		{"token in", "Patient", params("gender:in", "http://hl7.org/fhir/ValueSet/administrative-gender"),
			[]Clause{cl("gender:in", keyM(coded("gender", gender, "female", "male", "other", "unknown")...))}},
		{"token not-in", "Patient", params("gender:not-in", "http://hl7.org/fhir/ValueSet/administrative-gender"),
			[]Clause{cl("gender:not-in", notM(
				"gender\x1f"+gender+"|female", "gender\x1f"+gender+"|male", "gender\x1f"+gender+"|other", "gender\x1f"+gender+"|unknown",
				"gender\x1f|female", "gender\x1f|male", "gender\x1f|other", "gender\x1f|unknown"))}},
		{"token below", "Observation", params("status:below", obsSt+"|amended"), []Clause{cl("status:below", keyM(coded("status", obsSt, "amended", "corrected")...))}},
		{"token above", "Observation", params("status:above", obsSt+"|corrected"), []Clause{cl("status:above", keyM(coded("status", obsSt, "amended", "corrected")...))}},
		{"token below leaf", "Observation", params("status:below", obsSt+"|final"), []Clause{cl("status:below", keyM(coded("status", obsSt, "final")...))}},
		{"_id", "Patient", params("_id", "a1,b2"), []Clause{cl("_id", keyM("_id\x1fa1"), keyM("_id\x1fb2"))}},
		{"_tag", "Patient", params("_tag", "http://s|t"), []Clause{cl("_tag", keyM("_tag\x1fhttp://s|t"))}},

		// number
		{"number eq precision", "RiskAssessment", params("probability", "100"), []Clause{cl("probability", numM("probability", CmpEq, 99.5, 100.5, 0))}},
		{"number decimal", "RiskAssessment", params("probability", "0.8"), []Clause{cl("probability", numM("probability", CmpEq, 0.75, 0.85, 0))}},
		{"number exponent", "RiskAssessment", params("probability", "1e2"), []Clause{cl("probability", numM("probability", CmpEq, 50, 150, 0))}},
		{"number ne", "RiskAssessment", params("probability", "ne100"), []Clause{cl("probability", numM("probability", CmpNe, 99.5, 100.5, 0))}},
		{"number gt exact", "RiskAssessment", params("probability", "gt0.8"), []Clause{cl("probability", numM("probability", CmpGt, 0.8, 0.8, 0))}},
		{"number le sa eb", "RiskAssessment", params("probability", "le5,sa5,eb-5"), []Clause{cl("probability", numM("probability", CmpLe, 5, 5, 0), numM("probability", CmpSa, 5, 5, 0), numM("probability", CmpEb, -5, -5, 0))}},
		{"number plus sign decoded as space", "RiskAssessment", params("probability", " 5"), []Clause{cl("probability", numM("probability", CmpEq, 4.5, 5.5, 0))}},
		{"number ap", "RiskAssessment", params("probability", "ap100"), []Clause{cl("probability", numM("probability", CmpAp, 99.5, 100.5, 10))}},

		// date
		{"date month", "Patient", params("birthdate", "2024-03"), []Clause{cl("birthdate", dateM("birthdate", CmpEq, tUTC(2024, 3, 1, 0, 0, 0), tUTC(2024, 4, 1, 0, 0, 0), 0))}},
		{"date zone plus as space", "Patient", params("birthdate", "ge2024-03-05T10:00:00 01:00"), []Clause{cl("birthdate", dateM("birthdate", CmpGe, tUTC(2024, 3, 5, 9, 0, 0), tUTC(2024, 3, 5, 9, 0, 1), 0))}},
		{"date lt", "Patient", params("birthdate", "lt2020"), []Clause{cl("birthdate", dateM("birthdate", CmpLt, tUTC(2020, 1, 1, 0, 0, 0), tUTC(2021, 1, 1, 0, 0, 0), 0))}},
		{"date range AND", "Patient", params("birthdate", "ge2020", "birthdate", "lt2021"), []Clause{
			cl("birthdate", dateM("birthdate", CmpGe, tUTC(2020, 1, 1, 0, 0, 0), tUTC(2021, 1, 1, 0, 0, 0), 0)),
			cl("birthdate", dateM("birthdate", CmpLt, tUTC(2021, 1, 1, 0, 0, 0), tUTC(2022, 1, 1, 0, 0, 0), 0))}},
		// 2024 is a leap year: 366 days from 2024-01-01 to now, 10% of it.
		{"date ap", "Patient", params("birthdate", "ap2024-01-01"), []Clause{cl("birthdate", dateM("birthdate", CmpAp, tUTC(2024, 1, 1, 0, 0, 0), tUTC(2024, 1, 2, 0, 0, 0), 36.6*day))}},
		{"_lastUpdated", "Patient", params("_lastUpdated", "gt2024-01-01"), []Clause{cl("_lastUpdated", dateM("_lastUpdated", CmpGt, tUTC(2024, 1, 1, 0, 0, 0), tUTC(2024, 1, 2, 0, 0, 0), 0))}},

		// quantity
		{"quantity no unit", "Observation", params("value-quantity", "5.4"), []Clause{cl("value-quantity", numM("value-quantity", CmpEq, 5.35, 5.45, 0))}},
		{"quantity any system", "Observation", params("value-quantity", "le5||mg"), []Clause{cl("value-quantity", numM("value-quantity\x1f|mg", CmpLe, 5, 5, 0))}},
		{"quantity ucum canonical", "Observation", params("value-quantity", "5.4|http://unitsofmeasure.org|mg"), []Clause{cl("value-quantity", numM("value-quantity\x1fucum:g", CmpEq, 0.00535, 0.00545, 0))}},
		{"quantity ucum unknown unit", "Observation", params("value-quantity", "5|http://unitsofmeasure.org|{beats}/xyz"), []Clause{cl("value-quantity", numM("value-quantity\x1fhttp://unitsofmeasure.org|{beats}/xyz", CmpEq, 4.5, 5.5, 0))}},
		{"quantity other system", "Observation", params("value-quantity", "gt5|http://snomed.info/sct|258684004"), []Clause{cl("value-quantity", numM("value-quantity\x1fhttp://snomed.info/sct|258684004", CmpGt, 5, 5, 0))}},
		{"quantity ap", "Observation", params("value-quantity", "ap20"), []Clause{cl("value-quantity", numM("value-quantity", CmpAp, 19.5, 20.5, 2))}},

		// reference
		{"reference Type/id", "Observation", params("subject", "Patient/123"), []Clause{cl("subject", keyM("subject\x1fPatient/123"))}},
		{"reference version", "Observation", params("subject", "Patient/123/_history/2"), []Clause{cl("subject", keyM("subject\x1fPatient/123/_history/2"))}},
		{"reference bare id, several targets", "Observation", params("subject", "123"), []Clause{cl("subject", Match{Op: OpKey, BareID: "123", Keys: []string{"subject\x1fGroup/123", "subject\x1fDevice/123", "subject\x1fPatient/123", "subject\x1fLocation/123"}})}},
		{"reference bare id, one target", "Observation", params("patient", "123"), []Clause{cl("patient", keyM("patient\x1fPatient/123"))}},
		{"reference type modifier", "Observation", params("subject:Patient", "123"), []Clause{cl("subject:Patient", keyM("subject\x1fPatient/123"))}},
		{"reference own base", "Observation", params("subject", "https://kiln.test/fhir/Patient/1"), []Clause{cl("subject", keyM("subject\x1fPatient/1"))}},
		{"reference other server", "Observation", params("subject", "http://other.org/fhir/Patient/1"), []Clause{cl("subject", keyM("subject\x1fhttp://other.org/fhir/Patient/1"))}},
		{"reference identifier", "Observation", params("subject:identifier", "http://sys|123"), []Clause{cl("subject:identifier", keyM("subject:identifier\x1fhttp://sys|123"))}},
		{"reference missing", "Observation", params("subject:missing", "false"), []Clause{cl("subject:missing", Match{Op: OpMissing, Param: "subject"})}},

		// chains
		{"chain with type", "Observation", params("subject:Patient.name", "peter"), []Clause{cl("subject:Patient.name", chainM("subject", "Patient", cl("name", prefixM("name\x1fpeter"), prefixM("family\x1fpeter"), prefixM("given\x1fpeter"))))}},
		// subject targets Group, Device, Patient, Location: only Patient and Location have name.
		{"chain without type", "Observation", params("subject.name", "peter"), []Clause{cl("subject.name",
			chainM("subject", "Patient", cl("name", prefixM("name\x1fpeter"), prefixM("family\x1fpeter"), prefixM("given\x1fpeter"))),
			chainM("subject", "Location", cl("name", prefixM("name\x1fpeter"))))}},
		{"chain multi-hop", "Observation", params("subject:Patient.organization.name", "acme"), []Clause{cl("subject:Patient.organization.name",
			chainM("subject", "Patient", cl("organization.name", chainM("organization", "Organization", cl("name", prefixM("name\x1facme"))))))}},
		{"chain with modifier", "Observation", params("patient.gender:not", "male"), []Clause{cl("patient.gender:not", chainM("patient", "Patient", cl("gender:not", notM("gender\x1fmale"))))}},

		// _has
		{"has", "Patient", params("_has:Observation:patient:code", "1234"), []Clause{cl("_has:Observation:patient:code", hasM("patient", "Observation", cl("code", keyM("code\x1f1234"))))}},
		{"has nested", "Patient", params("_has:Observation:patient:_has:AuditEvent:entity:agent", "Practitioner/1"), []Clause{cl("_has:Observation:patient:_has:AuditEvent:entity:agent",
			hasM("patient", "Observation", cl("_has:AuditEvent:entity:agent", hasM("entity", "AuditEvent", cl("agent", keyM("agent\x1fPractitioner/1"))))))}},

		// uri
		{"uri", "ValueSet", params("url", "http://a.org/fhir/ValueSet/x"), []Clause{cl("url", keyM("url\x1fhttp://a.org/fhir/ValueSet/x"))}},
		{"uri below", "ValueSet", params("url:below", "http://a.org/fhir"), []Clause{cl("url:below", keyM("url\x1fhttp://a.org/fhir"), prefixM("url\x1fhttp://a.org/fhir/"))}},
		{"uri below a folder", "ValueSet", params("url:below", "http://a.org/fhir/"), []Clause{cl("url:below", prefixM("url\x1fhttp://a.org/fhir/"))}},
		{"uri above", "ValueSet", params("url:above", "http://a.org/fhir/ValueSet/x"), []Clause{cl("url:above", keyM(
			"url\x1fhttp://a.org", "url\x1fhttp://a.org/", "url\x1fhttp://a.org/fhir", "url\x1fhttp://a.org/fhir/",
			"url\x1fhttp://a.org/fhir/ValueSet", "url\x1fhttp://a.org/fhir/ValueSet/", "url\x1fhttp://a.org/fhir/ValueSet/x"))}},
		{"_profile", "Patient", params("_profile", "http://p.org/sd"), []Clause{cl("_profile", keyM("_profile\x1fhttp://p.org/sd"))}},

		// composite
		// A composite on the resource itself is searched through its
		// components' parameters (Param.Conjoined): each must match.
		{"composite keys", "Observation", params("code-value-concept", "http://loinc.org|72166-2$http://snomed.info/sct|77176002"),
			[]Clause{cl("code-value-concept", keyM("code\x1fhttp://loinc.org|72166-2")),
				cl("code-value-concept", keyM("value-concept\x1fhttp://snomed.info/sct|77176002"))}},
		{"composite quantity", "Observation", params("code-value-quantity", "http://loinc.org|8480-6$gt100"),
			[]Clause{cl("code-value-quantity", keyM("code\x1fhttp://loinc.org|8480-6")),
				cl("code-value-quantity", numM("value-quantity", CmpGt, 100, 100, 0))}},
		// (a∧b)∨(c∧d) as clauses that must all hold: (a∨c)∧(a∨d)∧(b∨c)∧(b∨d).
		{"composite quantity, two values", "Observation", params("code-value-quantity", "8480-6$gt100,8462-4$lt60"),
			[]Clause{
				cl("code-value-quantity", keyM("code\x1f8480-6"), keyM("code\x1f8462-4")),
				cl("code-value-quantity", keyM("code\x1f8480-6"), numM("value-quantity", CmpLt, 60, 60, 0)),
				cl("code-value-quantity", numM("value-quantity", CmpGt, 100, 100, 0), keyM("code\x1f8462-4")),
				cl("code-value-quantity", numM("value-quantity", CmpGt, 100, 100, 0), numM("value-quantity", CmpLt, 60, 60, 0))}},
		{"composite missing", "Observation", params("code-value-quantity:missing", "true"),
			[]Clause{cl("code-value-quantity:missing", Match{Op: OpMissing, Param: "code", Missing: true}, Match{Op: OpMissing, Param: "value-quantity", Missing: true})}},
		{"composite missing or present", "Observation", params("code-value-quantity:missing", "true,false"), nil},
		{"composite present", "Observation", params("code-value-quantity:missing", "false"),
			[]Clause{cl("code-value-quantity:missing", Match{Op: OpMissing, Param: "code"}),
				cl("code-value-quantity:missing", Match{Op: OpMissing, Param: "value-quantity"})}},
		{"composite quantity unit", "Observation", params("component-code-value-quantity", "8480-6$lt60||mm[Hg]"),
			[]Clause{cl("component-code-value-quantity", numM("component-code-value-quantity$8480-6\x1f|mm[Hg]", CmpLt, 60, 60, 0))}},
		// combo-* parameters are the union of their parts and have no rows
		// of their own: a search on one is a search on each part, OR'ed,
		// except that "none" and "missing" must hold on every part.
		{"composite combo", "Observation", params("combo-code-value-quantity", "http://loinc.org|8480-6$120"),
			[]Clause{
				cl("combo-code-value-quantity", numM("component-code-value-quantity$http://loinc.org|8480-6", CmpEq, 119.5, 120.5, 0),
					keyM("code\x1fhttp://loinc.org|8480-6")),
				cl("combo-code-value-quantity", numM("component-code-value-quantity$http://loinc.org|8480-6", CmpEq, 119.5, 120.5, 0),
					numM("value-quantity", CmpEq, 119.5, 120.5, 0))}},
		{"combo token", "Observation", params("combo-code", "http://loinc.org|8480-6"),
			[]Clause{cl("combo-code", Match{Op: OpKey, Keys: []string{"code\x1fhttp://loinc.org|8480-6"}}, Match{Op: OpKey, Keys: []string{"component-code\x1fhttp://loinc.org|8480-6"}})}},
		{"combo not", "Observation", params("combo-code:not", "http://loinc.org|8480-6"),
			[]Clause{cl("combo-code:not", Match{Op: OpKey, Not: true, Keys: []string{"code\x1fhttp://loinc.org|8480-6", "component-code\x1fhttp://loinc.org|8480-6"}})}},
		{"combo missing", "Observation", params("combo-code:missing", "true"),
			[]Clause{cl("combo-code:missing", Match{Op: OpMissing, Param: "code", Missing: true}),
				cl("combo-code:missing", Match{Op: OpMissing, Param: "component-code", Missing: true})}},
		{"composite date", "Observation", params("code-value-date", "http://loinc.org|1$ge2020"),
			[]Clause{cl("code-value-date", dateM("code-value-date$http://loinc.org|1", CmpGe, tUTC(2020, 1, 1, 0, 0, 0), tUTC(2021, 1, 1, 0, 0, 0), 0))}},

		// missing
		{"missing true", "Patient", params("birthdate:missing", "true"), []Clause{cl("birthdate:missing", Match{Op: OpMissing, Param: "birthdate", Missing: true})}},
		{"missing quantity", "Observation", params("value-quantity:missing", "true"), []Clause{cl("value-quantity:missing", Match{Op: OpMissing, Param: "value-quantity", Missing: true})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, []string{tt.typ}, tt.query)
			if len(p.Ignored) > 0 {
				t.Errorf("ignored %v", p.Ignored)
			}
			if !reflect.DeepEqual(p.Query.Where, tt.want) {
				t.Errorf("Where\n got %s\nwant %s", dumpClauses(p.Query.Where), dumpClauses(tt.want))
			}
		})
	}
}

func dumpClauses(cs []Clause) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n  %s:", c.Param)
		for _, m := range c.Any {
			fmt.Fprintf(&b, " %+v", m)
			if m.Chain != nil {
				fmt.Fprintf(&b, " chain %v%s", m.Chain.Query.Types, dumpClauses(m.Chain.Query.Where))
			}
			if m.Has != nil {
				fmt.Fprintf(&b, " has %v%s", m.Has.Query.Types, dumpClauses(m.Has.Query.Where))
			}
		}
	}
	return strings.ReplaceAll(b.String(), "\x1f", "␟")
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		typ   string
		query url.Values
		param string
	}{
		{"Patient", params("birthdate:exact", "2020"), "birthdate:exact"},
		{"Patient", params("birthdate", "2024-13"), "birthdate"},
		{"Patient", params("birthdate", "xx2024"), "birthdate"},
		{"Patient", params("birthdate", "2020-01-01T10:00"), ""}, // valid: minute precision
		{"Patient", params("gender:foo", "x"), "gender:foo"},
		{"Patient", params("name:below", "x"), "name:below"},
		{"Patient", params("gender:missing", "yes"), "gender:missing"},
		{"RiskAssessment", params("probability", "abc"), "probability"},
		{"RiskAssessment", params("probability", "1/2"), "probability"},
		{"RiskAssessment", params("probability", "0x10"), "probability"},
		{"RiskAssessment", params("probability", "1e999"), "probability"},
		{"RiskAssessment", params("probability", "5.4.3"), "probability"},
		{"Observation", params("value-quantity", "5|mg"), "value-quantity"},
		{"Observation", params("value-quantity", "5|http://unitsofmeasure.org|"), "value-quantity"},
		{"Observation", params("code", "a|b|c"), "code"},
		{"Observation", params("code-value-quantity", "8480-6"), "code-value-quantity"},
		{"Observation", params("code-value-quantity", "8480-6$"), "code-value-quantity"},
		{"Observation", params("code-value-quantity", "8480-6$abc"), "code-value-quantity"},
		{"Observation", params("code-value-quantity:missing", "maybe"), "code-value-quantity:missing"},
		{"Observation", params("code-value-quantity", "a$1,b$2,c$3,d$4,e$5,f$6,g$7"), "code-value-quantity"}, // 2^7 clauses
		{"Observation", params("code", "|"), "code"},
		{"Patient", params("gender:in", "http://example.org/ValueSet/unknown"), "gender:in"},
		{"Observation", params("status:below", "http://example.org/cs|x"), "status:below"},
		{"Observation", params("status:below", "final"), "status:below"},
		{"ValueSet", params("url:below", "urn:oid:1.2.3"), "url:below"},
		{"ValueSet", params("url:above", "urn:uuid:0f3b1c2d-0000-4000-8000-000000000001"), "url:above"},
		{"Patient", params("identifier:of-type", "http://s|MR"), "identifier:of-type"},
		{"Observation", params("subject", "Medication/1"), "subject"},
		{"Observation", params("subject", "Foo/1"), "subject"},
		{"Observation", params("subject", "a/b/c"), "subject"},
		{"Observation", params("subject", "bad id!"), "subject"},
		{"Observation", params("subject:Patient", "Group/1"), "subject:Patient"},
		{"Observation", params("subject:Medication.name", "x"), "subject:Medication.name"},
		{"Observation", params("code.name", "x"), "code.name"},
		{"Observation", params("subject:Patient.birthdate", "notadate"), "subject:Patient.birthdate"},
		{"Patient", params("_has:Observation:nope:code", "1"), "_has:Observation:nope:code"},
		{"Patient", params("_has:Observation:code:code", "1"), "_has:Observation:code:code"},
		{"Patient", params("_has:Foo:patient:code", "1"), "_has:Foo:patient:code"},
		{"Patient", params("_has:Observation:patient", "1"), "_has:Observation:patient"},
		{"Patient", params("_has:Observation:device:code", "1"), "_has:Observation:device:code"},
		{"Observation", params("code-value-quantity", "http://loinc.org|8480-6"), "code-value-quantity"},
		{"Observation", params("code-value-quantity", "a$b$c"), "code-value-quantity"},
		{"Observation", params("code-value-quantity", "a$xx5"), "code-value-quantity"},
		{"Observation", params("focus.focus.focus.focus.patient", "x"), "focus.focus.focus.focus.patient"},
		{"Observation", params("subject:Patient.link:Patient.link:Patient.link:Patient.link:Patient.name", "x"), "subject:Patient.link:Patient.link:Patient.link:Patient.link:Patient.name"},
		{"Patient", params("_has:Observation:patient:_has:Observation:patient:_has:Observation:patient:_has:Observation:patient:_has:Observation:patient:code", "x"), "_has:Observation:patient:_has:Observation:patient:_has:Observation:patient:_has:Observation:patient:_has:Observation:patient:code"},
		{"Observation", params("focus.focus", "Patient/1"), ""}, // targets where focus is not a reference are skipped
		{"Patient", params("_count", "-1"), "_count"},
		{"Patient", params("_count", "ten"), "_count"},
		{"Patient", params("_count", "1", "_count", "2"), "_count"},
		{"Patient", params("_sort", "foo"), "_sort"},
		{"Patient", params("_sort", "-nope"), "_sort"},
		{"Patient", params("_sort:desc", "name"), "_sort:desc"},
		{"Patient", params("_summary", "maybe"), "_summary"},
		{"Patient", params("_total", "all"), "_total"},
		{"Patient", params("_include", "Observation"), "_include"},
		{"Patient", params("_include", "Foo:bar"), "_include"},
		{"Patient", params("_include", "Observation:nope"), "_include"},
		{"Patient", params("_include", "Observation:code"), "_include"},
		{"Patient", params("_include", "Observation:subject:Medication"), "_include"},
		{"Patient", params("_include:deep", "Observation:subject"), "_include:deep"},
		{"Patient", params("_elements", "name;drop"), "_elements"},
		{"Patient", params("_type", "Patient"), "_type"},
		{"Observation", params("_has:Observation:patient:code", "1"), "_has:Observation:patient:code"},
	}
	for _, tt := range tests {
		t.Run(tt.param+"="+tt.query.Encode(), func(t *testing.T) {
			_, err := testRegistry(t).Parse([]string{tt.typ}, tt.query, testOpts())
			if tt.param == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *search.Error", err)
			}
			if se.Param != tt.param {
				t.Errorf("error names %q, want %q (%v)", se.Param, tt.param, err)
			}
		})
	}
	// _type in a system search: unknown types are errors.
	_, err := testRegistry(t).Parse(nil, params("_type", "Patient,Foo"), testOpts())
	var se *Error
	if !errors.As(err, &se) || se.Param != "_type" {
		t.Errorf("unknown _type: got %v", err)
	}
}

func TestParseIgnored(t *testing.T) {
	v := params("foo", "bar", "name", "peter", "_text", "x", "_content", "y", "_list", "l", "_query", "q",
		"_filter", "f", "_containedType", "contained", "_contained", "true", "_format", "json", "_pretty", "true",
		"_cursor", "abc", "family", "", "subject.nope", "x")
	p := mustParse(t, []string{"Patient"}, v)
	got := map[string]bool{}
	for _, ig := range p.Ignored {
		if ig.Reason == "" {
			t.Errorf("no reason for %s", ig.Param)
		}
		got[ig.Param] = true
	}
	for _, n := range []string{"foo", "_text", "_content", "_list", "_query", "_filter", "_containedType", "_contained", "family"} {
		if !got[n] {
			t.Errorf("%s not reported as ignored (%v)", n, p.Ignored)
		}
	}
	for _, n := range []string{"_format", "_pretty", "_cursor", "name"} {
		if got[n] {
			t.Errorf("%s reported as ignored", n)
		}
	}
	// subject is not a Patient parameter at all: an unknown parameter.
	if !got["subject.nope"] {
		t.Errorf("subject.nope not ignored: %v", p.Ignored)
	}
	want := url.Values{"name": {"peter"}}
	if !reflect.DeepEqual(p.Applied, want) {
		t.Errorf("Applied = %v, want %v", p.Applied, want)
	}
	if len(p.Query.Where) != 1 {
		t.Errorf("Where = %s", dumpClauses(p.Query.Where))
	}

	// A chain no target understands is an unknown parameter too.
	p = mustParse(t, []string{"Observation"}, params("subject:Patient.nope", "x", "subject.nope", "y"))
	if len(p.Ignored) != 2 || len(p.Query.Where) != 0 {
		t.Errorf("unknown chain: ignored %v, where %s", p.Ignored, dumpClauses(p.Query.Where))
	}
	p = mustParse(t, []string{"Patient"}, params("_has:Observation:patient:nope", "1"))
	if len(p.Ignored) != 1 || len(p.Query.Where) != 0 {
		t.Errorf("unknown chain / _has: ignored %v, where %s", p.Ignored, dumpClauses(p.Query.Where))
	}

	// Strict: every one of them is an error naming the parameter.
	for _, n := range []string{"foo", "_text", "_filter", "_contained", "subject.nope"} {
		opt := testOpts()
		opt.Strict = true
		vals := params(n, "x")
		_, err := testRegistry(t).Parse([]string{"Patient"}, vals, opt)
		var se *Error
		if !errors.As(err, &se) || se.Param != n {
			t.Errorf("strict %s: got %v", n, err)
		}
	}
	// _contained=false is the default behaviour: applied, not ignored.
	p = mustParse(t, []string{"Patient"}, params("_contained", "false"))
	if len(p.Ignored) != 0 || p.Applied.Get("_contained") != "false" {
		t.Errorf("_contained=false: ignored %v applied %v", p.Ignored, p.Applied)
	}
}

func TestParseResult(t *testing.T) {
	p := mustParse(t, []string{"Patient"}, nil)
	if p.Query.Count != 20 || p.Query.Total != TotalNone || len(p.Applied) != 0 || !reflect.DeepEqual(p.Query.Types, []string{"Patient"}) {
		t.Errorf("defaults: %+v applied %v", p.Query, p.Applied)
	}
	p = mustParse(t, []string{"Patient"}, params("_count", "10"))
	if p.Query.Count != 10 || p.Applied.Get("_count") != "10" {
		t.Errorf("_count=10: %d %v", p.Query.Count, p.Applied)
	}
	p = mustParse(t, []string{"Patient"}, params("_count", "5000"))
	if p.Query.Count != 100 || p.Applied.Get("_count") != "100" {
		t.Errorf("_count=5000: %d %v", p.Query.Count, p.Applied)
	}
	p = mustParse(t, []string{"Patient"}, params("_count", "0"))
	if p.Query.Count != 0 {
		t.Errorf("_count=0: %d", p.Query.Count)
	}
	p = mustParse(t, []string{"Patient"}, params("_summary", "count", "_count", "10"))
	if p.Query.Count != 0 || p.Query.Total != TotalAccurate || p.Query.Summary != SummaryCount {
		t.Errorf("_summary=count: %+v", p.Query)
	}
	for v, s := range map[string]Summary{"true": SummaryTrue, "text": SummaryText, "data": SummaryData, "false": SummaryFalse} {
		if p := mustParse(t, []string{"Patient"}, params("_summary", v)); p.Query.Summary != s {
			t.Errorf("_summary=%s: %v", v, p.Query.Summary)
		}
	}
	for v, m := range map[string]TotalMode{"none": TotalNone, "estimate": TotalEstimate, "accurate": TotalAccurate} {
		if p := mustParse(t, []string{"Patient"}, params("_total", v)); p.Query.Total != m {
			t.Errorf("_total=%s: %v", v, p.Query.Total)
		}
	}
	p = mustParse(t, []string{"Patient"}, params("_sort", "-birthdate,name", "_sort", "_id,-_lastUpdated"))
	wantSort := []Sort{{"birthdate", true, "date"}, {"name", false, "string"}, {"_id", false, ""}, {"_lastUpdated", true, ""}}
	if !reflect.DeepEqual(p.Query.Sort, wantSort) {
		t.Errorf("_sort: %v", p.Query.Sort)
	}
	p = mustParse(t, []string{"Patient"}, params("_elements", "id, name,birthDate"))
	if !reflect.DeepEqual(p.Query.Elements, []string{"id", "name", "birthDate"}) {
		t.Errorf("_elements: %v", p.Query.Elements)
	}
	p = mustParse(t, []string{"Observation"}, params(
		"_include", "Observation:subject:Patient",
		"_include", "Observation:encounter",
		"_include:iterate", "Patient:organization",
		"_include:recurse", "Patient:general-practitioner:Practitioner",
		"_revinclude", "Provenance:target",
		"_revinclude:iterate", "*"))
	if len(p.Ignored) != 1 || p.Ignored[0].Param != "_revinclude:iterate" || p.Applied.Has("_revinclude:iterate") {
		t.Errorf("_revinclude=* not ignored: %v %v", p.Ignored, p.Applied)
	}
	wantInc := []Include{
		{Source: "Observation", Param: "subject", Target: "Patient"},
		{Source: "Observation", Param: "encounter"},
		{Source: "Patient", Param: "organization", Iterate: true},
		{Source: "Patient", Param: "general-practitioner", Target: "Practitioner", Iterate: true},
	}
	if !reflect.DeepEqual(p.Query.Include, wantInc) {
		t.Errorf("_include: %+v", p.Query.Include)
	}
	wantRev := []Include{{Source: "Provenance", Param: "target"}}
	if !reflect.DeepEqual(p.Query.RevInclude, wantRev) {
		t.Errorf("_revinclude: %+v", p.Query.RevInclude)
	}
	p = mustParse(t, []string{"Observation"}, params("_include", "*"))
	if !reflect.DeepEqual(p.Query.Include, []Include{{Param: "*"}}) {
		t.Errorf("_include=*: %+v", p.Query.Include)
	}
	if got := p.Applied.Get("_include"); got != "*" {
		t.Errorf("applied _include = %q", got)
	}
	// MaxCount also clamps the default.
	opt := testOpts()
	opt.DefaultCount, opt.MaxCount = 50, 10
	if p, _ := testRegistry(t).Parse([]string{"Patient"}, nil, opt); p.Query.Count != 10 {
		t.Errorf("default clamped: %d", p.Query.Count)
	}
}

func TestParseSystem(t *testing.T) {
	// _type lists the types; _id is a Resource parameter, shared.
	p := mustParse(t, nil, params("_type", "Patient,Observation", "_id", "1"))
	if !reflect.DeepEqual(p.Query.Types, []string{"Patient", "Observation"}) {
		t.Errorf("Types = %v", p.Query.Types)
	}
	want := []Clause{cl("_id", keyM("_id\x1f1"))}
	if !reflect.DeepEqual(p.Query.Where, want) {
		t.Errorf("Where %s", dumpClauses(p.Query.Where))
	}
	if p.Applied.Get("_type") != "Patient,Observation" {
		t.Errorf("Applied %v", p.Applied)
	}
	// name is defined separately on Patient and Organization: one match
	// per type, restricted to it.
	p = mustParse(t, nil, params("_type", "Patient,Organization", "name", "x"))
	// Patient's name also searches family and given (which it covers).
	m1, f1, g1, m2 := prefixM("name\x1fx"), prefixM("family\x1fx"), prefixM("given\x1fx"), prefixM("name\x1fx")
	m1.Type, f1.Type, g1.Type, m2.Type = "Patient", "Patient", "Patient", "Organization"
	if want := []Clause{cl("name", m1, f1, g1, m2)}; !reflect.DeepEqual(p.Query.Where, want) {
		t.Errorf("Where %s", dumpClauses(p.Query.Where))
	}
	// Without _type only Resource parameters exist.
	p = mustParse(t, nil, params("_lastUpdated", "2024", "name", "x", "_sort", "_lastUpdated"))
	if len(p.Query.Types) != 0 || len(p.Query.Where) != 1 || len(p.Ignored) != 1 || p.Ignored[0].Param != "name" {
		t.Errorf("system search: types %v where %s ignored %v", p.Query.Types, dumpClauses(p.Query.Where), p.Ignored)
	}
	// A parameter missing on one of the types is unknown.
	p = mustParse(t, nil, params("_type", "Patient,Observation", "gender", "male"))
	if len(p.Ignored) != 1 || len(p.Query.Where) != 0 {
		t.Errorf("gender on Patient,Observation: ignored %v", p.Ignored)
	}
	if _, err := testRegistry(t).Parse(nil, params("_type", "Patient,Observation", "_sort", "gender"), testOpts()); err == nil {
		t.Error("_sort on a parameter of one type only: no error")
	}
}

func TestParseDeterministic(t *testing.T) {
	v := params("name", "a", "birthdate", "ge2020", "gender", "male", "_count", "3", "foo", "x", "bar", "y")
	a := mustParse(t, []string{"Patient"}, v)
	for range 20 {
		b := mustParse(t, []string{"Patient"}, v)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Parse is not deterministic:\n%+v\n%+v", a, b)
		}
	}
	if a.Query.Where[0].Param != "birthdate" || a.Ignored[0].Param != "bar" {
		t.Errorf("not in name order: %s %v", dumpClauses(a.Query.Where), a.Ignored)
	}
}

func TestParseRevIncludeAll(t *testing.T) {
	p := mustParse(t, []string{"Patient"}, params("_revinclude", "*"))
	for _, want := range []Include{
		{Source: "Observation", Param: "subject", Target: "Patient"},
		{Source: "Observation", Param: "patient", Target: "Patient"},
		{Source: "Provenance", Param: "target", Target: "Patient"},
		{Source: "Patient", Param: "link", Target: "Patient"},
	} {
		if !slices.Contains(p.Query.RevInclude, want) {
			t.Errorf("_revinclude=* lacks %+v", want)
		}
	}
	for _, inc := range p.Query.RevInclude {
		if inc.Target != "Patient" || inc.Param == "*" || inc.Iterate {
			t.Errorf("_revinclude=*: unexpected %+v", inc)
		}
		if inc.Source == "Observation" && inc.Param == "encounter" {
			t.Errorf("Observation.encounter cannot refer to a Patient")
		}
	}
	if p.Applied.Get("_revinclude") != "*" || len(p.Ignored) != 0 {
		t.Errorf("applied %v ignored %v", p.Applied, p.Ignored)
	}
	// A system search has no type to expand it for.
	p = mustParse(t, nil, params("_revinclude", "*"))
	if len(p.Query.RevInclude) != 0 || len(p.Ignored) != 1 {
		t.Errorf("system _revinclude=*: %+v %v", p.Query.RevInclude, p.Ignored)
	}
}

func TestParseStrictNamesAll(t *testing.T) {
	opt := testOpts()
	opt.Strict = true
	_, err := testRegistry(t).Parse([]string{"Patient"}, params("foo", "bar", "_nonsense", "1", "family", "smith"), opt)
	var se *Error
	if !errors.As(err, &se) || se.Param != "_nonsense" || !strings.Contains(se.Error(), "foo") {
		t.Errorf("got %v, want an error naming _nonsense and foo", err)
	}
}

// TestParseFoldsStringValues: the query side folds a string value with
// Normalize, as the index side folds the stored string (family=Nguyễn
// and family=nguyen look up the same key), while :exact keeps the value
// as written.
func TestParseFoldsStringValues(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		want        Match
	}{
		{"family", "Nguyễn", prefixM("family\x1fnguyen")},
		{"family", "Nguye\u0302\u0303n", prefixM("family\x1fnguyen")},
		{"family", "İstanbul", prefixM("family\x1fistanbul")},
		{"family:contains", "Ễ", Match{Op: OpKeyContains, Prefix: "family\x1f", Contains: "e"}},
		{"family:exact", "Nguyễn", keyM("family:exact\x1fNguyễn")},
	} {
		p := mustParse(t, []string{"Patient"}, params(tt.name, tt.value))
		if len(p.Query.Where) != 1 || len(p.Query.Where[0].Any) != 1 {
			t.Fatalf("%s=%s: %+v", tt.name, tt.value, p.Query.Where)
		}
		if got := p.Query.Where[0].Any[0]; got.Op != tt.want.Op || got.Prefix != tt.want.Prefix || got.Contains != tt.want.Contains || !slices.Equal(got.Keys, tt.want.Keys) {
			t.Errorf("%s=%s: %+v, want %+v", tt.name, tt.value, got, tt.want)
		}
	}
}
