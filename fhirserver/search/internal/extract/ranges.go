package extract

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/fhirserver/internal/decimal"
	"github.com/kiln-fhir/kiln/fhirserver/internal/fhirtime"
	"github.com/kiln-fhir/kiln/fhirserver/internal/ucum"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
)

// ucumSystem is the code system of UCUM units.
const ucumSystem = "http://unitsofmeasure.org"

// currencySystem is the code system of Money.currency.
const currencySystem = "urn:iso:std:iso:4217"

func dateEntries(code, typ string, v fhirpath.Value, out []index.Entry) []index.Entry {
	switch typ {
	case "date", "dateTime", "instant", "Date", "DateTime":
		if s, ok := primitive(v); ok {
			if d, err := fhirtime.Parse(s); err == nil {
				out = append(out, index.Entry{Param: code, Kind: index.KindDate, Low: d.Low, High: d.High})
			}
		}
	case "Period":
		if e, ok := periodEntry(code, obj(v)); ok {
			out = append(out, e)
		}
	case "Timing":
		// Each event is a date of its own; the repeat bounds, when a Period,
		// span the whole schedule.
		m := obj(v)
		for _, s := range strs(m, "event") {
			if d, err := fhirtime.Parse(s); err == nil {
				out = append(out, index.Entry{Param: code, Kind: index.KindDate, Low: d.Low, High: d.High})
			}
		}
		if rep, ok := m["repeat"].(map[string]any); ok {
			if bp, ok := rep["boundsPeriod"].(map[string]any); ok {
				if e, ok := periodEntry(code, bp); ok {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// periodEntry spans from the start of start to the end of end; a missing
// end means ongoing (unbounded), a missing start unbounded in the past.
// A Period with neither, or with an unparsable bound, gives nothing.
func periodEntry(code string, m map[string]any) (index.Entry, bool) {
	e := index.Entry{Param: code, Kind: index.KindDate, Low: index.MinTime, High: index.MaxTime}
	start, end := str(m, "start"), str(m, "end")
	if start == "" && end == "" {
		return e, false
	}
	if start != "" {
		d, err := fhirtime.Parse(start)
		if err != nil {
			return e, false
		}
		e.Low = d.Low
	}
	if end != "" {
		d, err := fhirtime.Parse(end)
		if err != nil {
			return e, false
		}
		e.High = d.High
	}
	return e, true
}

// numberLiteral returns the decimal text of a number item.
func numberLiteral(v fhirpath.Value) (string, bool) {
	switch x := v.Raw().(type) {
	case json.Number:
		return string(x), true
	case nil:
		if v.IsSystem() {
			s := v.String()
			return s, s != ""
		}
	}
	if v.IsSystem() {
		return "", false
	}
	s := v.String() // float64 input (decoded without UseNumber)
	return s, s != ""
}

// precisionRange returns the value of a decimal literal and the range its
// implicit precision denotes (decimal.Decimal.Range).
func precisionRange(lit string) (val, low, high *big.Rat, ok bool) {
	d, ok := decimal.Parse(lit)
	if !ok {
		return nil, nil, nil, false
	}
	return d.Range()
}

// isIntegerType reports FHIR and System integer types, which are exact:
// the search page says searches on integers are exact matches.
func isIntegerType(typ string) bool {
	switch typ {
	case "integer", "positiveInt", "unsignedInt", "Integer", "integer64":
		return true
	}
	return false
}

func numberEntries(code, typ string, v fhirpath.Value, out []index.Entry) []index.Entry {
	switch typ {
	case "integer", "positiveInt", "unsignedInt", "Integer", "decimal", "Decimal":
		lit, ok := numberLiteral(v)
		if !ok {
			return out
		}
		e := index.Entry{Param: code, Kind: index.KindNumber}
		if isIntegerType(typ) {
			r, ok := new(big.Rat).SetString(lit)
			if !ok {
				return out
			}
			e.Value, e.NumLow, e.NumHigh = r, r, r
		} else if e.Value, e.NumLow, e.NumHigh, ok = precisionRange(lit); !ok {
			return out
		}
		out = append(out, e)
	case "Range":
		if e, ok := rangeEntry(code, index.KindNumber, obj(v)); ok {
			out = append(out, e)
		}
	}
	return out
}

func quantityEntries(code, typ string, v fhirpath.Value, out []index.Entry) []index.Entry {
	switch typ {
	case "Quantity", "Age", "Duration", "Distance", "Count", "SimpleQuantity", "MoneyQuantity":
		if e, ok := quantityEntry(code, obj(v)); ok {
			out = append(out, e)
		}
	case "Money":
		m := obj(v)
		lit, ok := numLit(m["value"])
		if !ok {
			return out
		}
		e := index.Entry{Param: code, Kind: index.KindQuantity, Code: str(m, "currency"), Unit: str(m, "currency")}
		if e.Code != "" {
			e.System = currencySystem
		}
		if e.Value, e.NumLow, e.NumHigh, ok = precisionRange(lit); ok {
			out = append(out, e)
		}
	case "Range":
		if e, ok := rangeEntry(code, index.KindQuantity, obj(v)); ok {
			out = append(out, e)
		}
	}
	return out
}

func numLit(x any) (string, bool) {
	if n, ok := x.(json.Number); ok {
		return string(n), true
	}
	if f, ok := x.(float64); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
		// Decoded without UseNumber: the shortest form that reads back.
		return strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", false
}

// quantityEntry converts a Quantity: its value with the implicit
// precision range (a comparator opens one side: "<=5" is (-∞, 5], "<5"
// is (-∞, 5) and so never ge5 and always eb5), the
// unit system and code, and the canonical UCUM form when convertible.
func quantityEntry(code string, m map[string]any) (index.Entry, bool) {
	lit, ok := numLit(m["value"])
	if !ok {
		return index.Entry{}, false
	}
	e := index.Entry{Param: code, Kind: index.KindQuantity, System: str(m, "system"), Code: str(m, "code"), Unit: str(m, "unit")}
	if e.Value, e.NumLow, e.NumHigh, ok = precisionRange(lit); !ok {
		return index.Entry{}, false
	}
	switch c := str(m, "comparator"); c {
	case "<", "<=":
		e.NumLow, e.NumHigh, e.Strict = nil, e.Value, c == "<"
	case ">", ">=":
		e.NumLow, e.NumHigh, e.Strict = e.Value, nil, c == ">"
	}
	canonicalize(&e)
	return e, true
}

// canonicalize fills the Canon fields when the unit is UCUM. Special
// (non-linear) units such as Cel are monotonic, so the bounds convert
// bound by bound.
func canonicalize(e *index.Entry) {
	if e.Code == "" || (e.System != "" && e.System != ucumSystem) {
		return
	}
	if e.System == "" {
		return // a bare code may be any unit system's
	}
	cv, cu, ok := ucum.Canonical(e.Value, e.Code)
	if !ok {
		return
	}
	e.CanonValue, e.CanonUnit = cv, cu
	if e.NumLow != nil {
		e.CanonLow, _, _ = ucum.Canonical(e.NumLow, e.Code)
	}
	if e.NumHigh != nil {
		e.CanonHigh, _, _ = ucum.Canonical(e.NumHigh, e.Code)
	}
}

// rangeEntry converts a Range to [low.value, high.value], inclusive as
// stated; a missing side is open. The unit is taken from low, else high.
func rangeEntry(code string, k index.Kind, m map[string]any) (index.Entry, bool) {
	lo, _ := m["low"].(map[string]any)
	hi, _ := m["high"].(map[string]any)
	e := index.Entry{Param: code, Kind: k}
	if l, ok := numLit(lo["value"]); ok {
		e.NumLow, _ = new(big.Rat).SetString(l)
	}
	if h, ok := numLit(hi["value"]); ok {
		e.NumHigh, _ = new(big.Rat).SetString(h)
	}
	if e.NumLow == nil && e.NumHigh == nil {
		return index.Entry{}, false
	}
	if k == index.KindQuantity {
		u := lo
		if str(u, "code") == "" && str(u, "unit") == "" {
			u = hi
		}
		e.System, e.Code, e.Unit = str(u, "system"), str(u, "code"), str(u, "unit")
		if e.System == ucumSystem && e.Code != "" {
			if e.NumLow != nil {
				e.CanonLow, e.CanonUnit, _ = ucum.Canonical(e.NumLow, e.Code)
			}
			if e.NumHigh != nil {
				e.CanonHigh, e.CanonUnit, _ = ucum.Canonical(e.NumHigh, e.Code)
			}
		}
	}
	return e, true
}
