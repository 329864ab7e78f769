package fhirpath

import "math/big"

// ucumConvert delegates to the ucum package once it exists; until then the
// built-in table in quantity.go is used.
func ucumConvert(v *big.Rat, from, to string) (*big.Rat, bool) { return nil, false }
