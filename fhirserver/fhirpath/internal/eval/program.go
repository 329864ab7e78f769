// Package eval evaluates a compiled FHIRPath expression: the tree the
// parser builds through this package's builder (functions and operators
// bound once, at compile time), the context of one evaluation ($this,
// $index, $total, %variables, limits, cancellation) and the operators.
// The functions themselves are a Library given to Compile.
package eval

import (
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/syntax"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// Program is a compiled expression: its tree, with every function and
// operator bound. It is immutable and safe for concurrent use; it is a
// value so that its holder allocates it with itself.
type Program struct {
	root Node
	// lits are the items of the literals of the tree (each literal is a
	// one-item collection); opaque when the tree has a node type the walk
	// does not know, so every single System value result is copied.
	lits   []*value.Value
	opaque bool
}

// Library is the set of functions an expression may call, by name.
type Library map[string]Def

// Compile parses an expression and binds its functions (from lib) and
// operators once.
func Compile(expr string, lib Library) (Program, error) {
	n, err := syntax.Parse[Node](expr, builder{lib})
	if err != nil {
		return Program{}, err
	}
	p := Program{root: n}
	p.opaque = !collectLiterals(n, &p.lits)
	return p, nil
}

// collectLiterals appends the items of the literals under n; false when
// it meets a node type it does not know.
func collectLiterals(n Node, lits *[]*value.Value) bool {
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

// shared reports whether v is memory the result must not alias: an item
// of a literal of p or of the shared true/false collections.
func (p *Program) shared(v *value.Value) bool {
	if p.opaque || value.SharedBool(v) {
		return true
	}
	for _, l := range p.lits {
		if l == v {
			return true
		}
	}
	return false
}

// Run evaluates the program on a decoded FHIR JSON resource (or any JSON
// value, or a Value; nil means no input) in the context ec, which the
// options of the evaluation have set.
func (p *Program) Run(ec *Context, resource any) (value.Collection, error) {
	if ec.MaxCollection <= 0 {
		ec.MaxCollection = DefaultMaxCollection
	}
	if ec.MaxDepth <= 0 {
		ec.MaxDepth = DefaultMaxDepth
	}
	if list, ok := resource.([]any); ok {
		// A JSON array is a collection of inputs.
		ec.root = value.Of(list)
	} else if resource != nil {
		var root value.Value
		if v, ok := resource.(value.Value); ok {
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
	if err := ec.ctx.Err(); err != nil {
		return nil, err
	}
	res, err := p.root.eval(ec, ec.root)
	if len(res) > 0 && &res[0] == &ec.rootBuf[0] {
		// the result is the root itself: do not hand out pooled memory
		res = value.Collection{res[0]}
	} else if len(res) == 1 && res[0].IsSystem() && p.shared(&res[0]) {
		// a literal of the expression or a shared true/false collection:
		// the caller owns what it gets. (Those are never longer than one
		// item, and never nodes.)
		res = value.Collection{res[0]}
	}
	ec.vars, ec.total, ec.root, ec.base = nil, nil, nil, nil
	ec.rootBuf[0] = value.Value{}
	return res, err
}
