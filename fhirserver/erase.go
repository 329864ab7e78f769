package fhirserver

import (
	"context"
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/internal/compartment"
	"github.com/kiln-fhir/kiln/fhirserver/internal/erasure"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Erasure is how a patient is erased: the policy (which elements identify
// someone) comes from the caller; ErasePatient is the mechanism.
type Erasure = erasure.Policy

// Erased is what ErasePatient did.
type Erased = erasure.Result

// ErasePatient erases Patient/id for the right to erasure (see
// erasure.Eraser.Patient), with this service's versions and index rows.
// It is authorized by the caller (the platform endpoint's policy), not as
// a FHIR interaction. Unknown: a 404 outcome.
func (s *Server) ErasePatient(ctx context.Context, id string, e Erasure) (Erased, error) {
	out, err := s.eraser().Patient(ctx, id, e)
	return out, clientError(err)
}

// eraser erases from this service's store, writing versions as the
// service's updates do, less the profile checks: an anonymized Patient no
// longer has what the national profile requires.
func (s *Server) eraser() *erasure.Eraser {
	return &erasure.Eraser{
		Store:    s.store,
		Transact: s.transact,
		InTx: func(ctx context.Context) bool {
			_, inTx := txFrom(ctx)
			return inTx
		},
		Next: func(ctx context.Context, cur *store.Version, body []byte) (store.Write, error) {
			w, err := s.stamp(ctx, cur.Type, cur.ID, cur, body, store.MethodUpdate)
			if err != nil {
				return w, err
			}
			w.Index, err = s.indexRows(ctx, cur.Type, w.Body)
			return w, err
		},
		Compartment: func(id string) ([]string, []search.Match) {
			types := slices.DeleteFunc(slices.Clone(compartment.Types()), func(t string) bool { return t == "Patient" })
			var members []search.Match
			for _, t := range types {
				members = append(members, compartment.Matches(t, id)...)
			}
			return types, members
		},
		Logger: s.cfg.Logger,
	}
}
