// Package securitytest gates the slow part of the security battery (the
// erasure canary sweep, the write-size series): `make test` skips it and
// `make test-security` runs it. The fast security tests run everywhere.
package securitytest

import (
	"os"
	"testing"
)

// Env is the variable `make test-security` sets.
const Env = "KILN_TEST_SECURITY"

// Slow skips t unless the security battery was asked for.
func Slow(t testing.TB) {
	t.Helper()
	if os.Getenv(Env) == "" {
		t.Skip("slow security test: run with make test-security (" + Env + "=1)")
	}
}
