package fhirpath

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
	"github.com/kiln-fhir/kiln/fhirserver/internal/decimal"
)

// Binding strength of the binary operators, lowest first, as in the
// grammar of the specification.
const (
	precImplies = iota + 1
	precOr
	precAnd
	precMembership
	precEquality
	precInequality
	precUnion
	precType
	precAdditive
	precMultiplicative
)

func binaryPrec(t token) int {
	switch t.kind {
	case tOp:
		switch t.text {
		case "=", "~", "!=", "!~":
			return precEquality
		case "<", "<=", ">", ">=":
			return precInequality
		case "|":
			return precUnion
		case "+", "-", "&":
			return precAdditive
		case "*", "/":
			return precMultiplicative
		}
	case tIdent:
		switch t.text {
		case "implies":
			return precImplies
		case "or", "xor":
			return precOr
		case "and":
			return precAnd
		case "in", "contains":
			return precMembership
		case "is", "as":
			return precType
		case "div", "mod":
			return precMultiplicative
		}
	}
	return 0
}

// maxParseDepth bounds recursion so pathological expressions fail fast;
// maxParseNodes bounds the size of the tree (evaluation recurses along
// long paths too).
const (
	maxParseDepth = 200
	maxParseNodes = 10000
)

type parser struct {
	toks  []token
	i     int
	depth int
	nodes int
	args  int // nesting of function arguments, where $index may be defined
	aggr  int // nesting of aggregate() arguments, where $total is defined
	// unions remembers where each '|' operator stood and which unions were
	// written in parentheses, so that Compile can find the top-level
	// union branches (see Expression.Branches).
	unions []unionAt
	record bool // record unions (for Branches; Compile does not)
}

// unionAt is a '|' operator: its node, where it stood, and whether the
// union was written in parentheses.
type unionAt struct {
	n       node
	pos     int
	grouped bool
}

// union returns the record of n when n is a union operator, searching
// back from index from; -1 when it is not. The unions of a left-leaning
// chain were recorded in order, so a walk down the chain searches each
// part of the list once.
func (p *parser) union(n node, from int) int {
	for i := from; i >= 0; i-- {
		if p.unions[i].n == n {
			return i
		}
	}
	return -1
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}
func (p *parser) isOp(s string) bool {
	t := p.toks[p.i]
	return t.kind == tOp && t.text == s
}
func (p *parser) expectOp(s string) error {
	t := p.next()
	if t.kind != tOp || t.text != s {
		return errAt(t.pos, "expected %q, found %q", s, t.text)
	}
	return nil
}

// parse parses src; with record, it also returns the top-level union
// branches.
func parse(src string, record bool) (node, []topBranch, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, nil, err
	}
	p := &parser{toks: toks, record: record}
	n, err := p.expr(precImplies)
	if err != nil {
		return nil, nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, nil, errAt(t.pos, "unexpected %q", t.text)
	}
	if !record {
		return n, nil, nil
	}
	return n, p.topBranches(n, len(src)), nil
}

// topBranch is one operand of the union at the root of an expression,
// and where its text ends (the position of the '|' after it).
type topBranch struct {
	n   node
	end int
}

// topBranches returns the operands of the union at the root of n in
// source order, or nil when the root is not a union. The union operator
// is left-associative, so the chain runs down the left operands; a union
// written in parentheses is one branch.
func (p *parser) topBranches(n node, srcLen int) []topBranch {
	var rev []topBranch
	end, from := srcLen, len(p.unions)-1
	for {
		b, ok := n.(*binNode)
		if !ok || b.op != "|" {
			break
		}
		i := p.union(n, from)
		if i < 0 || p.unions[i].grouped {
			break
		}
		rev = append(rev, topBranch{b.right, end})
		end, from = p.unions[i].pos, i-1
		n = b.left
	}
	if len(rev) == 0 {
		return nil
	}
	out := make([]topBranch, 0, len(rev)+1)
	out = append(out, topBranch{n, end})
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// expr parses a binary expression whose operators bind at least as
// tightly as minPrec (precedence climbing).
func (p *parser) expr(minPrec int) (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxParseDepth {
		return nil, errAt(p.peek().pos, "expression nested too deeply")
	}
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		prec := binaryPrec(t)
		if prec == 0 || prec < minPrec {
			return left, nil
		}
		p.next()
		if prec == precType {
			ts, err := p.typeSpec()
			if err != nil {
				return nil, err
			}
			if !knownType(ts) {
				return nil, errAt(t.pos, "unknown type %s", ts.name)
			}
			left = &typeOpNode{isOp: t.text == "is", left: left, ts: ts}
			continue
		}
		nextMin := prec + 1
		if prec == precImplies {
			nextMin = prec // right associative
		}
		right, err := p.expr(nextMin)
		if err != nil {
			return nil, err
		}
		left, err = newBinary(t, left, right)
		if err != nil {
			return nil, err
		}
		if t.text == "|" && p.record {
			p.unions = append(p.unions, unionAt{n: left, pos: t.pos})
		}
	}
}

// typeSpec parses a qualified type name such as FHIR.Patient or String.
func (p *parser) typeSpec() (typeSpec, error) {
	t := p.next()
	if t.kind != tIdent && t.kind != tDelimIdent {
		return typeSpec{}, errAt(t.pos, "expected a type name")
	}
	parts := []string{t.text}
	for p.isOp(".") && (p.toks[p.i+1].kind == tIdent || p.toks[p.i+1].kind == tDelimIdent) {
		p.next()
		parts = append(parts, p.next().text)
	}
	return makeTypeSpec(parts), nil
}

