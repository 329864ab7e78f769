package patch

import (
	"fmt"
	"net/http"
)

// Error is the error returned by JSONPatch and FHIRPathPatch for a patch
// that is malformed (Status 400) or that cannot be applied to the given
// resource (Status 422). Other errors (a stored resource that is not JSON,
// a cancelled context) are returned as they are.
type Error struct {
	// Status is http.StatusBadRequest or http.StatusUnprocessableEntity.
	Status int
	// Op is the 0-based index of the failing operation, or -1 when the
	// error concerns the patch document as a whole.
	Op int
	// Desc identifies the operation ("replace /birthDate",
	// "delete Patient.telecom.where(system='email')"); empty when Op is -1.
	Desc string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying cause, if any (e.g. a FHIRPath error).
	Err error
}

func (e *Error) Error() string {
	if e.Op < 0 {
		return "patch: " + e.Msg
	}
	if e.Desc == "" {
		return fmt.Sprintf("patch: operation %d: %s", e.Op, e.Msg)
	}
	return fmt.Sprintf("patch: operation %d (%s): %s", e.Op, e.Desc, e.Msg)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Limits on patch documents.
const (
	// MaxOperations is the largest number of operations in one patch.
	MaxOperations = 10_000
	// growthFactor and minGrowth bound how much data the operations of a
	// patch may add (copies included): at most growthFactor times the
	// size of the resource and the patch, and never less than minGrowth
	// bytes.
	growthFactor = 8
	minGrowth    = 1 << 20
	// maxWork bounds the number of JSON nodes visited to locate the
	// targets of the operations of one FHIRPath Patch.
	maxWork = 50_000_000
)

func badRequest(op int, desc, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Op: op, Desc: desc, Msg: fmt.Sprintf(format, args...)}
}

func unprocessable(op int, desc, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Op: op, Desc: desc, Msg: fmt.Sprintf(format, args...)}
}
