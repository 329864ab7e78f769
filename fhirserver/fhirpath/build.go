package fhirpath

import (
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/syntax"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// builder makes the evaluation tree as the parser reads an expression:
// literals become values, names are resolved and functions bound, once.
type builder struct{}

var _ syntax.Builder[node] = builder{}

func (builder) Number(text string) (node, error) {
	v, err := value.ParseNumber(text)
	if err != nil {
		return nil, err
	}
	return &literalNode{val: Collection{v}}, nil
}

func (builder) Quantity(number, unit string) (node, error) {
	v, err := value.ParseNumber(number)
	if err != nil {
		return nil, err
	}
	return &literalNode{val: Collection{value.Quantity(v, unit)}}, nil
}

func (builder) DateTime(text string) (node, error) {
	d, err := datetime.ParseLiteral(text)
	if err != nil {
		return nil, err
	}
	return &literalNode{val: Collection{value.Date(d)}}, nil
}

func (builder) String(s string) node        { return &literalNode{val: Collection{value.String(s)}} }
func (builder) Bool(b bool) node            { return &literalNode{val: Collection{value.Bool(b)}} }
func (builder) Empty() node                 { return &literalNode{} }
func (builder) Env(name string) node        { return &envNode{name: name} }
func (builder) This() node                  { return thisNode{} }
func (builder) IndexVar() node              { return indexVarNode{} }
func (builder) Total() node                 { return totalNode{} }
func (builder) Member(name string) node     { return newMember(name) }
func (builder) Chain(left, right node) node { return &chainNode{left: left, right: right} }
func (builder) Index(left, index node) node { return &indexNode{left: left, index: index} }

func (builder) Call(name string, args []node) (node, error) { return newCall(name, args) }

func (builder) Binary(op string, left, right node) (node, error) { return newBinary(op, left, right) }

// Negate folds negative literals, so that -1 is an Integer literal.
func (builder) Negate(operand node) node {
	if lit, ok := operand.(*literalNode); ok && len(lit.val) == 1 {
		if v, ok := value.Negate(lit.val[0]); ok {
			return &literalNode{val: Collection{v}}
		}
	}
	return &negNode{operand: operand}
}

func (builder) TypeOp(is bool, left node, ns, name string) (node, error) {
	ts := value.TypeSpec{NS: ns, Name: name}
	if !value.KnownType(ts) {
		return nil, fmt.Errorf("unknown type %s", ts.Name)
	}
	return &typeOpNode{isOp: is, left: left, ts: ts}, nil
}
