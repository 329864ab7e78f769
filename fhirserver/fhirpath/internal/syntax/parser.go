// Package syntax reads FHIRPath text: the lexer, the grammar of the
// specification (operator precedence, function calls, literals, the scopes
// of $index and $total) and parse errors with the offset where they were
// found. It resolves no names: what each construct becomes is up to a
// Builder, so that evaluation builds its tree directly (package eval) and
// tools that only read an expression use the plain syntax Tree.
package syntax

import (
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// Builder makes the nodes of a tree of type N as the parser reads them.
// An error it returns is reported at the offset of the construct.
type Builder[N comparable] interface {
	Number(text string) (N, error)                      // 12, 1.50
	Quantity(number, unit string) (N, error)            // 4 'mg', 3 days (unit is then the calendar unit, "day")
	String(s string) N                                  // 'text', unescaped
	DateTime(text string) (N, error)                    // @2015-02-04, without the '@'
	Bool(b bool) N                                      // true, false
	Empty() N                                           // {}
	Env(name string) N                                  // %name
	This() N                                            // $this
	IndexVar() N                                        // $index
	Total() N                                           // $total
	Member(name string) N                               // an identifier
	Call(name string, args []N) (N, error)              // name(args…)
	Chain(left, right N) N                              // left.right
	Index(left, index N) N                              // left[index]
	Negate(operand N) N                                 // -operand
	Binary(op string, left, right N) (N, error)         // and the keyword operators: and, or, xor, implies, in, contains, div, mod
	TypeOp(is bool, left N, ns, name string) (N, error) // left is T, left as T (ns is "" unless qualified)
}

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

type parser[N comparable] struct {
	b     Builder[N]
	toks  []token
	i     int
	depth int
	nodes int
	args  int // nesting of function arguments, where $index may be defined
	aggr  int // nesting of aggregate() arguments, where $total is defined
	// unions remembers each '|' operator, its operands, where it stood
	// and whether it was written in parentheses, so that TopLevel can
	// find the top-level union branches.
	unions []unionAt[N]
	record bool // record unions (for TopLevel; Parse does not)
}

// unionAt is a '|' operator: its node and operands, where it stood, and
// whether the union was written in parentheses.
type unionAt[N comparable] struct {
	n, left, right N
	pos            int
	grouped        bool
}

// union returns the record of n when n is a union operator, searching
// back from index from; -1 when it is not. The unions of a left-leaning
// chain were recorded in order, so a walk down the chain searches each
// part of the list once.
func (p *parser[N]) union(n N, from int) int {
	for i := from; i >= 0; i-- {
		if p.unions[i].n == n {
			return i
		}
	}
	return -1
}

func (p *parser[N]) peek() token { return p.toks[p.i] }
func (p *parser[N]) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}
func (p *parser[N]) isOp(s string) bool {
	t := p.toks[p.i]
	return t.kind == tOp && t.text == s
}
func (p *parser[N]) expectOp(s string) error {
	t := p.next()
	if t.kind != tOp || t.text != s {
		return errAt(t.pos, "expected %q, found %q", s, t.text)
	}
	return nil
}

// Parse parses src into the tree b builds.
func Parse[N comparable](src string, b Builder[N]) (N, error) {
	n, _, err := parse(src, b, false)
	return n, err
}

// Branch is one operand of the union at the root of an expression, with
// its source text (untrimmed).
type Branch[N comparable] struct {
	Node   N
	Source string
}

// TopLevel parses src like Parse and also returns the operands of the
// union at its root in source order, or nil when the root is not a union.
// A union written in parentheses is one operand.
func TopLevel[N comparable](src string, b Builder[N]) (N, []Branch[N], error) {
	return parse(src, b, true)
}

