package outcome

import (
	"encoding/json"
	"fmt"
	"strings"
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

// Render lists at most MaxIssues issues within a byte cap, then one
// summary issue that counts the rest (summaries a validator made
// included) with the worst severity among them and code too-costly.
func TestRenderCapsIssues(t *testing.T) {
	many := func(n int, sev string) []Issue {
		out := make([]Issue, n)
		for i := range out {
			out[i] = Issue{Severity: sev, Code: "required", Diagnostics: "minimum required = 1", Expression: []string{fmt.Sprintf("Patient.identifier[%d].system", i)}}
		}
		return out
	}
	tests := []struct {
		name     string
		issues   []Issue
		maxBytes int
		listed   int    // issues before the summary
		more     string // the summary's count; "" none
		severity string
	}{
		{"few issues are listed as they are", many(3, "error"), 0, 3, "", ""},
		{"exactly the cap: no summary", many(MaxIssues, "warning"), 1 << 30, MaxIssues, "", ""},
		{"past the cap: a count", append(many(MaxIssues, "warning"), many(1500, "error")...), 1 << 30, MaxIssues, "1500 more", "error"},
		{"a validator's count is added", append(many(10, "error"), Omitted(199990, "fatal")), 0, 10, "199990 more", "fatal"},
		{"the byte cap binds first", many(MaxIssues, "error"), 4 << 10, -1, "more", "error"},
		{"one issue always listed", many(2, "warning"), 1, 1, "1 more", "warning"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := RenderWithin(tt.issues, tt.maxBytes)
			var got struct{ Issue []Issue }
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			n := len(got.Issue)
			if tt.more != "" {
				n--
				last := got.Issue[n]
				if last.Code != "too-costly" || last.Severity != tt.severity || !strings.Contains(last.Diagnostics, tt.more) {
					t.Errorf("summary %+v, want %q %s", last, tt.more, tt.severity)
				}
			} else if n > 0 && got.Issue[n-1].Code == "too-costly" {
				t.Errorf("a summary with nothing left out: %+v", got.Issue[n-1])
			}
			if tt.listed >= 0 && n != tt.listed {
				t.Errorf("listed %d issues, want %d", n, tt.listed)
			}
			limit := tt.maxBytes
			if limit <= 0 {
				limit = MaxBytes
			}
			if tt.listed < 0 && len(b) > limit+512 {
				t.Errorf("%d bytes for a cap of %d", len(b), limit)
			}
		})
	}
	// The default cap keeps 200,000 issues (48.7 MB in issue 22) small.
	if b := Render(many(200_000, "error")); len(b) > MaxBytes+512 {
		t.Errorf("200,000 issues render as %d bytes", len(b))
	}
}
