package ucum

import (
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

func rat(t testing.TB, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad rational %q", s)
	}
	return r
}

// ratExpr evaluates a product/quotient of decimals such as "1/0.45359237".
func ratExpr(t testing.TB, s string) *big.Rat {
	t.Helper()
	out := big.NewRat(1, 1)
	op := byte('*')
	for len(s) > 0 {
		i := strings.IndexAny(s, "*/")
		tok := s
		if i >= 0 {
			tok = s[:i]
		}
		v := rat(t, tok)
		if op == '*' {
			out.Mul(out, v)
		} else {
			out.Quo(out, v)
		}
		if i < 0 {
			break
		}
		op, s = s[i], s[i+1:]
	}
	return out
}

func TestConvert(t *testing.T) {
	tests := []struct {
		in       string
		from, to string
		want     string // ratExpr
	}{
		{"1", "mg", "g", "0.001"},
		{"1", "g", "mg", "1000"},
		{"5", "mg", "g", "0.005"},
		{"1", "kg", "[lb_av]", "1/0.45359237"},
		{"1", "[lb_av]", "kg", "0.45359237"},
		{"1", "[lb_av]", "[oz_av]", "16"},
		{"1", "[oz_av]", "g", "28.349523125"},
		{"1", "[gr]", "mg", "64.79891"},
		{"1", "[in_i]", "cm", "2.54"},
		{"1", "[ft_i]", "m", "0.3048"},
		{"1", "[yd_i]", "[ft_i]", "3"},
		{"1", "[mi_i]", "km", "1.609344"},
		{"1", "[ft_us]", "m", "1200/3937"},
		{"1", "[gal_us]", "L", "3.785411784"},
		{"1", "[foz_us]", "mL", "29.5735295625"},
		{"1", "[gal_br]", "l", "4.54609"},
		{"1", "h", "min", "60"},
		{"1", "d", "s", "86400"},
		{"1", "wk", "d", "7"},
		{"1", "a", "d", "365.25"},
		{"1", "mo", "d", "30.4375"},
		{"1", "a_g", "d", "365.2425"},
		{"1", "mo_g", "d", "30.436875"},
		{"1", "mm[Hg]", "Pa", "133.322"},
		{"1", "cm[H2O]", "Pa", "98.0665"},
		{"1", "[psi]", "Pa", "0.45359237*9.80665/0.00064516"},
		{"1", "atm", "Pa", "101325"},
		{"1", "bar", "kPa", "100"},
		{"37", "Cel", "K", "310.15"},
		{"310.15", "K", "Cel", "37"},
		{"98.6", "[degF]", "Cel", "37"},
		{"37", "Cel", "[degF]", "98.6"},
		{"310.15", "K", "[degF]", "98.6"},
		{"32", "[degF]", "K", "273.15"},
		{"0", "Cel", "mK", "273150"},
		{"1", "[degR]", "K", "5/9"},
		{"80", "[degRe]", "Cel", "100"},
		{"1", "mg/dL", "g/L", "0.01"},
		{"1", "g/dL", "mg/mL", "10"},
		{"1", "g%", "g/dL", "1"},
		{"1", "mmol/L", "umol/mL", "1"},
		{"1", "meq/L", "mmol/L", "1"},
		{"1", "mCel", "K", "273.151"},
		{"273.151", "K", "mCel", "1"},
		{"1", "kCel", "Cel", "1000"},
		{"1", "mosm/kg", "mmol/kg", "1"},
		{"1", "10*3/uL", "10*9/L", "1"},
		{"1", "10^3/uL", "10*9/L", "1"},
		{"1", "10*-3", "1", "0.001"},
		{"1", "km/h", "m/s", "5/18"},
		{"1", "/min", "Hz", "1/60"},
		{"60", "/min", "/s", "1"},
		{"1", "{beats}/min", "/min", "1"},
		{"1", "/min", "{beats}/min", "1"},
		{"50", "%", "1", "0.5"},
		{"1", "1", "%", "100"},
		{"1", "[ppm]", "[ppb]", "1000"},
		{"1", "m2", "cm2", "10000"},
		{"1", "cm3", "mL", "1"},
		{"1", "L", "dm3", "1"},
		{"1", "kg/m2", "g/cm2", "0.1"},
		{"1", "N", "kg.m/s2", "1"},
		{"1", "N", "kg.m.s-2", "1"},
		{"1", "Pa", "N/m2", "1"},
		{"1", "J", "W.s", "1"},
		{"1", "cal", "J", "4.184"},
		{"1", "kcal", "kJ", "4.184"},
		{"1", "[Cal]", "cal", "1000"},
		{"1", "eV", "J", "1.60217733e-19"},
		{"1", "V", "W/A", "1"},
		{"1", "Ohm", "V/A", "1"},
		{"1", "S", "A/V", "1"},
		{"1", "mho", "S", "1"},
		{"1", "T", "Wb/m2", "1"},
		{"1", "G", "T", "1e-4"},
		{"1", "Bq", "Hz", "1"},
		{"1", "Ci", "GBq", "37"},
		{"1", "Gy", "J/kg", "1"},
		{"1", "RAD", "cGy", "1"},
		{"1", "kat", "mol/s", "1"},
		{"1", "U", "nkat", "50/3"},
		{"1", "[drp]", "mL", "1/20"},
		{"1", "t", "kg", "1000"},
		{"1", "ar", "m2", "100"},
		{"1", "sr", "rad2", "1"},
		{"1", "lx", "cd.sr/m2", "1"},
		{"1", "By", "bit", "8"},
		{"1", "KiBy", "By", "1024"},
		{"1", "[iU]", "[IU]", "1"},
		{"1", "[iU]/mL", "[iU]/L", "1000"},
		{"1", "m[iU]", "[iU]", "0.001"},
		{"1", "[arb'U]/mL", "[arb'U]/L", "1000"},
		{"1", "(m)", "((cm))", "100"},
		{"1", "m/s/s", "m/s2", "1"},
		{"1", "mg/kg/d", "ug/kg/h", "1000/24"},
		{"1", "mL/(kg.min)", "L/kg/h", "0.06"},
		{"3", "10.mg", "mg", "30"},
		{"1", "[pH]", "[pH]", "1"},
		{"1", "mm[Hg]", "[in_i'Hg]", "1/25.4"},
	}
	for _, tt := range tests {
		in := rat(t, tt.in)
		keep := new(big.Rat).Set(in)
		got, ok := Convert(in, tt.from, tt.to)
		if !ok {
			t.Errorf("Convert(%s, %q, %q): ok=false", tt.in, tt.from, tt.to)
			continue
		}
		want := ratExpr(t, tt.want)
		if got.Cmp(want) != 0 {
			t.Errorf("Convert(%s, %q, %q) = %s, want %s", tt.in, tt.from, tt.to, got.RatString(), want.RatString())
		}
		if in.Cmp(keep) != 0 {
			t.Errorf("Convert(%s, %q, %q) mutated its argument", tt.in, tt.from, tt.to)
		}
		if got == in {
			t.Errorf("Convert(%s, %q, %q) returned its argument", tt.in, tt.from, tt.to)
		}
	}
}