func (p *parser) unary() (node, error) {
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxParseDepth {
			return nil, errAt(t.pos, "expression nested too deeply")
		}
		operand, err := p.unary()
		if err != nil {
			return nil, err
		}
		if t.text == "+" {
			return operand, nil
		}
		// Fold negative literals so that -1 is an Integer literal.
		if lit, ok := operand.(*literalNode); ok && len(lit.val) == 1 {
			if v, ok := negate(lit.val[0]); ok {
				return &literalNode{val: Collection{v}}, nil
			}
		}
		return &negNode{operand: operand, pos: t.pos}, nil
	}
	return p.postfix()
}

func (p *parser) postfix() (node, error) {
	n, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isOp("."):
			p.next()
			if p.nodes++; p.nodes > maxParseNodes {
				return nil, errAt(p.peek().pos, "expression too large")
			}
			t := p.next()
			if t.kind != tIdent && t.kind != tDelimIdent {
				return nil, errAt(t.pos, "expected a name after '.'")
			}
			if t.kind == tIdent && p.isOp("(") {
				fn, err := p.call(t)
				if err != nil {
					return nil, err
				}
				n = &chainNode{left: n, right: fn}
			} else {
				n = &chainNode{left: n, right: newMember(t.text)}
			}
		case p.isOp("["):
			p.next()
			idx, err := p.expr(precImplies)
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("]"); err != nil {
				return nil, err
			}
			n = &indexNode{left: n, index: idx}
		default:
			return n, nil
		}
	}
}

func (p *parser) term() (node, error) {
	t := p.next()
	if p.nodes++; p.nodes > maxParseNodes {
		return nil, errAt(t.pos, "expression too large")
	}
	switch t.kind {
	case tNumber:
		v, err := parseNumber(t.text)
		if err != nil {
			return nil, errAt(t.pos, "%v", err)
		}
		u := p.peek()
		if u.kind == tString {
			p.next()
			return &literalNode{val: Collection{makeQuantity(v, u.text)}}, nil
		}
		if u.kind == tIdent {
			if cu, ok := units.Calendar(u.text); ok {
				p.next()
				return &literalNode{val: Collection{makeQuantity(v, cu)}}, nil
			}
		}
		return &literalNode{val: Collection{v}}, nil
	case tString:
		return &literalNode{val: Collection{stringValue(t.text)}}, nil
	case tDateTime:
		d, err := datetime.ParseLiteral(t.text)
		if err != nil {
			return nil, errAt(t.pos, "%v", err)
		}
		return &literalNode{val: Collection{dateValue(d)}}, nil
	case tExtConst:
		return &envNode{name: t.text}, nil
	case tSpecial:
		switch t.text {
		case "$this":
			return thisNode{}, nil
		case "$index":
			if p.args == 0 {
				return nil, errAt(t.pos, "$index is only defined inside function arguments")
			}
			return indexVarNode{}, nil
		default:
			if p.aggr == 0 {
				return nil, errAt(t.pos, "$total is only defined inside aggregate()")
			}
			return totalNode{}, nil
		}
	case tDelimIdent:
		return newMember(t.text), nil
	case tIdent:
		switch t.text {
		case "true":
			return &literalNode{val: Collection{boolValue(true)}}, nil
		case "false":
			return &literalNode{val: Collection{boolValue(false)}}, nil
		}
		if p.isOp("(") {
			return p.call(t)
		}
		return newMember(t.text), nil
	case tOp:
		switch t.text {
		case "(":
			n, err := p.expr(precImplies)
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			// The root of a parenthesised union is the last union made.
			if k := len(p.unions) - 1; k >= 0 && p.unions[k].n == n {
				p.unions[k].grouped = true
			}
			return n, nil
		case "{":
			if err := p.expectOp("}"); err != nil {
				return nil, err
			}
			return &literalNode{}, nil
		}
	}
	if t.kind == tEOF {
		return nil, errAt(t.pos, "unexpected end of expression")
	}
	return nil, errAt(t.pos, "unexpected %q", t.text)
}

// call parses the argument list of a function and resolves the function.
func (p *parser) call(name token) (node, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	var args []node
	p.args++
	defer func() { p.args-- }()
	if name.text == "aggregate" {
		p.aggr++
		defer func() { p.aggr-- }()
	}
	if !p.isOp(")") {
		for {
			a, err := p.expr(precImplies)
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.isOp(",") {
				p.next()
				continue
			}
			break
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	return newCall(name, args)
}

// parseNumber turns an integer or decimal literal into a Value.
func parseNumber(s string) (Value, error) {
	if !strings.Contains(s, ".") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n <= maxInt && n >= minInt {
			return intValue(n), nil
		}
	}
	r, scale, ok := readDecimal(s)
	if !ok {
		return Value{}, errAt(0, "invalid number %q", s)
	}
	return decValue(r, scale), nil
}

// readDecimal reads decimal text into the exact value and the scale (the
// digits written after the point) a Decimal value holds.
func readDecimal(s string) (*big.Rat, int, bool) {
	d, ok := decimal.Parse(s)
	if !ok {
		return nil, 0, false
	}
	r, ok := d.Rat()
	return r, d.Scale(), ok
}