func parse[N comparable](src string, b Builder[N], record bool) (N, []Branch[N], error) {
	var zero N
	toks, err := lex(src)
	if err != nil {
		return zero, nil, err
	}
	p := &parser[N]{b: b, toks: toks, record: record}
	n, err := p.expr(precImplies)
	if err != nil {
		return zero, nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return zero, nil, errAt(t.pos, "unexpected %q", t.text)
	}
	if !record {
		return n, nil, nil
	}
	return n, p.topBranches(n, src), nil
}

// topBranches returns the operands of the union at the root of n in
// source order, or nil when the root is not a union. The union operator
// is left-associative, so the chain runs down the left operands; a union
// written in parentheses is one branch.
func (p *parser[N]) topBranches(n N, src string) []Branch[N] {
	type top struct {
		n   N
		end int // where its text ends: the position of the '|' after it
	}
	var rev []top
	end, from := len(src), len(p.unions)-1
	for {
		i := p.union(n, from)
		if i < 0 || p.unions[i].grouped {
			break
		}
		u := p.unions[i]
		rev = append(rev, top{u.right, end})
		end, from = u.pos, i-1
		n = u.left
	}
	if len(rev) == 0 {
		return nil
	}
	out := make([]Branch[N], 0, len(rev)+1)
	out = append(out, Branch[N]{n, src[:end]})
	start := end + 1 // past the '|'
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, Branch[N]{rev[i].n, src[start:rev[i].end]})
		start = rev[i].end + 1
	}
	return out
}

// expr parses a binary expression whose operators bind at least as
// tightly as minPrec (precedence climbing).
func (p *parser[N]) expr(minPrec int) (N, error) {
	var zero N
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxParseDepth {
		return zero, errAt(p.peek().pos, "expression nested too deeply")
	}
	left, err := p.unary()
	if err != nil {
		return zero, err
	}
	for {
		t := p.peek()
		prec := binaryPrec(t)
		if prec == 0 || prec < minPrec {
			return left, nil
		}
		p.next()
		if prec == precType {
			ns, name, err := p.typeSpec()
			if err != nil {
				return zero, err
			}
			if left, err = p.b.TypeOp(t.text == "is", left, ns, name); err != nil {
				return zero, errAt(t.pos, "%v", err)
			}
			continue
		}
		nextMin := prec + 1
		if prec == precImplies {
			nextMin = prec // right associative
		}
		right, err := p.expr(nextMin)
		if err != nil {
			return zero, err
		}
		operand := left
		if left, err = p.b.Binary(t.text, left, right); err != nil {
			return zero, errAt(t.pos, "%v", err)
		}
		if t.text == "|" && p.record {
			p.unions = append(p.unions, unionAt[N]{n: left, left: operand, right: right, pos: t.pos})
		}
	}
}

// typeSpec parses a qualified type name such as FHIR.Patient or String:
// the namespace is the first part when there are several, the name the
// last.
func (p *parser[N]) typeSpec() (ns, name string, err error) {
	t := p.next()
	if t.kind != tIdent && t.kind != tDelimIdent {
		return "", "", errAt(t.pos, "expected a type name")
	}
	parts := []string{t.text}
	for p.isOp(".") && (p.toks[p.i+1].kind == tIdent || p.toks[p.i+1].kind == tDelimIdent) {
		p.next()
		parts = append(parts, p.next().text)
	}
	if len(parts) >= 2 {
		return parts[0], parts[len(parts)-1], nil
	}
	return "", parts[0], nil
}

func (p *parser[N]) unary() (N, error) {
	var zero N
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxParseDepth {
			return zero, errAt(t.pos, "expression nested too deeply")
		}
		operand, err := p.unary()
		if err != nil {
			return zero, err
		}
		if t.text == "+" {
			return operand, nil
		}
		return p.b.Negate(operand), nil
	}
	return p.postfix()
}