func TestConvertFails(t *testing.T) {
	tests := []struct{ from, to string }{
		// Incommensurable.
		{"mg", "mL"}, {"s", "m"}, {"g", "mol"}, {"mmol/L", "mg/dL"}, {"Hz", "1"},
		{"[iU]", "mg"}, {"[iU]", "[arb'U]"}, {"[iU]", "1"}, {"[iU]/mL", "/mL"},
		{"Cel", "m"}, {"[degF]", "s"}, {"%", "mg"},
		// Special units in compound expressions, or not convertible.
		{"Cel/h", "K/h"}, {"K/h", "Cel/h"}, {"Cel.m", "K.m"}, {"2.Cel", "K"}, {"Cel2", "K2"},
		{"(Cel)", "K"}, {"dB", "B"}, {"kmin", "min"}, {"[degF]/h", "K/h"},
		{"[pH]", "mol/L"}, {"B", "B[W]"}, {"Np", "1"},
		// Unknown atoms.
		{"foo", "g"}, {"g", "foo"}, {"[foo]", "1"}, {"Kg", "g"}, {"kmin", "s"},
		{"k[in_i]", "m"}, {"mcg", "ug"}, {"mEq/L", "mmol/L"},
		// Malformed.
		{"", "g"}, {"g", ""}, {" ", "1"}, {"mg//L", "g/L"}, {"m^", "m"}, {"mg/", "g"},
		{"/", "1"}, {"(mg", "g"}, {"mg)", "g"}, {"()", "1"}, {"{abc", "1"}, {"m{", "m"},
		{"mg L", "g/L"}, {"m2.", "m2"}, {".m", "m"}, {"m-", "m"}, {"0", "1"},
		{"0/L", "/L"}, {"[lb_av", "g"}, {"kg]", "g"}, {"m12345", "m"}, {"m\u00b2", "m2"},
		{"1e3", "1"}, {"mg}", "mg"}, {"{a{b}}", "1"}, {"m 2", "m2"},
	}
	for _, tt := range tests {
		if got, ok := Convert(big.NewRat(1, 1), tt.from, tt.to); ok {
			t.Errorf("Convert(1, %q, %q) = %s, true; want ok=false", tt.from, tt.to, got.RatString())
		}
	}
	if _, ok := Convert(nil, "g", "mg"); ok {
		t.Error("Convert(nil) ok=true")
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, unit  string
		want      string
		wantCanon string
	}{
		{"5", "mg", "1/200", "g"},
		{"1", "km/h", "5/18", "m.s-1"},
		{"1", "mg/dL", "10", "g.m-3"},
		{"0.01", "g/L", "10", "g.m-3"},
		{"1", "Pa", "1000", "g.m-1.s-2"},
		{"1", "N", "1000", "g.m.s-2"},
		{"37", "Cel", "310.15", "K"},
		{"98.6", "[degF]", "310.15", "K"},
		{"50", "%", "1/2", "1"},
		{"1", "{beats}/min", "1/60", "s-1"},
		{"2", "mmol/L", "2", "m-3.mol"},
		{"1", "[iU]/mL", "1000000", "[iU].m-3"},
		{"1", "1", "1", "1"},
		{"1", "V", "1000", "C-1.g.m2.s-2"},
	}
	for _, tt := range tests {
		in := rat(t, tt.in)
		keep := new(big.Rat).Set(in)
		got, canon, ok := Canonical(in, tt.unit)
		if !ok {
			t.Errorf("Canonical(%s, %q): ok=false", tt.in, tt.unit)
			continue
		}
		if want := rat(t, tt.want); got.Cmp(want) != 0 || canon != tt.wantCanon {
			t.Errorf("Canonical(%s, %q) = %s %q, want %s %q", tt.in, tt.unit, got.RatString(), canon, want.RatString(), tt.wantCanon)
		}
		if in.Cmp(keep) != 0 || got == in {
			t.Errorf("Canonical(%s, %q) mutated or returned its argument", tt.in, tt.unit)
		}
		// The canonical unit string is itself a valid unit, convertible
		// 1:1 from the canonical value.
		if back, ok := Convert(got, canon, tt.unit); !ok || back.Cmp(in) != 0 {
			t.Errorf("Convert(canonical %s %q -> %q) = %v, %v; want %s", got.RatString(), canon, tt.unit, back, ok, tt.in)
		}
	}
	for _, bad := range []string{"", "foo", "Cel/h", "[pH]", "mg//L"} {
		if _, _, ok := Canonical(big.NewRat(1, 1), bad); ok {
			t.Errorf("Canonical(%q) ok=true", bad)
		}
	}
	if _, _, ok := Canonical(nil, "g"); ok {
		t.Error("Canonical(nil) ok=true")
	}
}

