package adapters

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certTypes reads the pack's certification-type CodeSystem, as the server
// hands it to the Requirements.
func certTypes(t testing.TB) []Concept {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "profiles", "national", "CodeSystem-certification-type.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ConceptsOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type complianceCase struct {
	Name         string          `json:"name"`
	Role         string          `json:"role"`
	Now          time.Time       `json:"now"`
	Requirements json.RawMessage `json:"requirements"`
	Screenings   []struct {
		MedicalStatus  string    `json:"medical_status"`
		ScreeningDate  string    `json:"screening_date"`
		ExpiryDate     string    `json:"expiry_date"`
		RecordedAt     time.Time `json:"recorded_at"`
		Certifications []string  `json:"certifications"`
	} `json:"screenings"`
	Want struct {
		Status              string `json:"status"`
		CertificationsValid bool   `json:"certifications_valid"`
		NextScreeningDue    string `json:"next_screening_due"`
		ComplianceScore     int    `json:"compliance_score"`
	} `json:"want"`
}

// The golden table of the compliance formula: each case's answer was
// worked out by hand from the formula in WorkerCompliance's comment.
func TestWorkerComplianceTable(t *testing.T) {
	var cases []complianceCase
	readJSON(t, filepath.Join("testdata", "workforce", "compliance_cases.json"), &cases)
	if len(cases) < 15 {
		t.Fatalf("%d cases; the issue asks for at least 15", len(cases))
	}
	types := certTypes(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			req := DefaultRequirements()
			if c.Requirements != nil {
				var err error
				if req, err = LoadRequirements(c.Requirements); err != nil {
					t.Fatal(err)
				}
			}
			req = req.WithCertificationTypes(types)
			var in []Screening
			for _, s := range c.Screenings {
				in = append(in, Screening(s))
			}
			got := req.WorkerCompliance(c.Role, in, c.Now)
			want := WorkerCompliance(c.Want)
			if got != want {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// randomScreenings draws up to 4 screenings around now with names from a
// pool that mixes required, alternative, aliased and unknown names.
func randomScreenings(rng *rand.Rand, now time.Time) []Screening {
	pool := []string{"OEUK Medical", "BOSIET", "foet", "H2S", "h2s-awareness", "First aid at work", "Crane banksman", "offshore medical certificate"}
	statuses := append(MedicalStatuses, "")
	n := rng.Intn(5)
	out := make([]Screening, n)
	for i := range out {
		sd := now.AddDate(0, 0, -rng.Intn(800))
		ed := sd.AddDate(0, 0, rng.Intn(800))
		var certs []string
		for _, name := range pool {
			if rng.Intn(3) == 0 {
				certs = append(certs, name)
			}
		}
		out[i] = Screening{
			MedicalStatus:  statuses[rng.Intn(len(statuses))],
			ScreeningDate:  sd.Format(time.DateOnly),
			ExpiryDate:     ed.Format(time.DateOnly),
			RecordedAt:     sd.Add(time.Duration(rng.Intn(86400)) * time.Second),
			Certifications: certs,
		}
	}
	return out
}

// Properties of the formula over a seeded sample: the score stays in
// 0–100; adding a certification to a screening valid today never lowers
// it; moving the clock forward with nothing else changed never raises it
// (nor turns certifications_valid from false to true).
func TestWorkerComplianceProperties(t *testing.T) {
	req := DefaultRequirements().WithCertificationTypes(certTypes(t))
	roles := []string{"Offshore production operator", "Field operator", "Chef", "roustabout"}
	names := []string{"OEUK Medical", "BOSIET", "FOET", "H2S", "h2s awareness", "Crane banksman"}
	rng := rand.New(rand.NewSource(24))
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 20000 {
		now := base.AddDate(0, 0, rng.Intn(400)-200)
		role := roles[rng.Intn(len(roles))]
		in := randomScreenings(rng, now)
		got := req.WorkerCompliance(role, in, now)
		if got.ComplianceScore < 0 || got.ComplianceScore > 100 {
			t.Fatalf("#%d: score %d out of 0–100: %+v", i, got.ComplianceScore, in)
		}

		// add a valid certification
		today := now.Format(time.DateOnly)
		for j := range in {
			if in[j].ExpiryDate < today {
				continue
			}
			more := append([]Screening(nil), in...)
			more[j].Certifications = append(append([]string(nil), in[j].Certifications...), names[rng.Intn(len(names))])
			if after := req.WorkerCompliance(role, more, now); after.ComplianceScore < got.ComplianceScore {
				t.Fatalf("#%d: adding %q to screening %d lowered the score %d → %d\n%+v", i, more[j].Certifications[len(more[j].Certifications)-1], j, got.ComplianceScore, after.ComplianceScore, in)
			}
			break
		}

		// move the clock forward
		later := now.Add(time.Duration(rng.Intn(400*24)) * time.Hour)
		after := req.WorkerCompliance(role, in, later)
		if after.ComplianceScore > got.ComplianceScore || after.CertificationsValid && !got.CertificationsValid {
			t.Fatalf("#%d: moving the clock %s → %s raised %+v → %+v\n%+v", i, now, later, got, after, in)
		}
	}
}

func TestLoadRequirementsErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{}`, `"roles" is missing`},
		{`{"roles": [], "role": []}`, `unknown field "role"`},
		{`{"roles": [{"names": [], "requires": []}]}`, `roles[0].names: at least one role name`},
		{`{"roles": [{"names": ["a"], "requires": [[]]}]}`, `roles[0].requires[0]: an empty list`},
		{`{"roles": [{"names": ["a"], "requires": [["H2S", " "]]}]}`, `roles[0].requires[0][1]: a blank certification name`},
		{`{"roles": [{"names": ["a b"], "requires": []}, {"names": ["x", "A-b"], "requires": []}]}`, `roles[1].names[1]: "A-b" is also roles[0].names[0]`},
		{`{"roles": [{"names": ["off*shore"], "requires": []}]}`, `'*' may only end a name`},
		{`{"roles": [{"names": ["*"], "requires": []}]}`, `roles[0].names[0]: a blank role name`},
		{`{"aliases": {"H2S": "h2s", "h2s ": "x"}, "roles": []}`, `is given twice`},
		{`{"roles": []} {}`, `more than one JSON value`},
		{`[`, `workforce requirements:`},
	} {
		_, err := LoadRequirements([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.file, err, c.want)
		}
	}
}

// A loaded file replaces the built-in table: exact names win over
// prefixes, the longest prefix wins, aliases resolve through the
// CodeSystem.
func TestLoadRequirementsReplacesDefault(t *testing.T) {
	r, err := LoadRequirements([]byte(`{
		"aliases": {"Gas course": "H2S awareness"},
		"roles": [
			{"names": ["deck *"], "requires": [["BOSIET"]]},
			{"names": ["deck crane *"], "requires": [["Working at height"]]},
			{"names": ["deck crane operator"], "requires": [["first-aid"]]}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	r = r.WithCertificationTypes(certTypes(t))
	for role, want := range map[string]string{
		"Deck hand": "[[BOSIET]]", "deck crane driver": "[[Working at height]]", "Deck Crane Operator": "[[first-aid]]",
		"deck": "[]", "Offshore production operator": "[]",
	} {
		if got := strings.ReplaceAll(strings.Trim(jsonString(t, r.Required(role)), "\n"), "null", "[]"); got != strings.ReplaceAll(strings.ReplaceAll(want, "[[", `[["`), "]]", `"]]`) && !(want == "[]" && got == "[]") {
			t.Errorf("Required(%q) = %s, want %s", role, got, want)
		}
	}
	if k := r.CertificationKey("gas COURSE"); k != "h2s-awareness" {
		t.Errorf("alias → %q, want h2s-awareness", k)
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
