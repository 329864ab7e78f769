package eval

import (
	"fmt"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/navigate"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
	"github.com/kiln-fhir/kiln/profiles"
)

// Node is a node of the compiled expression tree; in is the focus. The
// tree is built by Compile only.
type Node interface {
	eval(ec *Context, in value.Collection) (value.Collection, error)
}

type literalNode struct{ val value.Collection }

func (n *literalNode) eval(*Context, value.Collection) (value.Collection, error) { return n.val, nil }

// memberNode is an identifier: a child name, or the type name of the
// focus (Patient.name on a Patient).
type memberNode struct {
	name     string
	resource bool // the name is a resource type name (resolved at compile time)
}

func newMember(name string) *memberNode {
	return &memberNode{name: name, resource: name != "" && name[0] >= 'A' && name[0] <= 'Z' && (profiles.IsResourceType(name) || name == "Resource" || name == "DomainResource")}
}

func (n *memberNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	var out value.Collection
	var err error
	if len(in) == 1 {
		// Most paths are one item deep; size the result for that.
		v := in[0]
		if t := value.NodeType(v); n.resource && t != nil && t.Kind() == "resource" {
			if t.DerivesFrom(n.name) {
				return in, nil
			}
			if !ec.Strict {
				return nil, nil // a type filter that does not match
			}
		}
		out, err = navigate.Children(ec.Walk(), nil, v, n.name)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	out = make(value.Collection, 0, len(in))
	for _, v := range in {
		if t := value.NodeType(v); n.resource && t != nil && t.Kind() == "resource" {
			if t.DerivesFrom(n.name) {
				out = append(out, v)
				continue
			}
			if !ec.Strict {
				continue
			}
		}
		if out, err = navigate.Children(ec.Walk(), out, v, n.name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type chainNode struct{ left, right Node }

func (n *chainNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	if ec.Strict {
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

func unordered(n Node) (string, bool) {
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

type indexNode struct{ left, index Node }

func (n *indexNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
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

type negNode struct{ operand Node }

// Negated returns the operand of a unary minus (sort() reads -key as a
// descending key).
func Negated(n Node) (operand Node, ok bool) {
	if neg, ok := n.(*negNode); ok {
		return neg.operand, true
	}
	return n, false
}

func (n *negNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
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
	return value.Collection{v}, nil
}

type thisNode struct{}

func (thisNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	if !ec.hasThis {
		return ec.root, nil
	}
	return value.Collection{ec.this}, nil
}

type indexVarNode struct{}

func (indexVarNode) eval(ec *Context, _ value.Collection) (value.Collection, error) {
	return value.Collection{value.Int(int64(ec.index))}, nil
}

type totalNode struct{}

func (totalNode) eval(ec *Context, _ value.Collection) (value.Collection, error) {
	return ec.total, nil
}

type envNode struct{ name string }

var envConstants = map[string]string{
	"ucum":  "http://unitsofmeasure.org",
	"sct":   "http://snomed.info/sct",
	"loinc": "http://loinc.org",
}

func (n *envNode) eval(ec *Context, _ value.Collection) (value.Collection, error) {
	if v, ok := ec.vars[n.name]; ok {
		return v, nil
	}
	switch n.name {
	case "resource", "context", "rootResource":
		return ec.root, nil
	}
	if s, ok := envConstants[n.name]; ok {
		return value.Collection{value.String(s)}, nil
	}
	if s, ok := strings.CutPrefix(n.name, "vs-"); ok {
		return value.Collection{value.String("http://hl7.org/fhir/ValueSet/" + s)}, nil
	}
	if s, ok := strings.CutPrefix(n.name, "ext-"); ok {
		return value.Collection{value.String("http://hl7.org/fhir/StructureDefinition/" + s)}, nil
	}
	return nil, fmt.Errorf("fhirpath: undefined environment variable %%%s", n.name)
}

// typeOpNode implements the is and as operators.
type typeOpNode struct {
	isOp bool
	left Node
	ts   value.TypeSpec
}

func (n *typeOpNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	l, err := n.left.eval(ec, in)
	if err != nil || len(l) == 0 {
		return nil, err
	}
	if n.isOp {
		if len(l) > 1 {
			return nil, value.ErrSingleton("is")
		}
		return value.Bools(value.Is(l[0], n.ts)), nil
	}
	// "as" is applied item by item: R4 search parameters use it on
	// collections (e.g. useContext.value as CodeableConcept).
	var out value.Collection
	for _, v := range l {
		if value.Is(v, n.ts) {
			out = append(out, v)
		}
	}
	return out, nil
}

// typeSpecOf turns a function argument such as Quantity or FHIR.Patient
// (parsed as a path) into a type specifier.
func typeSpecOf(n Node) (value.TypeSpec, error) {
	switch x := n.(type) {
	case *memberNode:
		return value.TypeSpec{Name: x.name}, nil
	case *chainNode:
		l, ok1 := x.left.(*memberNode)
		r, ok2 := x.right.(*memberNode)
		if ok1 && ok2 {
			return value.TypeSpec{NS: l.name, Name: r.name}, nil
		}
	}
	return value.TypeSpec{}, fmt.Errorf("fhirpath: expected a type name")
}

// Func implements a function: in is its input collection, args its
// unevaluated argument expressions (lambdas are evaluated per item).
type Func func(ec *Context, in value.Collection, args []Node) (value.Collection, error)

// Def is a function of a Library: how many arguments it takes, and its
// implementation (nil for is(), as() and ofType(), which Compile binds to
// their type argument).
type Def struct {
	Min, Max int
	Fn       Func
}

// callNode is a resolved function call.
type callNode struct {
	name string
	def  Def
	args []Node
	ts   value.TypeSpec // for is/as/ofType
}

func (n *callNode) eval(ec *Context, in value.Collection) (value.Collection, error) {
	return n.def.Fn(ec, in, n.args)
}

func typeFunc(name string, in value.Collection, ts value.TypeSpec) (value.Collection, error) {
	switch name {
	case "is":
		if len(in) == 0 {
			return nil, nil
		}
		if len(in) > 1 {
			return nil, value.ErrSingleton(name + "()")
		}
		return value.Bools(value.Is(in[0], ts)), nil
	}
	// as() filters like ofType(): the core invariant dom-3 applies it to
	// descendants(), so the singleton rule of the specification would
	// make every resource with contained resources fail.
	var out value.Collection
	for _, v := range in {
		if value.OfType(v, ts) {
			out = append(out, v)
		}
	}
	return out, nil
}
