package fhirpath

import (
	"context"
	"sync/atomic"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/functions"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/syntax"
)

// Expression is a compiled FHIRPath expression. It is immutable and safe
// for concurrent use.
type Expression struct {
	src  string
	prog eval.Program
	// branches caches what Branches reports, made on first use.
	branches atomic.Pointer[[]Branch]
}

// Error is a parse error with the byte offset where it was detected.
type Error = syntax.Error

// Compile parses an expression and resolves its functions once.
func Compile(expr string) (*Expression, error) {
	p, err := eval.Compile(expr, functions.Library())
	if err != nil {
		return nil, err
	}
	return &Expression{src: expr, prog: p}, nil
}

// MustCompile is Compile that panics on error, for package-level values.
func MustCompile(expr string) *Expression {
	e, err := Compile(expr)
	if err != nil {
		panic(err)
	}
	return e
}

// String returns the source text.
func (e *Expression) String() string { return e.src }

// Evaluate runs the expression on a decoded FHIR JSON resource (or any
// JSON value; nil means no input).
func (e *Expression) Evaluate(ctx context.Context, resource any, opts ...Option) (Collection, error) {
	ec := eval.NewContext(ctx)
	defer ec.Release()
	for _, o := range opts {
		o(ec)
	}
	return e.prog.Run(ec, resource)
}
