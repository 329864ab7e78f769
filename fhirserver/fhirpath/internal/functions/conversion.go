package functions

import (
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// conversion functions: each toX has a convertsToX twin.
func convPair(conv func(value.Value) (value.Value, bool)) (funcDef, funcDef) {
	to := funcDef{0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		v, ok, err := value.Singleton(in, "conversion")
		if err != nil || !ok {
			return nil, err
		}
		r, ok := conv(value.ToSystem(v))
		if !ok {
			return nil, nil
		}
		return value.Collection{r}, nil
	}}
	converts := funcDef{0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		v, ok, err := value.Singleton(in, "conversion")
		if err != nil || !ok {
			return nil, err
		}
		_, ok = conv(value.ToSystem(v))
		return value.Bools(ok), nil
	}}
	return to, converts
}

var conversionFuncs = buildConversionFuncs()

func buildConversionFuncs() map[string]funcDef {
	conversionFuncs := map[string]funcDef{}
	for name, conv := range map[string]func(value.Value) (value.Value, bool){
		"Boolean": value.ToBoolean, "Integer": value.ToInteger, "Decimal": value.ToDecimal, "String": value.ToString,
		"Date": value.ToDate, "DateTime": value.ToDateTime, "Time": value.ToTime,
	} {
		to, c := convPair(conv)
		conversionFuncs["to"+name] = to
		conversionFuncs["convertsTo"+name] = c
	}
	conversionFuncs["toQuantity"] = funcDef{0, 1, quantityConv(false)}
	conversionFuncs["convertsToQuantity"] = funcDef{0, 1, quantityConv(true)}
	return conversionFuncs
}

func quantityConv(check bool) eval.Func {
	return func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		v, ok, err := value.Singleton(in, "toQuantity()")
		if err != nil || !ok {
			return nil, err
		}
		q, ok := value.ToQuantity(value.ToSystem(v))
		unit, inUnit := "", false
		if ok && len(args) == 1 {
			if unit, inUnit, err = ec.ArgString(args[0], "toQuantity"); err != nil {
				return nil, err
			}
		}
		if ok {
			if q, ok, err = value.QuantityIn(q, unit, inUnit); err != nil {
				return nil, err
			}
		}
		if check {
			return value.Bools(ok), nil
		}
		if !ok {
			return nil, nil
		}
		return value.Collection{q}, nil
	}
}
