package fhirpath

import (
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// typeOpNode implements the is and as operators.
type typeOpNode struct {
	isOp bool
	left node
	ts   value.TypeSpec
}

func (n *typeOpNode) eval(ec *evalCtx, in Collection) (Collection, error) {
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
	var out Collection
	for _, v := range l {
		if value.Is(v, n.ts) {
			out = append(out, v)
		}
	}
	return out, nil
}

// typeSpecOf turns a function argument such as Quantity or FHIR.Patient
// (parsed as a path) into a type specifier.
func typeSpecOf(n node) (value.TypeSpec, error) {
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