func (p *parser[N]) postfix() (N, error) {
	var zero N
	n, err := p.term()
	if err != nil {
		return zero, err
	}
	for {
		switch {
		case p.isOp("."):
			p.next()
			if p.nodes++; p.nodes > maxParseNodes {
				return zero, errAt(p.peek().pos, "expression too large")
			}
			t := p.next()
			if t.kind != tIdent && t.kind != tDelimIdent {
				return zero, errAt(t.pos, "expected a name after '.'")
			}
			if t.kind == tIdent && p.isOp("(") {
				fn, err := p.call(t)
				if err != nil {
					return zero, err
				}
				n = p.b.Chain(n, fn)
			} else {
				n = p.b.Chain(n, p.b.Member(t.text))
			}
		case p.isOp("["):
			p.next()
			idx, err := p.expr(precImplies)
			if err != nil {
				return zero, err
			}
			if err := p.expectOp("]"); err != nil {
				return zero, err
			}
			n = p.b.Index(n, idx)
		default:
			return n, nil
		}
	}
}

func (p *parser[N]) term() (N, error) {
	var zero N
	t := p.next()
	if p.nodes++; p.nodes > maxParseNodes {
		return zero, errAt(t.pos, "expression too large")
	}
	switch t.kind {
	case tNumber:
		// A quantity is a number followed by a unit: a string or a
		// calendar keyword.
		unit, quantity := "", false
		switch u := p.peek(); u.kind {
		case tString:
			unit, quantity = u.text, true
		case tIdent:
			unit, quantity = units.Calendar(u.text)
		}
		if quantity {
			p.next()
			n, err := p.b.Quantity(t.text, unit)
			return n, builderError(err, t.pos)
		}
		n, err := p.b.Number(t.text)
		return n, builderError(err, t.pos)
	case tString:
		return p.b.String(t.text), nil
	case tDateTime:
		n, err := p.b.DateTime(t.text)
		return n, builderError(err, t.pos)
	case tExtConst:
		return p.b.Env(t.text), nil
	case tSpecial:
		switch t.text {
		case "$this":
			return p.b.This(), nil
		case "$index":
			if p.args == 0 {
				return zero, errAt(t.pos, "$index is only defined inside function arguments")
			}
			return p.b.IndexVar(), nil
		default:
			if p.aggr == 0 {
				return zero, errAt(t.pos, "$total is only defined inside aggregate()")
			}
			return p.b.Total(), nil
		}
	case tDelimIdent:
		return p.b.Member(t.text), nil
	case tIdent:
		switch t.text {
		case "true":
			return p.b.Bool(true), nil
		case "false":
			return p.b.Bool(false), nil
		}
		if p.isOp("(") {
			return p.call(t)
		}
		return p.b.Member(t.text), nil
	case tOp:
		switch t.text {
		case "(":
			n, err := p.expr(precImplies)
			if err != nil {
				return zero, err
			}
			if err := p.expectOp(")"); err != nil {
				return zero, err
			}
			// The root of a parenthesised union is the last union made.
			if k := len(p.unions) - 1; k >= 0 && p.unions[k].n == n {
				p.unions[k].grouped = true
			}
			return n, nil
		case "{":
			if err := p.expectOp("}"); err != nil {
				return zero, err
			}
			return p.b.Empty(), nil
		}
	}
	if t.kind == tEOF {
		return zero, errAt(t.pos, "unexpected end of expression")
	}
	return zero, errAt(t.pos, "unexpected %q", t.text)
}

// call parses the argument list of a function and has it resolved.
func (p *parser[N]) call(name token) (N, error) {
	var zero N
	if err := p.expectOp("("); err != nil {
		return zero, err
	}
	var args []N
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
				return zero, err
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
		return zero, err
	}
	n, err := p.b.Call(name.text, args)
	return n, builderError(err, name.pos)
}

// builderError places an error of the Builder at the offset of the
// construct it was building (nil stays nil; the node is then unused).
func builderError(err error, pos int) error {
	if err != nil {
		return errAt(pos, "%v", err)
	}
	return nil
}
