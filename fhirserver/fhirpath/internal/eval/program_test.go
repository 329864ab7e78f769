package eval

import "testing"

// The caller owns Evaluate's result (TestFixResultNotAliased in package
// fhirpath): for that, the literal walk knows every node type the parser
// builds.
func TestFixResultNotAliased(t *testing.T) {
	// Only the shape of the tree matters here: the functions are not run.
	lib := Library{"where": {Min: 1, Max: 1}, "exists": {Max: 1}, "aggregate": {Min: 1, Max: 2}, "ofType": {Min: 1, Max: 1}, "iif": {Min: 2, Max: 3}}
	for _, expr := range []string{"Patient.name[0].given.where($this = 'a' and $index > 0).exists() implies -(1|2).aggregate($total + $this, 0) < 3",
		"(%resource.id as string) is FHIR.string", "Patient.id.ofType(string).iif(true, 'x', {})", "-Patient.multipleBirth + 5 'mg'.value"} {
		p, err := Compile(expr, lib)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if p.opaque {
			t.Errorf("%s: the literal walk met an unknown node type", expr)
		}
	}
}
