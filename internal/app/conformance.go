package app

import (
	"context"
	"log/slog"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/profiles"
)

// installConformance stores the loaded conformance resources so that the
// FHIR API reads and searches them (GET /fhir/StructureDefinition?url=…).
// One that cannot be installed is logged and skipped: the validator has it
// either way.
func installConformance(ctx context.Context, fhir *fhirserver.Server, set *profiles.Set, logger *slog.Logger) error {
	n := 0
	for _, typ := range []string{"StructureDefinition", "ValueSet", "CodeSystem"} {
		for _, body := range set.Resources(typ) {
			changed, err := fhir.Install(ctx, body)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				logger.Warn("profiles: a conformance resource was not installed", "type", typ, "err", err)
				continue
			}
			if changed {
				n++
			}
		}
	}
	if n > 0 {
		logger.Info("profiles: conformance resources installed", "count", n)
	}
	return nil
}
