package eval

import (
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/syntax"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// builder makes the evaluation tree as the parser reads an expression:
// literals become values, names are resolved and functions bound, once.
type builder struct{ lib Library }

var _ syntax.Builder[Node] = builder{}

func (builder) Number(text string) (Node, error) {
	v, err := value.ParseNumber(text)
	if err != nil {
		return nil, err
	}
	return &literalNode{val: value.Collection{v}}, nil
}

func (builder) Quantity(number, unit string) (Node, error) {
	v, err := value.ParseNumber(number)
	if err != nil {
		return nil, err
	}
	return &literalNode{val: value.Collection{value.Quantity(v, unit)}}, nil
}

func (builder) DateTime(text string) (Node, error) {
	d, err := datetime.ParseLiteral(text)
	if err != nil {
		return nil, err
	}
	return &literalNode{val: value.Collection{value.Date(d)}}, nil
}

func (builder) String(s string) Node        { return &literalNode{val: value.Collection{value.String(s)}} }
func (builder) Bool(b bool) Node            { return &literalNode{val: value.Collection{value.Bool(b)}} }
func (builder) Empty() Node                 { return &literalNode{} }
func (builder) Env(name string) Node        { return &envNode{name: name} }
func (builder) This() Node                  { return thisNode{} }
func (builder) IndexVar() Node              { return indexVarNode{} }
func (builder) Total() Node                 { return totalNode{} }
func (builder) Member(name string) Node     { return newMember(name) }
func (builder) Chain(left, right Node) Node { return &chainNode{left: left, right: right} }
func (builder) Index(left, index Node) Node { return &indexNode{left: left, index: index} }

func (b builder) Call(name string, args []Node) (Node, error) { return b.lib.call(name, args) }

func (builder) Binary(op string, left, right Node) (Node, error) { return newBinary(op, left, right) }

// Negate folds negative literals, so that -1 is an Integer literal.
func (builder) Negate(operand Node) Node {
	if lit, ok := operand.(*literalNode); ok && len(lit.val) == 1 {
		if v, ok := value.Negate(lit.val[0]); ok {
			return &literalNode{val: value.Collection{v}}
		}
	}
	return &negNode{operand: operand}
}

func (builder) TypeOp(is bool, left Node, ns, name string) (Node, error) {
	ts := value.TypeSpec{NS: ns, Name: name}
	if !value.KnownType(ts) {
		return nil, fmt.Errorf("unknown type %s", ts.Name)
	}
	return &typeOpNode{isOp: is, left: left, ts: ts}, nil
}

// call resolves a call of the function name.
func (lib Library) call(name string, args []Node) (Node, error) {
	def, ok := lib[name]
	if !ok {
		return nil, fmt.Errorf("unknown function %s()", name)
	}
	if len(args) < def.Min || len(args) > def.Max {
		return nil, fmt.Errorf("%s() takes %d to %d arguments, got %d", name, def.Min, def.Max, len(args))
	}
	c := &callNode{name: name, def: def, args: args}
	switch name {
	case "is", "as", "ofType":
		ts, err := typeSpecOf(args[0])
		if err != nil {
			return nil, fmt.Errorf("%s() expects a type name", name)
		}
		c.ts = ts
		if !value.KnownType(ts) {
			return nil, fmt.Errorf("unknown type %s", ts.Name)
		}
		t := ts
		c.def.Fn = func(ec *Context, in value.Collection, _ []Node) (value.Collection, error) {
			return typeFunc(name, in, t)
		}
	}
	return c, nil
}