func TestCanonicalEqualStrings(t *testing.T) {
	groups := [][]string{
		{"mg/dL", "g/L", "kg/m3", "ug/uL", "g%"},
		{"/min", "Hz", "s-1", "{beats}/min", "Bq", "/h"},
		{"N", "kg.m/s2", "dyn", "[lbf_av]"},
		{"Pa", "mm[Hg]", "bar", "atm", "[psi]", "cm[H2O]"},
		{"mmol/L", "meq/L", "mol/m3", "umol/mL"},
		{"L", "mL", "m3", "[gal_us]", "[foz_us]", "[drp]"},
		{"Cel", "K", "[degF]", "mK"},
		{"1", "%", "10*3", "{count}", "[ppm]", "[pi]"},
		{"[iU]", "[IU]", "m[IU]"},
	}
	for _, g := range groups {
		_, first, ok := Canonical(big.NewRat(1, 1), g[0])
		if !ok {
			t.Fatalf("Canonical(%q) failed", g[0])
		}
		for _, u := range g[1:] {
			_, c, ok := Canonical(big.NewRat(1, 1), u)
			if !ok || c != first {
				t.Errorf("Canonical(%q) = %q, %v; want %q (as %q)", u, c, ok, first, g[0])
			}
		}
	}
	_, a, _ := Canonical(big.NewRat(1, 1), "mg")
	_, b, _ := Canonical(big.NewRat(1, 1), "mL")
	if a == b {
		t.Errorf("mg and mL share canonical unit %q", a)
	}
}

