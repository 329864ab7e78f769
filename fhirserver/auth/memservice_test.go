package auth

import (
	"context"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/authtest"
)

// newMemService is a Service over in-memory records and a fresh random
// master key, issuing for https://kiln.test; now may be nil (the clock).
func newMemService(tb testing.TB, ctx context.Context, now func() time.Time) *Service {
	tb.Helper()
	svc, err := NewService(ctx, Config{Records: authtest.NewRecords(), Sealer: authtest.Keyring(tb),
		Issuer: "https://kiln.test", Audience: "https://kiln.test/fhir", Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}
