package eval

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/navigate"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// The limits of an evaluation that sets none (or sets them to zero).
const (
	DefaultMaxCollection = 1_000_000
	DefaultMaxDepth      = 1000
)

// Terminology answers memberOf(); ok=false means unknown (empty result).
type Terminology interface {
	MemberOf(ctx context.Context, code value.Value, valueSet string) (member bool, ok bool)
}

// ErrTooDeep reports an input nested deeper than MaxDepth.
var ErrTooDeep = errors.New("fhirpath: input nesting depth limit exceeded")

// Context is the state of one evaluation. It is never shared: NewContext
// takes one from a pool, the options of the evaluation set its exported
// fields, Program.Run uses it, Release returns it.
type Context struct {
	// Resolver is asked by resolve() for references the input does not
	// hold (contained resources, Bundle entries).
	Resolver func(ctx context.Context, reference string) (any, error)
	// Terminology answers memberOf(); nil leaves it empty.
	Terminology Terminology
	// ConformsTo answers conformsTo(); nil knows the core definitions only.
	ConformsTo func(ctx context.Context, resource any, profile string) (bool, bool)
	Logger     *slog.Logger // trace() output; nil for slog.Default()
	// MaxCollection bounds the items of any intermediate collection,
	// MaxDepth the nesting depth of the input that descendants() and
	// repeat() walk.
	MaxCollection, MaxDepth int
	// Now is the clock of now(), today() and timeOfDay(); zero reads the
	// clock once per evaluation.
	Now time.Time
	// Strict makes names the type of the focus does not have errors, and
	// applies the other checks of strict mode (chainNode.strictCheck).
	Strict bool

	ctx     context.Context
	root    value.Collection // %resource / %context
	base    value.Collection // focus of the current term ($this context)
	this    value.Value
	hasThis bool
	index   int
	total   value.Collection
	vars    map[string]value.Collection
	steps   int
	rootBuf [1]value.Value
}

// NewContext returns a context for one evaluation under ctx, with the
// default limits.
func NewContext(ctx context.Context) *Context {
	ec := ctxPool.Get().(*Context)
	*ec = Context{ctx: ctx, MaxCollection: DefaultMaxCollection, MaxDepth: DefaultMaxDepth}
	return ec
}

// Release returns ec to the pool; it must not be used after.
func (ec *Context) Release() { ctxPool.Put(ec) }

// Ctx is the context.Context of the evaluation.
func (ec *Context) Ctx() context.Context { return ec.ctx }

// Root is the input of the evaluation (%resource, %context).
func (ec *Context) Root() value.Collection { return ec.root }

// Check is called inside loops: it honours cancellation cheaply.
func (ec *Context) Check() error {
	ec.steps++
	if ec.steps&255 == 0 {
		if err := ec.ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Walk bounds the walks of this evaluation through the input.
func (ec *Context) Walk() navigate.Walk {
	return navigate.Walk{MaxCollection: ec.MaxCollection, Strict: ec.Strict}
}

// SetVariable defines %name: v is decoded JSON, a Go string, bool, int,
// float64, a Value or a Collection.
func (ec *Context) SetVariable(name string, v any) {
	if ec.vars == nil {
		ec.vars = map[string]value.Collection{}
	}
	ec.vars[name] = value.Of(v)
}

// ctxPool recycles evaluation contexts: one evaluation allocates none.
var ctxPool = sync.Pool{New: func() any { return new(Context) }}

// WithItem evaluates n with $this bound to item, restoring the context.
func (ec *Context) WithItem(n Node, item value.Value, index int) (value.Collection, error) {
	saveBase, saveThis, saveHas, saveIdx := ec.base, ec.this, ec.hasThis, ec.index
	c := value.Collection{item}
	ec.base, ec.this, ec.hasThis, ec.index = c, item, true, index
	out, err := n.eval(ec, c)
	ec.base, ec.this, ec.hasThis, ec.index = saveBase, saveThis, saveHas, saveIdx
	return out, err
}

// Arg evaluates a non-lambda argument against the current term focus.
func (ec *Context) Arg(n Node) (value.Collection, error) {
	return n.eval(ec, ec.base)
}

// ArgString and ArgInt evaluate an argument that must give a single
// String or Integer; ok=false when it gives none.
func (ec *Context) ArgString(n Node, fn string) (string, bool, error) {
	c, err := ec.Arg(n)
	if err != nil {
		return "", false, err
	}
	return value.SingletonString(c, fn+"()")
}

func (ec *Context) ArgInt(n Node) (int64, bool, error) {
	c, err := ec.Arg(n)
	if err != nil {
		return 0, false, err
	}
	return value.SingletonInt(c)
}

// LambdaBool evaluates criteria for item as a Boolean (empty = false).
func (ec *Context) LambdaBool(n Node, item value.Value, i int, fn string) (bool, bool, error) {
	c, err := ec.WithItem(n, item, i)
	if err != nil {
		return false, false, err
	}
	b, ok, err := value.SingletonBool(c, fn)
	return b, ok, err
}

// Scope is the focus an argument sees ($this); Focus and Restore bind
// and unbind it.
type Scope struct {
	base    value.Collection
	this    value.Value
	hasThis bool
}

// Focus binds $this to the single item of in for the arguments that
// follow (iif()), returning the scope to Restore.
func (ec *Context) Focus(in value.Collection) Scope {
	s := Scope{ec.base, ec.this, ec.hasThis}
	ec.base, ec.this, ec.hasThis = in, in[0], true
	return s
}

// Restore ends what Focus began.
func (ec *Context) Restore(s Scope) { ec.base, ec.this, ec.hasThis = s.base, s.this, s.hasThis }

// WithTotal is WithItem with $total bound to total (aggregate()).
func (ec *Context) WithTotal(n Node, item value.Value, index int, total value.Collection) (value.Collection, error) {
	save := ec.total
	ec.total = total
	out, err := ec.WithItem(n, item, index)
	ec.total = save
	return out, err
}

// Clock is the time of now(), today() and timeOfDay(): Now, or the
// clock read once per evaluation.
func (ec *Context) Clock() time.Time {
	if ec.Now.IsZero() {
		ec.Now = time.Now()
	}
	return ec.Now
}