func TestValid(t *testing.T) {
	valid := []string{
		"1", "m", "mg", "mg/dL", "MG", "10*3/uL", "10^3/uL", "10*-3", "/min", "{beats}/min", "{rbc}",
		"%", "[ppm]", "mm[Hg]", "cm[H2O]", "[lb_av]", "[in_i]", "[degF]", "Cel", "[iU]", "[IU]/L",
		"[pH]", "kg/m2", "m2", "s-1", "m+2", "(kg.m)/s2", "mL/(kg.min)", "mg{creat}/g", "[arb'U]",
		"[CCID_50]", "B[10.nV]", "%[slope]", "''", "'", "mo_j", "a_t", "umol/min", "ng/mL", "dB",
		"10.mg", "4.[pi]", "{a b}", "{#}", "[in_i'H2O]", "cal_[15]", "[m/s2/Hz^(1/2)]", "KiBy",
	}
	for _, u := range valid {
		if !Valid(u) {
			t.Errorf("Valid(%q) = false", u)
		}
	}
	invalid := []string{
		"", " ", "mg//L", "m^", "foo", "Cel/h", "mCel.m", "{", "}", "[", "]", "()", "m.", "/",
		"mg/", "0", "m-", "kg ", "Kg", "kmin", "mg{a}{b}", "m(2)", "m)", "(m",
	}
	for _, u := range invalid {
		if Valid(u) {
			t.Errorf("Valid(%q) = true", u)
		}
	}
}

// TestTable checks that every atom resolves, is valid on its own, and
// that metric atoms accept prefixes.
func TestTable(t *testing.T) {
	if len(atoms) != len(atomDefs) {
		t.Fatalf("resolved %d atoms, have %d definitions", len(atoms), len(atomDefs))
	}
	for _, d := range atomDefs {
		if !Valid(d.sym) {
			t.Errorf("atom %q is not Valid", d.sym)
		}
		if d.kind == kRatio || d.kind == kBase {
			if got, ok := Convert(big.NewRat(1, 1), d.sym, d.sym); !ok || got.Cmp(big.NewRat(1, 1)) != 0 {
				t.Errorf("Convert(1, %q, %q) = %v, %v", d.sym, d.sym, got, ok)
			}
			if d.metric {
				if got, ok := Convert(big.NewRat(1, 1), "k"+d.sym, d.sym); !ok || got.Cmp(big.NewRat(1000, 1)) != 0 {
					t.Errorf("Convert(1, %q, %q) = %v, %v", "k"+d.sym, d.sym, got, ok)
				}
			}
		}
	}
}

// TestHostileInputBounded checks that pathological expressions are
// rejected (or accepted) quickly rather than building huge magnitudes.
func TestHostileInputBounded(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("[pi]70.", 73)[:510],
		strings.Repeat("Ym999.", 85)[:509],
		strings.Repeat("[lb_av]99/", 50)[:500],
		strings.Repeat("(", 40) + "m" + strings.Repeat(")", 40),
		strings.Repeat("9", 511),
		strings.Repeat("m", 100000),
		strings.Repeat("[in_br]40/[ft_us]40.", 25)[:500],
		"m9999", "m1001", "m1000.m1",
	} {
		start := time.Now()
		Canonical(big.NewRat(1, 3), s)
		if d := time.Since(start); d > 30*time.Second { // a hang, not a speed check
			t.Errorf("Canonical(%.40q...) took %v", s, d)
		}
	}
	if Valid("m1001") || Valid("m1000.m1") || !Valid("m1000") {
		t.Error("exponent limit not applied")
	}
}

func TestConcurrent(t *testing.T) {
	units := []string{"mg", "g", "kg", "mg/dL", "g/L", "[lb_av]", "km/h", "m/s", "Cel", "K"}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			v := big.NewRat(int64(g+1), 3)
			for i := 0; i < 200; i++ {
				from, to := units[(i+g)%len(units)], units[(i*7+g)%len(units)]
				Convert(v, from, to)
				Canonical(v, from)
				Valid(to)
			}
			if v.Cmp(big.NewRat(int64(g+1), 3)) != 0 {
				t.Errorf("argument mutated")
			}
		}(g)
	}
	wg.Wait()
}
