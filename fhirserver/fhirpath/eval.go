package fhirpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/syntax"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/profiles"
)

// Expression is a compiled FHIRPath expression. It is immutable and safe
// for concurrent use.
type Expression struct {
	src  string
	root node
	// lits are the items of the literals of the tree (each literal is a
	// one-item collection); opaque when the tree has a node type the walk
	// does not know, so every single System value result is copied.
	lits   []*Value
	opaque bool
	// branches caches what Branches reports, made on first use.
	branches atomic.Pointer[[]Branch]
}

// Error is a parse error with the byte offset where it was detected.
type Error = syntax.Error

// Compile parses an expression and resolves its functions once.
func Compile(expr string) (*Expression, error) {
	n, err := syntax.Parse[node](expr, builder{})
	if err != nil {
		return nil, err
	}
	e := &Expression{src: expr, root: n}
	e.opaque = !collectLiterals(n, &e.lits)
	return e, nil
}

// collectLiterals appends the items of the literals under n; false when
// it meets a node type it does not know.
func collectLiterals(n node, lits *[]*Value) bool {
	switch x := n.(type) {
	case *literalNode:
		for i := range x.val {
			*lits = append(*lits, &x.val[i])
		}
		return true
	case *memberNode, thisNode, indexVarNode, totalNode, *envNode:
		return true
	case *chainNode:
		return collectLiterals(x.left, lits) && collectLiterals(x.right, lits)
	case *indexNode:
		return collectLiterals(x.left, lits) && collectLiterals(x.index, lits)
	case *negNode:
		return collectLiterals(x.operand, lits)
	case *binNode:
		return collectLiterals(x.left, lits) && collectLiterals(x.right, lits)
	case *logicNode:
		return collectLiterals(x.left, lits) && collectLiterals(x.right, lits)
	case *typeOpNode:
		return collectLiterals(x.left, lits)
	case *callNode:
		for _, a := range x.args {
			if !collectLiterals(a, lits) {
				return false
			}
		}
		return true
	}
	return false
}

