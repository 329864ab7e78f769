package fhirpath

import (
	"math/big"

	"github.com/kiln-fhir/kiln/fhirserver/internal/ucum"
)

// ucumConvert converts between UCUM units with the ucum package; the
// small table in quantity.go remains as a fallback for the calendar forms.
func ucumConvert(v *big.Rat, from, to string) (*big.Rat, bool) {
	return ucum.Convert(v, from, to)
}
