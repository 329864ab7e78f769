package fhirpath

import "strings"

// Branch describes one top-level union branch of a compiled expression,
// as the parser read it: "Patient.name | Practitioner.name" has two, an
// expression without a union at its root has one (itself). A union in
// parentheses is a single branch.
type Branch struct {
	// Source is the branch's text, trimmed of surrounding white space.
	Source string
	// First is the identifier the branch starts from, through any
	// parentheses: a member (a type name such as "Patient", or an
	// element), or the function called at the start; "" when the branch
	// starts from a literal, a %variable, $this or an operator.
	First string
	// FirstCall is true when First is a function called at the start.
	FirstCall bool
	// Path is the branch as a navigation path: members, function calls,
	// indexers and the is/as operators, through parenthesised groups that
	// are paths themselves. Nil when the branch is anything else (an
	// operator other than is/as, a literal, a variable).
	Path []Step
	// Union reports a union operator anywhere inside the branch.
	Union bool
	// Variables reports a %variable, $this, $index or $total anywhere
	// inside the branch.
	Variables bool
}

// Step is one step of a navigation path.
type Step struct {
	// Name is the member's name, the function's name, or "is"/"as" for the
	// operators; "" for an indexer.
	Name string
	// Call is true for a function call, Index for an indexer ([...]),
	// Operator for the is/as operators.
	Call, Index, Operator bool
	// Type is the type named by ofType(), as(), is() or the is/as
	// operators, and TypeNS its namespace when qualified (FHIR.Quantity).
	Type, TypeNS string
}

// Branches returns the top-level union branches of e in source order.
// The result is shared and must not be modified.
func (e *Expression) Branches() []Branch {
	if b := e.branches.Load(); b != nil {
		return *b
	}
	// Compile keeps no positions (it is on the hot path of custom
	// parameters and validation); the parser records them for this one
	// reading of the same source, which cannot fail as it compiled.
	root, tops, err := parse(e.src, true)
	var out []Branch
	switch {
	case err != nil:
		out = []Branch{inspectBranch(e.root, e.src)}
	case tops == nil:
		out = []Branch{inspectBranch(root, e.src)}
	default:
		out = make([]Branch, len(tops))
		start := 0
		for i, t := range tops {
			out[i] = inspectBranch(t.n, e.src[start:t.end])
			start = t.end + 1 // past the '|'
		}
	}
	e.branches.Store(&out)
	return out
}

func inspectBranch(n node, src string) Branch {
	b := Branch{Source: strings.TrimSpace(src)}
	b.First, b.FirstCall = firstName(n)
	b.Path, _ = pathSteps(n, nil)
	walkNodes(n, func(n node) {
		switch x := n.(type) {
		case *binNode:
			if x.op == "|" {
				b.Union = true
			}
		case *envNode, thisNode, indexVarNode, totalNode:
			b.Variables = true
		}
	})
	return b
}

// firstName follows the input side of n down to where evaluation starts.
func firstName(n node) (name string, call bool) {
	for {
		switch x := n.(type) {
		case *memberNode:
			return x.name, false
		case *callNode:
			return x.name, true
		case *chainNode:
			n = x.left
		case *indexNode:
			n = x.left
		case *typeOpNode:
			n = x.left
		case *binNode:
			n = x.left
		case *logicNode:
			n = x.left
		default:
			return "", false
		}
	}
}

// pathSteps appends the steps of n to out; false when n is not a path.
func pathSteps(n node, out []Step) ([]Step, bool) {
	switch x := n.(type) {
	case *memberNode:
		return append(out, Step{Name: x.name}), true
	case *callNode:
		return append(out, Step{Name: x.name, Call: true, Type: x.ts.name, TypeNS: x.ts.ns}), true
	case *chainNode:
		out, ok := pathSteps(x.left, out)
		if !ok {
			return nil, false
		}
		return pathSteps(x.right, out)
	case *indexNode:
		out, ok := pathSteps(x.left, out)
		if !ok {
			return nil, false
		}
		return append(out, Step{Index: true}), true
	case *typeOpNode:
		out, ok := pathSteps(x.left, out)
		if !ok {
			return nil, false
		}
		op := "as"
		if x.isOp {
			op = "is"
		}
		return append(out, Step{Name: op, Operator: true, Type: x.ts.name, TypeNS: x.ts.ns}), true
	}
	return nil, false
}

// walkNodes calls f on n and every node under it.
func walkNodes(n node, f func(node)) {
	f(n)
	switch x := n.(type) {
	case *chainNode:
		walkNodes(x.left, f)
		walkNodes(x.right, f)
	case *indexNode:
		walkNodes(x.left, f)
		walkNodes(x.index, f)
	case *typeOpNode:
		walkNodes(x.left, f)
	case *binNode:
		walkNodes(x.left, f)
		walkNodes(x.right, f)
	case *logicNode:
		walkNodes(x.left, f)
		walkNodes(x.right, f)
	case *negNode:
		walkNodes(x.operand, f)
	case *callNode:
		for _, a := range x.args {
			walkNodes(a, f)
		}
	}
}
