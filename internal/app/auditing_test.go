package app

import (
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	"github.com/kiln-fhir/kiln/fhirserver/auth"
)

// TestAuthEventSubtypes: each action of the issuer's endpoints becomes
// its own AuditEvent subtype, with the caller as agent and a failure as a
// minor-failure outcome.
func TestAuthEventSubtypes(t *testing.T) {
	for action, want := range map[string]audit.Code{
		"login": audit.SubtypeLogin, "token": audit.SubtypeToken, "logout": audit.SubtypeLogout,
		"revoke": audit.SubtypeRevoke, "introspect": audit.SubtypeIntrospect,
	} {
		for _, ok := range []bool{true, false} {
			ev := authEvent(auth.Event{Action: action, Subject: "client/kc-1", IP: "127.0.0.1", Success: ok})
			if ev.Subtype != want || ev.Agent.Who != "client/kc-1" || ev.Agent.Address != "127.0.0.1" {
				t.Errorf("%s: subtype %v, agent %+v; want %v", action, ev.Subtype, ev.Agent, want)
			}
			if failed := ev.Outcome == audit.OutcomeMinor; failed == ok {
				t.Errorf("%s success %v: outcome %q", action, ok, ev.Outcome)
			}
		}
	}
}
