package fhirpath

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/units"
)

// conversion functions: each toX has a convertsToX twin.
func convPair(conv func(Value) (Value, bool)) (funcDef, funcDef) {
	to := funcDef{0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		v, ok, err := singleton(in, "conversion")
		if err != nil || !ok {
			return nil, err
		}
		r, ok := conv(toSystem(v))
		if !ok {
			return nil, nil
		}
		return Collection{r}, nil
	}}
	converts := funcDef{0, 0, func(_ *evalCtx, in Collection, _ []node) (Collection, error) {
		v, ok, err := singleton(in, "conversion")
		if err != nil || !ok {
			return nil, err
		}
		_, ok = conv(toSystem(v))
		return boolColl(ok), nil
	}}
	return to, converts
}

var conversionFuncs = buildConversionFuncs()

func buildConversionFuncs() map[string]funcDef {
	conversionFuncs := map[string]funcDef{}
	for name, conv := range map[string]func(Value) (Value, bool){
		"Boolean": convBool, "Integer": convInt, "Decimal": convDec, "String": convString,
		"Date": convDate, "DateTime": convDateTime, "Time": convTime,
	} {
		to, c := convPair(conv)
		conversionFuncs["to"+name] = to
		conversionFuncs["convertsTo"+name] = c
	}
	conversionFuncs["toQuantity"] = funcDef{0, 1, quantityConv(false)}
	conversionFuncs["convertsToQuantity"] = funcDef{0, 1, quantityConv(true)}
	return conversionFuncs
}

func convBool(v Value) (Value, bool) {
	switch v.k {
	case kBool:
		return v, true
	case kInt:
		if v.n == 0 || v.n == 1 {
			return boolValue(v.n == 1), true
		}
	case kDec:
		if v.r.Cmp(big.NewRat(1, 1)) == 0 {
			return boolValue(true), true
		}
		if v.r.Sign() == 0 {
			return boolValue(false), true
		}
	case kStr:
		switch strings.ToLower(v.s) {
		case "true", "t", "yes", "y", "1", "1.0":
			return boolValue(true), true
		case "false", "f", "no", "n", "0", "0.0":
			return boolValue(false), true
		}
	}
	return Value{}, false
}

var intRe = regexp.MustCompile(`^[+-]?[0-9]+$`)
var decRe = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?$`)

func convInt(v Value) (Value, bool) {
	switch v.k {
	case kInt:
		return v, true
	case kBool:
		return intValue(v.n), true
	case kStr:
		if intRe.MatchString(v.s) {
			n, err := strconv.ParseInt(v.s, 10, 64)
			if err == nil && n <= maxInt && n >= minInt {
				return intValue(n), true
			}
		}
	}
	return Value{}, false
}

func convDec(v Value) (Value, bool) {
	switch v.k {
	case kDec:
		return v, true
	case kInt:
		return decValue(new(big.Rat).SetInt64(v.n), 0), true
	case kBool:
		return decValue(new(big.Rat).SetInt64(v.n), 1), true
	case kStr:
		if decRe.MatchString(v.s) {
			r, scale, ok := readDecimal(v.s)
			if ok {
				// A Decimal has at most 28 integer digits (larger is not
				// convertible) and 28 fractional digits (rounded).
				d, ok, err := boundDecimal(r, scale)
				return d, ok && err == nil
			}
		}
	}
	return Value{}, false
}

func convString(v Value) (Value, bool) {
	if v.k == kNode {
		return Value{}, false
	}
	s, ok := toStringValue(v)
	if !ok {
		return Value{}, false
	}
	return stringValue(s), true
}

func convDate(v Value) (Value, bool) {
	switch v.k {
	case kDate:
		return v, true
	case kDateTime:
		return dateValue(v.d.AsDate()), true
	case kStr:
		if d, err := datetime.Parse(v.s, datetime.Date); err == nil {
			return dateValue(d), true
		}
	}
	return Value{}, false
}

func convDateTime(v Value) (Value, bool) {
	switch v.k {
	case kDateTime:
		return v, true
	case kDate:
		return dateValue(v.d.AsDateTime()), true
	case kStr:
		if d, err := datetime.Parse(v.s, datetime.DateTime); err == nil {
			return dateValue(d), true
		}
	}
	return Value{}, false
}

func convTime(v Value) (Value, bool) {
	switch v.k {
	case kTime:
		return v, true
	case kStr:
		if d, err := datetime.Parse(strings.TrimPrefix(v.s, "T"), datetime.Time); err == nil {
			return dateValue(d), true
		}
	}
	return Value{}, false
}

var qtyRe = regexp.MustCompile(`^([+-]?[0-9]+(?:\.[0-9]+)?)\s*(?:'([^']+)'|([a-zA-Z]+))?$`)

func quantityConv(check bool) funcImpl {
	return func(ec *evalCtx, in Collection, args []node) (Collection, error) {
		v, ok, err := singleton(in, "toQuantity()")
		if err != nil || !ok {
			return nil, err
		}
		q, ok := convQuantity(toSystem(v))
		if ok && len(args) == 1 {
			unit, uok, err := ec.argString(args[0], "toQuantity")
			if err != nil {
				return nil, err
			}
			if uok && unit != q.s {
				un, _ := units.Normalize(unit)
				qn, _ := units.Normalize(q.s)
				r, cok := units.Convert(q.r, qn, un)
				if !cok {
					ok = false
				} else {
					q = Value{k: kQty, r: r, n: q.n, s: unit}
				}
			}
		}
		if ok {
			// The value is bounded as a Decimal, after any unit
			// conversion (km to nm multiplies by 10^12).
			q, ok, err = boundQuantity(q)
			if err != nil {
				return nil, err
			}
		}
		if check {
			return boolColl(ok), nil
		}
		if !ok {
			return nil, nil
		}
		return Collection{q}, nil
	}
}

func convQuantity(v Value) (Value, bool) {
	switch v.k {
	case kQty:
		return v, true
	case kInt, kDec:
		return makeQuantity(v, "1"), true
	case kBool:
		return makeQuantity(intValue(v.n), "1"), true
	case kStr:
		m := qtyRe.FindStringSubmatch(strings.TrimSpace(v.s))
		if m == nil {
			return Value{}, false
		}
		num, err := parseNumber(strings.TrimPrefix(m[1], "+"))
		if err != nil {
			return Value{}, false
		}
		if strings.HasPrefix(m[1], "-") {
			if num.k == kInt {
				num, _ = parseNumber(m[1])
			}
		}
		unit := "1"
		switch {
		case m[2] != "":
			unit = m[2]
		case m[3] != "":
			cu, ok := units.Calendar(m[3])
			if !ok {
				return Value{}, false
			}
			unit = cu
		}
		return makeQuantity(num, unit), true
	}
	return Value{}, false
}
