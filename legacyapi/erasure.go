package legacyapi

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/adapters"
	"github.com/kiln-fhir/kiln/fhirserver"
)

// FHIREraser is the PatientEraser of a server: the FHIR service's erasure
// mechanism (fhirserver.Server.ErasePatient: every version of the Patient
// and of the resources referencing it, with their index rows, in one
// store transaction) driven by the platform's policy in adapters:
// AnonymizePatient for each version of the Patient, ScrubReferencing for
// the resources that reference it, with the identifying values collected
// from the Patient's versions as they are anonymized (the mechanism
// anonymizes the Patient before it scrubs references). A second erasure
// (anonymizing changes nothing) returns the first one's time.
type FHIREraser struct {
	FHIR *fhirserver.Server
	// Now is the clock for the age rule of AnonymizePatient; nil: time.Now.
	Now func() time.Time
}

// ErasePatient erases Patient/id; see PatientEraser.
func (e FHIREraser) ErasePatient(ctx context.Context, id string) (time.Time, error) {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	at := now()
	var mu sync.Mutex
	var identifying []string
	erasure := fhirserver.Erasure{
		Anonymize: func(res map[string]any) map[string]any {
			mu.Lock()
			for _, s := range adapters.IdentifyingStrings(res) {
				if !slices.Contains(identifying, s) {
					identifying = append(identifying, s)
				}
			}
			mu.Unlock()
			return adapters.AnonymizePatient(res, at)
		},
		Scrub: func(res map[string]any, ref string) (map[string]any, bool) {
			mu.Lock()
			words := slices.Clone(identifying)
			mu.Unlock()
			return adapters.ScrubReferencing(res, ref, words...)
		},
	}
	// The erasure is one interaction of the service, the delete of
	// Patient/id, allowed by the platform's policy before it got here:
	// recorded once, with its outcome.
	var done fhirserver.Erased
	err := e.FHIR.Audited(ctx, fhirserver.Access{Interaction: fhirserver.Delete, Type: "Patient", ID: id}, func(ctx context.Context) (err error) {
		done, err = e.FHIR.ErasePatient(ctx, id, erasure)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return done.At, nil
}
