package navigate

import (
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

var walk = Walk{MaxCollection: 1000}

func TestChildren(t *testing.T) {
	obs := map[string]any{"resourceType": "Observation", "status": "final",
		"valueQuantity": map[string]any{"value": 1.5, "unit": "kg"},
		"_status":       map[string]any{"id": "s1"},
	}
	v := value.Node(obs, nil, model.ResourceType(obs))
	// a choice element by its base name, typed by its key
	c, err := Children(walk, nil, v, "value")
	if err != nil || len(c) != 1 || c[0].TypeName() != "FHIR.Quantity" {
		t.Fatalf("value: %v %v", c, err)
	}
	// a primitive keeps its "_name" sibling, which holds its id
	c, err = Children(walk, nil, v, "status")
	if err != nil || len(c) != 1 || c[0].Sibling()["id"] != "s1" {
		t.Fatalf("status: %v %v", c, err)
	}
	if id, _ := Children(walk, nil, c[0], "id"); len(id) != 1 || id[0].String() != "s1" {
		t.Errorf("status.id: %v", id)
	}
	// the typed name of a choice element is an error
	if _, err := Children(walk, nil, v, "valueQuantity"); err == nil {
		t.Error("valueQuantity: no error")
	}
	// all children, in definition order
	all, err := AllChildren(walk, nil, v)
	if err != nil || len(all) != 2 || all[0].String() != "final" {
		t.Errorf("all children: %v %v", all, err)
	}
	if _, err := Children(Walk{MaxCollection: 1}, nil, value.Node(map[string]any{"a": []any{1.0, 2.0}}, nil, nil), "a"); err == nil {
		t.Error("MaxCollection not applied")
	}
}
