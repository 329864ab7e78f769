package syntax

// Kind tells the constructs of the syntax tree apart.
type Kind uint8

const (
	Literal  Kind = iota + 1 // a number, quantity, string, date/time, boolean or {}
	Variable                 // %name, $this, $index, $total
	Member                   // an identifier
	Call                     // a function call
	Chain                    // Left.Right
	Index                    // Left[Right]
	Negate                   // -Left
	TypeOp                   // Left is Type, Left as Type (Name is "is" or "as")
	Binary                   // Left op Right, Name the operator
)

// Node is a node of the syntax tree: an expression as written, with no
// name resolved. Tools that read an expression rather than evaluate it
// build it with Tree.
type Node struct {
	Kind        Kind
	Name        string // Member, Call: the name; Binary: the operator; TypeOp: "is" or "as"
	Left, Right *Node  // the operands (see Kind)
	Args        []*Node
	// TypeNS and Type name the type of the is/as operators and of the
	// is(), as() and ofType() calls (TypeNS when qualified: FHIR.Patient).
	TypeNS, Type string
}

// Tree is the Builder of the syntax tree.
type Tree struct{}

var _ Builder[*Node] = Tree{}

func (Tree) Number(string) (*Node, error)           { return &Node{Kind: Literal}, nil }
func (Tree) Quantity(string, string) (*Node, error) { return &Node{Kind: Literal}, nil }
func (Tree) String(string) *Node                    { return &Node{Kind: Literal} }
func (Tree) DateTime(string) (*Node, error)         { return &Node{Kind: Literal}, nil }
func (Tree) Bool(bool) *Node                        { return &Node{Kind: Literal} }
func (Tree) Empty() *Node                           { return &Node{Kind: Literal} }
func (Tree) Env(name string) *Node                  { return &Node{Kind: Variable, Name: "%" + name} }
func (Tree) This() *Node                            { return &Node{Kind: Variable, Name: "$this"} }
func (Tree) IndexVar() *Node                        { return &Node{Kind: Variable, Name: "$index"} }
func (Tree) Total() *Node                           { return &Node{Kind: Variable, Name: "$total"} }
func (Tree) Member(name string) *Node               { return &Node{Kind: Member, Name: name} }
func (Tree) Chain(left, right *Node) *Node          { return &Node{Kind: Chain, Left: left, Right: right} }
func (Tree) Index(left, index *Node) *Node          { return &Node{Kind: Index, Left: left, Right: index} }
func (Tree) Negate(operand *Node) *Node             { return &Node{Kind: Negate, Left: operand} }

func (Tree) Call(name string, args []*Node) (*Node, error) {
	n := &Node{Kind: Call, Name: name, Args: args}
	switch name {
	case "is", "as", "ofType":
		if len(args) == 1 {
			n.TypeNS, n.Type, _ = TypeName(args[0])
		}
	}
	return n, nil
}

func (Tree) Binary(op string, left, right *Node) (*Node, error) {
	return &Node{Kind: Binary, Name: op, Left: left, Right: right}, nil
}

func (Tree) TypeOp(is bool, left *Node, ns, name string) (*Node, error) {
	op := "as"
	if is {
		op = "is"
	}
	return &Node{Kind: TypeOp, Name: op, Left: left, TypeNS: ns, Type: name}, nil
}

// TypeName reads the argument of is(), as() or ofType() as a type name:
// a name, or a namespace and a name (FHIR.Patient).
func TypeName(n *Node) (ns, name string, ok bool) {
	switch {
	case n.Kind == Member:
		return "", n.Name, true
	case n.Kind == Chain && n.Left.Kind == Member && n.Right.Kind == Member:
		return n.Left.Name, n.Right.Name, true
	}
	return "", "", false
}
