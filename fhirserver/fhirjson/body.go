package fhirjson

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Limits bound what a request body may be.
type Limits struct {
	MaxResourceBytes int64 // default 5 MiB
	MaxBundleBytes   int64 // default 20 MiB
	MaxDepth         int   // default 100 (JSON nesting depth of objects+arrays)
}

// DefaultLimits returns the limits used when a field is zero.
func DefaultLimits() Limits {
	return Limits{
		MaxResourceBytes: 5 << 20,
		MaxBundleBytes:   20 << 20,
		MaxDepth:         100,
	}
}

// WithDefaults returns l with every zero field set to its default: the one
// place defaults are applied.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxResourceBytes == 0 {
		l.MaxResourceBytes = d.MaxResourceBytes
	}
	if l.MaxBundleBytes == 0 {
		l.MaxBundleBytes = d.MaxBundleBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// ReadBody reads at most limit bytes from r. A longer body gives a
// *outcome.Error with status 413 (code "too-costly") whose message states
// the limit; so does an *http.MaxBytesError from r. Other read errors give
// status 400. A limit ≤ 0 means DefaultLimits().MaxResourceBytes, so a
// forgotten limit never means "unbounded". declared is the length the
// request declared (Content-Length), or -1: the buffer is made that size
// (up to limit) at once instead of grown from 512 bytes, so pass it only
// where that memory was reserved (a client can declare a length and then
// stall).
func ReadBody(r io.Reader, limit, declared int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultLimits().MaxResourceBytes
	}
	var buf bytes.Buffer
	if declared >= 0 {
		buf.Grow(int(min(declared, limit)) + bytes.MinRead)
	}
	// Read one byte past the limit to tell "exactly at" from "over".
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(min(limit, mbe.Limit))
		}
		if _, ok := outcome.As(err); ok { // the reader's own answer (e.g. a busy server's 503)
			return nil, err
		}
		return nil, outcome.New(http.StatusBadRequest, codeInvalid, "the request body could not be read: "+err.Error())
	}
	if n > limit {
		return nil, tooLarge(limit)
	}
	return buf.Bytes(), nil
}
