package fhirserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// ScopeAuthorizer is the Authorizer of an authenticated server: the
// caller's grant (the auth.Principal the bearer-token middleware put in
// the context) against auth's policy table, for the partition this
// server serves.
type ScopeAuthorizer struct{ Partition auth.Partition }

// Authorize maps the interaction onto the policy table. Batch and
// transaction Bundles pass here as a whole; each of their entries is
// run as the interaction it names and authorized on its own, so one
// forbidden entry fails a transaction as a whole.
func (a ScopeAuthorizer) Authorize(ctx context.Context, acc Access) error {
	switch acc.Interaction {
	case Capabilities, Batch, Transaction:
		return nil
	}
	p, ok := auth.FromContext(ctx)
	if !ok {
		return outcome.New(http.StatusUnauthorized, "login", "authentication required")
	}
	name := string(acc.Interaction)
	if acc.Interaction == Operation {
		name = acc.Operation
	}
	in, known := auth.LookupInteraction(name)
	if !known {
		return outcome.New(http.StatusForbidden, "forbidden", "no scope grants "+name)
	}
	ops := []auth.Op{in.Op}
	if in.Also != 0 {
		ops = append(ops, in.Also)
	}
	req := auth.Request{Partition: a.Partition, Type: acc.Type, Admin: in.Admin}
	for _, op := range ops {
		req.Op = op
		if err := p.Grant.Allows(req); err != nil {
			var d *auth.Denied
			if errors.As(err, &d) {
				return outcome.New(http.StatusForbidden, "forbidden", d.Error())
			}
			return outcome.New(http.StatusForbidden, "forbidden", err.Error())
		}
	}
	req.Op = in.Op
	if p.Grant.NeedsPatientCompartment(req) {
		// patient/ scopes limit access to one patient's compartment, which
		// needs a launch context Kiln does not issue yet.
		return outcome.New(http.StatusForbidden, "forbidden",
			"patient/ scopes need a launch patient, which this server does not provide; use user/ or system/ scopes")
	}
	return nil
}
