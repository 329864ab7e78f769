package outcome

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestResourceIsAnOperationOutcome(t *testing.T) {
	e := New(400, "structure", `unknown element "foo"`, "Patient.foo")
	var got struct {
		ResourceType string
		Issue        []struct {
			Severity, Code, Diagnostics string
			Expression                  []string
		}
	}
	if err := json.Unmarshal(e.Resource(), &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceType != "OperationOutcome" || len(got.Issue) != 1 || got.Issue[0].Severity != "error" ||
		got.Issue[0].Code != "structure" || got.Issue[0].Expression[0] != "Patient.foo" {
		t.Errorf("unexpected OperationOutcome %s", e.Resource())
	}
	if want := `Bad Request: Patient.foo: unknown element "foo"`; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
}

func TestAsFindsWrappedErrors(t *testing.T) {
	e := New(404, "not-found", "gone fishing")
	got, ok := As(fmt.Errorf("reading: %w", e))
	if !ok || got != e {
		t.Errorf("As did not find the wrapped *Error")
	}
	if _, ok := As(fmt.Errorf("plain")); ok {
		t.Error("As found an *Error in a plain error")
	}
}
