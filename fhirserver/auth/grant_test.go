package auth

import (
	"slices"
	"testing"
)

func scopePerm(c Context, typ string, ops Op) Permission {
	return Permission{Context: c, Type: typ, Ops: ops}
}

func TestParseScopes(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     Grant
		rejected []string
	}{
		{name: "empty", in: ""},
		{name: "blanks", in: " \t\n "},
		{name: "platform", in: "patients:read patients:write consultations:read consultations:write payments:write workforce:read workforce:write",
			want: Grant{Platform: AllPlatform}},
		{name: "one platform", in: "payments:write", want: Grant{Platform: PaymentsWrite}},
		{name: "meta", in: "openid fhirUser offline_access launch/patient launch launch/encounter profile online_access",
			want: Grant{Meta: AllMeta}},
		{name: "offline", in: "offline_access", want: Grant{Meta: MetaOfflineAccess}},
		{name: "v1 read", in: "patient/Observation.read",
			want: Grant{FHIR: []Permission{scopePerm(ContextPatient, "Observation", OpRead|OpSearch)}}},
		{name: "v1 write", in: "user/*.write",
			want: Grant{FHIR: []Permission{scopePerm(ContextUser, "*", OpCreate|OpUpdate|OpDelete)}}},
		{name: "v1 star", in: "system/Patient.*",
			want: Grant{FHIR: []Permission{scopePerm(ContextSystem, "Patient", OpAll)}}},
		{name: "v2 rs", in: "user/Patient.rs",
			want: Grant{FHIR: []Permission{scopePerm(ContextUser, "Patient", OpRead|OpSearch)}}},
		{name: "v2 cruds", in: "system/*.cruds",
			want: Grant{FHIR: []Permission{scopePerm(ContextSystem, "*", OpAll)}}},
		{name: "v2 single letters", in: "user/Observation.c user/Patient.d",
			want: Grant{FHIR: []Permission{scopePerm(ContextUser, "Observation", OpCreate), scopePerm(ContextUser, "Patient", OpDelete)}}},
		{name: "v2 query unsupported", in: "patient/Observation.rs?category=laboratory patients:read",
			want: Grant{Platform: PatientsRead}, rejected: []string{"patient/Observation.rs?category=laboratory"}},
		{name: "v2 wrong order", in: "user/Patient.sr", rejected: []string{"user/Patient.sr"}},
		{name: "v2 repeat", in: "user/Patient.rr", rejected: []string{"user/Patient.rr"}},
		{name: "v2 unknown letter", in: "patient/Observation.xyz", rejected: []string{"patient/Observation.xyz"}},
		{name: "no ops", in: "user/Patient. user/Patient", rejected: []string{"user/Patient.", "user/Patient"}},
		{name: "unknown type", in: "user/NotAType.read", rejected: []string{"user/NotAType.read"}},
		{name: "abstract type", in: "user/Resource.read user/DomainResource.rs", rejected: []string{"user/Resource.read", "user/DomainResource.rs"}},
		{name: "unknown context", in: "admin/Patient.read", rejected: []string{"admin/Patient.read"}},
		{name: "unknown platform", in: "patients:admin", rejected: []string{"patients:admin"}},
		{name: "case matters", in: "Patients:Read fhiruser USER/Patient.read", rejected: []string{"Patients:Read", "fhiruser", "USER/Patient.read"}},
		{name: "duplicates", in: "patients:read patients:read bogus bogus user/Patient.rs user/Patient.read",
			want:     Grant{Platform: PatientsRead, FHIR: []Permission{scopePerm(ContextUser, "Patient", OpRead|OpSearch)}},
			rejected: []string{"bogus"}},
		{name: "merge", in: "user/Patient.r user/Patient.s user/Patient.write",
			want: Grant{FHIR: []Permission{scopePerm(ContextUser, "Patient", OpAll)}}},
		{name: "wildcard subsumes", in: "user/Patient.cruds user/*.rs patient/Observation.read system/Encounter.s",
			want: Grant{FHIR: []Permission{scopePerm(ContextUser, "Patient", OpCreate|OpUpdate|OpDelete), scopePerm(ContextUser, "*", OpRead|OpSearch),
				scopePerm(ContextSystem, "Encounter", OpSearch)}}},
		{name: "narrower context kept", in: "patient/*.cruds user/Observation.rs",
			want: Grant{FHIR: []Permission{scopePerm(ContextPatient, "*", OpAll), scopePerm(ContextUser, "Observation", OpRead|OpSearch)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rejected := ParseScopes(tt.in)
			if !got.Equal(tt.want) || !slices.Equal(got.FHIR, tt.want.normalize().FHIR) {
				t.Errorf("ParseScopes(%q) = %+v (%q), want %+v (%q)", tt.in, got, got, tt.want, tt.want)
			}
			if !slices.Equal(rejected, tt.rejected) {
				t.Errorf("ParseScopes(%q) rejected %q, want %q", tt.in, rejected, tt.rejected)
			}
		})
	}
}