// shared reports whether p is memory the result must not alias: an item
// of a literal of e or of the package's true/false collections.
func (e *Expression) shared(p *Value) bool {
	if e.opaque || value.SharedBool(p) {
		return true
	}
	for _, l := range e.lits {
		if l == p {
			return true
		}
	}
	return false
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

// Limits bound the work of one evaluation.
type Limits struct {
	MaxCollection int // items in any intermediate collection
	MaxDepth      int // nesting depth of the input JSON walked by descendants/repeat
}

// defaultLimits are used unless WithLimits is given; unexported so no
// caller can change them for every other evaluation.
var defaultLimits = Limits{MaxCollection: 1_000_000, MaxDepth: 1000}

// DefaultLimits returns the limits used unless WithLimits is given.
func DefaultLimits() Limits { return defaultLimits }

// Terminology answers memberOf(); ok=false means unknown (empty result).
type Terminology interface {
	MemberOf(ctx context.Context, code Value, valueSet string) (member bool, ok bool)
}

// Option configures one evaluation.
type Option func(*evalCtx)

// WithVariable defines %name. The value is decoded JSON or a Go string,
// bool, int, float64; a Collection is used as is.
func WithVariable(name string, value any) Option {
	return func(ec *evalCtx) { ec.setVariable(name, value) }
}

// WithResolver is used by resolve() for references not found in the
// resource itself (contained resources, Bundle entries).
func WithResolver(r func(ctx context.Context, reference string) (any, error)) Option {
	return func(ec *evalCtx) { ec.resolver = r }
}

// WithTerminology plugs in memberOf().
func WithTerminology(t Terminology) Option { return func(ec *evalCtx) { ec.term = t } }

// WithConformsTo plugs in conformsTo(profile).
func WithConformsTo(f func(ctx context.Context, resource any, profile string) (bool, bool)) Option {
	return func(ec *evalCtx) { ec.conforms = f }
}

// WithStrict makes navigation to a resource type that does not match
// the focus (Encounter.name on a Patient) an error instead of empty.
func WithStrict(strict bool) Option { return func(ec *evalCtx) { ec.strict = strict } }

// WithLogger sends trace() output to l.
func WithLogger(l *slog.Logger) Option { return func(ec *evalCtx) { ec.logger = l } }

// WithLimits overrides DefaultLimits().
func WithLimits(l Limits) Option { return func(ec *evalCtx) { ec.limits = l } }

// WithNow fixes the clock used by now(), today() and timeOfDay().
func WithNow(t time.Time) Option { return func(ec *evalCtx) { ec.now = t } }

var errTooDeep = errors.New("fhirpath: input nesting depth limit exceeded")

// evalCtx is the per-evaluation state. It is never shared.
type evalCtx struct {
	ctx      context.Context
	root     Collection // %resource / %context
	base     Collection // focus of the current term ($this context)
	this     Value
	hasThis  bool
	index    int
	total    Collection
	vars     map[string]Collection
	resolver func(ctx context.Context, reference string) (any, error)
	term     Terminology
	conforms func(ctx context.Context, resource any, profile string) (bool, bool)
	logger   *slog.Logger
	limits   Limits
	now      time.Time
	steps    int
	strict   bool
	rootBuf  [1]Value
}

// Check is called inside loops: it honours cancellation cheaply.
func (ec *evalCtx) Check() error {
	ec.steps++
	if ec.steps&255 == 0 {
		if err := ec.ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// walk bounds the walks of this evaluation through the input.
func (ec *evalCtx) walk() value.Walk {
	return value.Walk{MaxCollection: ec.limits.MaxCollection, Strict: ec.strict}
}

// setVariable defines %name (see WithVariable).
func (ec *evalCtx) setVariable(name string, v any) {
	if ec.vars == nil {
		ec.vars = map[string]Collection{}
	}
	ec.vars[name] = value.Of(v)
}

// Evaluate runs the expression on a decoded FHIR JSON resource (or any
// JSON value; nil means no input).
func (e *Expression) Evaluate(ctx context.Context, resource any, opts ...Option) (Collection, error) {
	ec := ctxPool.Get().(*evalCtx)
	*ec = evalCtx{ctx: ctx, limits: defaultLimits}
	defer ctxPool.Put(ec)
	for _, o := range opts {
		o(ec)
	}
	if ec.limits.MaxCollection <= 0 {
		ec.limits.MaxCollection = defaultLimits.MaxCollection
	}
	if ec.limits.MaxDepth <= 0 {
		ec.limits.MaxDepth = defaultLimits.MaxDepth
	}
	if list, ok := resource.([]any); ok {
		// A JSON array is a collection of inputs.
		ec.root = value.Of(list)
	} else if resource != nil {
		var root Value
		if v, ok := resource.(Value); ok {
			root = v
		} else {
			var ti *model.Type
			if m, ok := resource.(map[string]any); ok {
				ti = model.ResourceType(m)
			}
			root = value.Node(resource, nil, ti)
		}
		ec.rootBuf[0] = root
		ec.root = ec.rootBuf[:]
	}
	ec.base = ec.root
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := e.root.eval(ec, ec.root)
	if len(res) > 0 && &res[0] == &ec.rootBuf[0] {
		// the result is the root itself: do not hand out pooled memory
		res = Collection{res[0]}
	} else if len(res) == 1 && res[0].IsSystem() && e.shared(&res[0]) {
		// a literal of the expression or a shared true/false collection:
		// the caller owns what it gets. (Those are never longer than one
		// item, and never nodes.)
		res = Collection{res[0]}
	}
	ec.vars, ec.total, ec.root, ec.base = nil, nil, nil, nil
	ec.rootBuf[0] = Value{}
	return res, err
}

// ctxPool recycles evaluation contexts: one evaluation allocates none.
var ctxPool = sync.Pool{New: func() any { return new(evalCtx) }}

// node is a compiled expression tree node. in is the focus.
type node interface {
	eval(ec *evalCtx, in Collection) (Collection, error)
}

type literalNode struct{ val Collection }

func (n *literalNode) eval(*evalCtx, Collection) (Collection, error) { return n.val, nil }

// memberNode is an identifier: a child name, or the type name of the
// focus (Patient.name on a Patient).
type memberNode struct {
	name     string
	resource bool // the name is a resource type name (resolved at compile time)
}

func newMember(name string) *memberNode {
	return &memberNode{name: name, resource: name != "" && name[0] >= 'A' && name[0] <= 'Z' && (profiles.IsResourceType(name) || name == "Resource" || name == "DomainResource")}
}

func (n *memberNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	var out Collection
	var err error
	if len(in) == 1 {
		// Most paths are one item deep; size the result for that.
		v := in[0]
		if t := value.NodeType(v); n.resource && t != nil && t.Kind() == "resource" {
			if t.DerivesFrom(n.name) {
				return in, nil
			}
			if !ec.strict {
				return nil, nil // a type filter that does not match
			}
		}
		out, err = value.Children(ec.walk(), nil, v, n.name)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	out = make(Collection, 0, len(in))
	for _, v := range in {
		if t := value.NodeType(v); n.resource && t != nil && t.Kind() == "resource" {
			if t.DerivesFrom(n.name) {
				out = append(out, v)
				continue
			}
			if !ec.strict {
				continue
			}
		}
		if out, err = value.Children(ec.walk(), out, v, n.name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type chainNode struct{ left, right node }

func (n *chainNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	if ec.strict {
		if err := n.strictCheck(); err != nil {
			return nil, err
		}
	}
	l, err := n.left.eval(ec, in)
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		if _, isMember := n.right.(*memberNode); isMember {
			return nil, nil
		}
	}
	return n.right.eval(ec, l)
}

// strictCheck applies the semantic checks of strict mode that the tree
// shape decides: a child of "x as T" must exist on T, and order-dependent
// functions may not follow children()/descendants(), whose order is
// undefined.
func (n *chainNode) strictCheck() error {
	if t, ok := n.left.(*typeOpNode); ok && !t.isOp {
		if m, ok := n.right.(*memberNode); ok {
			if ti := model.Lookup(t.ts.Name); ti != nil && ti.Elem(m.name) == nil {
				return fmt.Errorf("fhirpath: %s has no element %q", t.ts.Name, m.name)
			}
		}
	}
	if c, ok := n.right.(*callNode); ok && orderDependent[c.name] {
		if l, ok := unordered(n.left); ok {
			return fmt.Errorf("fhirpath: %s() applied to the unordered result of %s()", c.name, l)
		}
	}
	return nil
}

var orderDependent = map[string]bool{"skip": true, "take": true, "first": true, "last": true, "tail": true}

func unordered(n node) (string, bool) {
	for {
		switch x := n.(type) {
		case *chainNode:
			n = x.right
			continue
		case *callNode:
			return x.name, x.name == "children" || x.name == "descendants"
		}
		return "", false
	}
}

type indexNode struct{ left, index node }

func (n *indexNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	l, err := n.left.eval(ec, in)
	if err != nil {
		return nil, err
	}
	ix, err := n.index.eval(ec, ec.base)
	if err != nil {
		return nil, err
	}
	i, ok, err := value.SingletonInt(ix)
	if err != nil || !ok {
		return nil, err
	}
	if i < 0 || i >= int64(len(l)) {
		return nil, nil
	}
	return l[i : i+1 : i+1], nil
}

type negNode struct{ operand node }

func (n *negNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	c, err := n.operand.eval(ec, in)
	if err != nil || len(c) == 0 {
		return nil, err
	}
	if len(c) > 1 {
		return nil, value.ErrSingleton("unary -")
	}
	v, ok := value.Negate(value.ToSystem(c[0]))
	if !ok {
		return nil, fmt.Errorf("fhirpath: cannot negate %s", c[0].TypeName())
	}
	return Collection{v}, nil
}

type thisNode struct{}

func (thisNode) eval(ec *evalCtx, in Collection) (Collection, error) {
	if !ec.hasThis {
		return ec.root, nil
	}
	return Collection{ec.this}, nil
}

type indexVarNode struct{}

func (indexVarNode) eval(ec *evalCtx, _ Collection) (Collection, error) {
	return Collection{value.Int(int64(ec.index))}, nil
}

type totalNode struct{}

func (totalNode) eval(ec *evalCtx, _ Collection) (Collection, error) { return ec.total, nil }

type envNode struct{ name string }

var envConstants = map[string]string{
	"ucum":  "http://unitsofmeasure.org",
	"sct":   "http://snomed.info/sct",
	"loinc": "http://loinc.org",
}

func (n *envNode) eval(ec *evalCtx, _ Collection) (Collection, error) {
	if v, ok := ec.vars[n.name]; ok {
		return v, nil
	}
	switch n.name {
	case "resource", "context", "rootResource":
		return ec.root, nil
	}
	if s, ok := envConstants[n.name]; ok {
		return Collection{value.String(s)}, nil
	}
	if s, ok := strings.CutPrefix(n.name, "vs-"); ok {
		return Collection{value.String("http://hl7.org/fhir/ValueSet/" + s)}, nil
	}
	if s, ok := strings.CutPrefix(n.name, "ext-"); ok {
		return Collection{value.String("http://hl7.org/fhir/StructureDefinition/" + s)}, nil
	}
	return nil, fmt.Errorf("fhirpath: undefined environment variable %%%s", n.name)
}

// withItem evaluates n with $this bound to item, restoring the context.
func (ec *evalCtx) withItem(n node, item Value, index int) (Collection, error) {
	saveBase, saveThis, saveHas, saveIdx := ec.base, ec.this, ec.hasThis, ec.index
	c := Collection{item}
	ec.base, ec.this, ec.hasThis, ec.index = c, item, true, index
	out, err := n.eval(ec, c)
	ec.base, ec.this, ec.hasThis, ec.index = saveBase, saveThis, saveHas, saveIdx
	return out, err
}
