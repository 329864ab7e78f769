package ucum

import (
	"fmt"
	"math/big"
)

// atom is a resolved atomDef.
type atom struct {
	sym    string
	metric bool
	kind   int
	sp     int
	v      uval // ratio value (for kSpecial: the scale's base unit, K)
}

// ratio returns the atom's ratio value, or errSpecial for special units,
// which may not be combined with anything.
func (a *atom) ratio() (uval, error) {
	if a.kind == kSpecial || a.kind == kUnsupported {
		return uval{}, errSpecial
	}
	return a.v, nil
}

var (
	atoms      map[string]*atom // read-only after init
	prefixVals []*big.Rat       // parallel to prefixDefs
)

func init() {
	if err := buildTable(); err != nil {
		panic(err)
	}
}

func mustRat(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() <= 0 {
		return nil, fmt.Errorf("ucum: bad magnitude %q", s)
	}
	return r, nil
}

// buildTable resolves every atom definition to a magnitude over base units.
func buildTable() error {
	prefixVals = make([]*big.Rat, len(prefixDefs))
	for i, p := range prefixDefs {
		v, err := mustRat(p.val)
		if err != nil {
			return err
		}
		prefixVals[i] = v
	}
	defs := make(map[string]*atomDef, len(atomDefs))
	for i := range atomDefs {
		d := &atomDefs[i]
		if _, dup := defs[d.sym]; dup {
			return fmt.Errorf("ucum: duplicate atom %q", d.sym)
		}
		defs[d.sym] = d
	}
	atoms = make(map[string]*atom, len(atomDefs))
	const (
		resolving = 1
		done      = 2
	)
	state := make(map[string]int, len(atomDefs))
	var resolve func(sym string) (*atom, error)
	resolve = func(sym string) (*atom, error) {
		d, ok := defs[sym]
		if !ok {
			return nil, errUnknownAtom
		}
		switch state[sym] {
		case done:
			return atoms[sym], nil
		case resolving:
			return nil, fmt.Errorf("ucum: cyclic definition of %q", sym)
		}
		state[sym] = resolving
		a := &atom{sym: d.sym, metric: d.metric, kind: d.kind, sp: d.sp}
		switch d.kind {
		case kBase:
			a.v = uval{mag: ratOne, dims: []dimExp{{d.sym, 1}}}
		case kRatio, kSpecial:
			m, err := mustRat(d.val)
			if err != nil {
				return nil, err
			}
			u, err := parseExpr(d.unit, resolve)
			if err != nil {
				return nil, fmt.Errorf("ucum: definition of %q (%q): %w", sym, d.unit, err)
			}
			if a.v, err = mul(uval{mag: m}, u, 1); err != nil {
				return nil, err
			}
		case kUnsupported:
		}
		atoms[sym] = a
		state[sym] = done
		return a, nil
	}
	for _, d := range atomDefs {
		if _, err := resolve(d.sym); err != nil {
			return err
		}
	}
	return nil
}

// lookupAtom is the run-time atom lookup (table is read-only).
func lookupAtom(sym string) (*atom, error) {
	if a, ok := atoms[sym]; ok {
		return a, nil
	}
	return nil, errUnknownAtom
}
