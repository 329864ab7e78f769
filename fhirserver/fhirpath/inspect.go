package fhirpath

import (
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/syntax"
)

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
	// parameters and validation); the syntax tree of the same source
	// has them, and reading it cannot fail as the source compiled.
	root, tops, err := syntax.TopLevel(e.src, syntax.Tree{})
	var out []Branch
	switch {
	case err != nil:
		out = []Branch{{Source: strings.TrimSpace(e.src)}}
	case tops == nil:
		out = []Branch{inspectBranch(root, e.src)}
	default:
		out = make([]Branch, len(tops))
		for i, t := range tops {
			out[i] = inspectBranch(t.Node, t.Source)
		}
	}
	e.branches.Store(&out)
	return out
}

func inspectBranch(n *syntax.Node, src string) Branch {
	b := Branch{Source: strings.TrimSpace(src)}
	b.First, b.FirstCall = firstName(n)
	b.Path, _ = pathSteps(n, nil)
	walkNodes(n, func(n *syntax.Node) {
		switch {
		case n.Kind == syntax.Binary && n.Name == "|":
			b.Union = true
		case n.Kind == syntax.Variable:
			b.Variables = true
		}
	})
	return b
}

// firstName follows the input side of n down to where evaluation starts.
func firstName(n *syntax.Node) (name string, call bool) {
	for {
		switch n.Kind {
		case syntax.Member:
			return n.Name, false
		case syntax.Call:
			return n.Name, true
		case syntax.Chain, syntax.Index, syntax.TypeOp, syntax.Binary:
			n = n.Left
		default:
			return "", false
		}
	}
}

// pathSteps appends the steps of n to out; false when n is not a path.
func pathSteps(n *syntax.Node, out []Step) ([]Step, bool) {
	switch n.Kind {
	case syntax.Member:
		return append(out, Step{Name: n.Name}), true
	case syntax.Call:
		return append(out, Step{Name: n.Name, Call: true, Type: n.Type, TypeNS: n.TypeNS}), true
	case syntax.Chain:
		out, ok := pathSteps(n.Left, out)
		if !ok {
			return nil, false
		}
		return pathSteps(n.Right, out)
	case syntax.Index:
		out, ok := pathSteps(n.Left, out)
		if !ok {
			return nil, false
		}
		return append(out, Step{Index: true}), true
	case syntax.TypeOp:
		out, ok := pathSteps(n.Left, out)
		if !ok {
			return nil, false
		}
		return append(out, Step{Name: n.Name, Operator: true, Type: n.Type, TypeNS: n.TypeNS}), true
	}
	return nil, false
}

// walkNodes calls f on n and every node under it.
func walkNodes(n *syntax.Node, f func(*syntax.Node)) {
	if n == nil {
		return
	}
	f(n)
	walkNodes(n.Left, f)
	walkNodes(n.Right, f)
	for _, a := range n.Args {
		walkNodes(a, f)
	}
}
