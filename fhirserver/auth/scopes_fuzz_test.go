package auth

import (
	"slices"
	"strings"
	"testing"
)

func FuzzParseScopes(f *testing.F) {
	for _, s := range []string{
		"",
		"patients:read patients:write consultations:read payments:write workforce:read",
		"openid fhirUser offline_access launch/patient",
		"patient/Observation.read user/*.write system/Patient.*",
		"user/Patient.rs system/*.cruds patient/Observation.rs?category=laboratory",
		"patient/Observation.xyz user/NotAType.read patients:admin",
		"user/Patient.cruds user/*.rs patient/Observation.read system/Encounter.s",
		"user/.rs /Patient.r user/Patient.rs.rs \x00 \xff",
	} {
		f.Add(s, "system/*.cruds patients:read openid")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		g, rejected := ParseScopes(s)
		for _, r := range rejected {
			if r == "" || strings.ContainsAny(r, " \t\n") || !slices.Contains(strings.Fields(s), r) {
				t.Fatalf("bad rejected scope %q", r)
			}
		}
		str := g.String()
		back, rejected := ParseScopes(str)
		if len(rejected) != 0 || !back.Equal(g) || back.String() != str {
			t.Fatalf("ParseScopes(%q) = %q, re-parsed as %q (rejected %q)", s, str, back, rejected)
		}
		// Narrowing by anything stays below both sides and round-trips.
		o, _ := ParseScopes(other)
		n := g.Narrow(o)
		if !n.Narrow(g).Equal(n) || !n.Narrow(o).Equal(n) || !n.Equal(o.Narrow(g)) {
			t.Fatalf("Narrow(%q, %q) = %q", str, o, n)
		}
		if back, _ := ParseScopes(n.String()); !back.Equal(n) {
			t.Fatalf("Narrow result %q does not round-trip", n)
		}
		// Allows never panics and never grants more than its parts.
		for _, typ := range []string{"", "Patient", "Claim"} {
			for op := OpCreate; op <= OpSearch; op <<= 1 {
				r := Request{Partition: PartitionClinical, Type: typ, Op: op}
				if n.Allows(r) == nil && (g.Allows(r) != nil || o.Allows(r) != nil) {
					t.Fatalf("Narrow(%q, %q) = %q allows %v", str, o, n, r)
				}
			}
		}
	})
}
