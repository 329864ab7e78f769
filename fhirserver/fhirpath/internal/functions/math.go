package functions

import (
	"fmt"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

// mathFunc adapts a math function of one number (package value) to a
// function implementation.
func mathFunc(f func(v value.Value) (value.Collection, error)) funcDef {
	return funcDef{0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		v, ok, err := value.NumberInput(in, "math")
		if err != nil || !ok {
			return nil, err
		}
		return f(v)
	}}
}

// mathFunc2 adapts a math function of the input number and the number
// its argument gives (log, power).
func mathFunc2(name string, f func(v, arg value.Value) (value.Collection, error)) funcDef {
	return funcDef{1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		v, ok, err := value.NumberInput(in, name)
		if err != nil || !ok {
			return nil, err
		}
		c, err := ec.Arg(args[0])
		if err != nil {
			return nil, err
		}
		a, ok, err := value.NumberInput(c, name)
		if err != nil || !ok {
			return nil, err
		}
		return f(v, a)
	}}
}

var mathFuncs = map[string]funcDef{
	"abs":      mathFunc(value.Abs),
	"ceiling":  mathFunc(value.Ceiling),
	"floor":    mathFunc(value.Floor),
	"truncate": mathFunc(value.Truncate),
	"exp":      mathFunc(value.Exp),
	"ln":       mathFunc(value.Ln),
	"sqrt":     mathFunc(value.Sqrt),
	"log":      mathFunc2("log", value.Log),
	"power":    mathFunc2("power", value.Power),
	"round": {0, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		v, ok, err := value.NumberInput(in, "round")
		if err != nil || !ok {
			return nil, err
		}
		prec := int64(0)
		if len(args) == 1 {
			p, ok, err := ec.ArgInt(args[0])
			if err != nil {
				return nil, err
			}
			if ok {
				if p < 0 {
					return nil, fmt.Errorf("fhirpath: round() precision must be >= 0")
				}
				if p > 100 {
					return nil, nil
				}
				prec = p
			}
		}
		return value.Round(v, prec)
	}},
}
