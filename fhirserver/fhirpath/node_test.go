package fhirpath

import (
	"context"
	"testing"
)

func TestNode(t *testing.T) {
	pat := decodeJSON(t, []byte(`{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o1"}],
		"contact":[{"name":{"family":"X"}},{"telecom":[{"value":"1"}]}],
		"birthDate":"2000-01-01","_birthDate":{"extension":[{"url":"u","valueString":"s"}]}}`))
	contacts := pat["contact"].([]any)
	pat1 := MustCompile("name.exists() or telecom.exists() or address.exists() or organization.exists()")
	for i, c := range contacts {
		got, err := pat1.Evaluate(context.Background(), Node(c, nil, "Patient.contact"))
		if err != nil || len(got) != 1 || got[0].String() != "true" {
			t.Fatalf("contact %d: %v %v", i, got, err)
		}
	}
	// a typed data type node: choice and type functions work
	hn := Node(map[string]any{"family": "X", "given": []any{"a", "b"}}, nil, "HumanName")
	got, err := MustCompile("given.count() = 2 and $this is HumanName").Evaluate(context.Background(), hn)
	if err != nil || len(got) != 1 || got[0].String() != "true" {
		t.Fatalf("HumanName: %v %v", got, err)
	}
	// a primitive with its sibling
	bd := Node(pat["birthDate"], pat["_birthDate"].(map[string]any), "date")
	got, err = MustCompile("extension.count() = 1 and $this is date and hasValue()").Evaluate(context.Background(), bd)
	if err != nil || len(got) != 1 || got[0].String() != "true" {
		t.Fatalf("date: %v %v", got, err)
	}
	// %resource set explicitly while the focus is a sub-node
	ref := Node(map[string]any{"reference": "#o1"}, nil, "Reference")
	got, err = MustCompile("reference.substring(1) in %resource.contained.id").Evaluate(context.Background(), ref,
		WithVariable("resource", pat))
	if err != nil || len(got) != 1 || got[0].String() != "true" {
		t.Fatalf("Reference: %v %v", got, err)
	}
	// untyped type name, typed by resourceType
	if v := Node(map[string]any{"resourceType": "Patient"}, nil, ""); v.TypeName() != "FHIR.Patient" {
		t.Fatalf("resource node type %s", v.TypeName())
	}
}
