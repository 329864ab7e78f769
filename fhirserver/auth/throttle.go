package auth

import (
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/auth/internal/throttle"
)

// Throttle slows down password guessing and floods of /auth requests, in
// memory (per instance); see internal/throttle.
type Throttle = throttle.Throttle

// NewThrottle returns a throttle on the clock now.
func NewThrottle(now func() time.Time) *Throttle { return throttle.New(now) }