func TestV1V2Equivalence(t *testing.T) {
	for _, pair := range [][2]string{
		{"user/Patient.read", "user/Patient.rs"},
		{"patient/Observation.write", "patient/Observation.cud"},
		{"system/*.*", "system/*.cruds"},
		{"user/Patient.read user/Patient.write", "user/Patient.cruds"},
	} {
		a, ra := ParseScopes(pair[0])
		b, rb := ParseScopes(pair[1])
		if len(ra)+len(rb) != 0 || !a.Equal(b) || a.String() != b.String() {
			t.Errorf("%q = %q, %q = %q; want equal", pair[0], a, pair[1], b)
		}
	}
}

func TestGrantString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"user/Patient.read patients:read openid", "openid patients:read user/Patient.rs"},
		{"workforce:write system/*.* offline_access fhirUser", "fhirUser offline_access system/*.cruds workforce:write"},
		{"patient/Observation.s patient/Observation.r", "patient/Observation.rs"},
	}
	for _, tt := range tests {
		g, _ := ParseScopes(tt.in)
		if got := g.String(); got != tt.want {
			t.Errorf("ParseScopes(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		back, rejected := ParseScopes(g.String())
		if len(rejected) != 0 || !back.Equal(g) {
			t.Errorf("round trip of %q: %q, rejected %q", tt.in, back, rejected)
		}
	}
	// A hand-built grant is normalized for String; Admin is not written.
	g := Grant{Admin: true, Platform: PatientsRead, FHIR: []Permission{
		scopePerm(ContextUser, "Patient", OpRead), scopePerm(ContextUser, "Patient", OpSearch), scopePerm(ContextUser, "Bogus", OpRead), scopePerm(ContextUser, "Observation", 0),
	}}
	if got, want := g.String(), "patients:read user/Patient.rs"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if !g.WithAdmin().Admin || (Grant{}).WithAdmin().String() != "" {
		t.Error("WithAdmin")
	}
}

func TestAllScopes(t *testing.T) {
	g := AllScopes(ContextSystem)
	back, rejected := ParseScopes(g.String())
	if len(rejected) != 0 || !back.Equal(g) || !g.OfflineAccess() || !g.Has(AllPlatform) {
		t.Errorf("AllScopes = %q", g)
	}
	if u := AllScopes(0); u.FHIR[0].Context != ContextUser {
		t.Errorf("AllScopes(0) = %q", u)
	}
}

func TestNarrow(t *testing.T) {
	tests := []struct {
		name, asked, allowed, want string
	}{
		{"empty asked", "", "patients:read user/*.cruds", ""},
		{"empty allowed", "patients:read user/*.cruds", "", ""},
		{"platform", "patients:read patients:write payments:write", "patients:read workforce:read", "patients:read"},
		{"meta intersected", "openid offline_access", "openid", "openid"},
		{"same perm", "user/Patient.rs", "user/Patient.rs", "user/Patient.rs"},
		{"ops intersected", "user/Patient.cruds", "user/Patient.rs", "user/Patient.rs"},
		{"type from allowed", "user/*.rs", "user/Observation.cruds user/Patient.r", "user/Observation.rs user/Patient.r"},
		{"type from asked", "user/Observation.rs", "user/*.cruds", "user/Observation.rs"},
		{"other type", "user/Observation.rs", "user/Patient.cruds", ""},
		{"narrower context from asked", "patient/Observation.rs", "user/*.cruds", "patient/Observation.rs"},
		{"narrower context from allowed", "system/*.rs", "user/*.cruds", "user/*.rs"},
		{"patient only", "user/*.cruds", "patient/*.rs", "patient/*.rs"},
		{"v1 vs v2", "user/Patient.read", "user/Patient.rs", "user/Patient.rs"},
		{"mixed", "openid patients:read user/Observation.read system/*.write", "patients:read system/Observation.cruds openid",
			"openid patients:read system/Observation.cud user/Observation.rs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked, _ := ParseScopes(tt.asked)
			allowed, _ := ParseScopes(tt.allowed)
			got := asked.Narrow(allowed)
			if got.String() != tt.want {
				t.Errorf("Narrow(%q, %q) = %q, want %q", tt.asked, tt.allowed, got, tt.want)
			}
			// Narrowing never adds: the result narrowed by either side is itself.
			if !got.Narrow(asked).Equal(got) || !got.Narrow(allowed).Equal(got) {
				t.Errorf("Narrow(%q, %q) = %q is not below both", tt.asked, tt.allowed, got)
			}
			// Symmetric.
			if back := allowed.Narrow(asked); !back.Equal(got) {
				t.Errorf("Narrow is not symmetric: %q vs %q", back, got)
			}
		})
	}
	a := Grant{Admin: true}
	if a.Narrow(Grant{}).Admin || !a.Narrow(Grant{Admin: true}).Admin {
		t.Error("Admin must survive only if both have it")
	}
}
