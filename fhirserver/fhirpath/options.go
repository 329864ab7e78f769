package fhirpath

import (
	"context"
	"log/slog"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
)

// Limits bound the work of one evaluation.
type Limits struct {
	MaxCollection int // items in any intermediate collection
	MaxDepth      int // nesting depth of the input JSON walked by descendants/repeat
}

// DefaultLimits returns the limits used unless WithLimits is given.
func DefaultLimits() Limits {
	return Limits{MaxCollection: eval.DefaultMaxCollection, MaxDepth: eval.DefaultMaxDepth}
}

// Terminology answers memberOf(); ok=false means unknown (empty result).
type Terminology interface {
	MemberOf(ctx context.Context, code Value, valueSet string) (member bool, ok bool)
}

// evalCtx is the state of one evaluation, which the options set.
type evalCtx = eval.Context

// Option configures one evaluation.
type Option func(*evalCtx)

// WithVariable defines %name. The value is decoded JSON or a Go string,
// bool, int, float64; a Collection is used as is.
func WithVariable(name string, value any) Option {
	return func(ec *evalCtx) { ec.SetVariable(name, value) }
}

// WithResolver is used by resolve() for references not found in the
// resource itself (contained resources, Bundle entries).
func WithResolver(r func(ctx context.Context, reference string) (any, error)) Option {
	return func(ec *evalCtx) { ec.Resolver = r }
}

// WithTerminology plugs in memberOf().
func WithTerminology(t Terminology) Option { return func(ec *evalCtx) { ec.Terminology = t } }

// WithConformsTo plugs in conformsTo(profile).
func WithConformsTo(f func(ctx context.Context, resource any, profile string) (bool, bool)) Option {
	return func(ec *evalCtx) { ec.ConformsTo = f }
}

// WithStrict makes navigation to a resource type that does not match
// the focus (Encounter.name on a Patient) an error instead of empty.
func WithStrict(strict bool) Option { return func(ec *evalCtx) { ec.Strict = strict } }

// WithLogger sends trace() output to l.
func WithLogger(l *slog.Logger) Option { return func(ec *evalCtx) { ec.Logger = l } }

// WithLimits overrides DefaultLimits().
func WithLimits(l Limits) Option {
	return func(ec *evalCtx) { ec.MaxCollection, ec.MaxDepth = l.MaxCollection, l.MaxDepth }
}

// WithNow fixes the clock used by now(), today() and timeOfDay().
func WithNow(t time.Time) Option { return func(ec *evalCtx) { ec.Now = t } }
