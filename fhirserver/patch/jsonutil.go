package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// maxResultDepth bounds the nesting of a patched resource: FHIR resources
// are never that deep, and a deeper document could not be read back.
const maxResultDepth = 1000

// decode decodes exactly one JSON value, keeping numbers as json.Number.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// encode renders v as compact JSON without HTML escaping.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// checkDuplicateKeys reports the first object member name that occurs
// twice in the same object: encoding/json silently keeps the last one,
// which for a patch document would hide an ambiguous operation.
func checkDuplicateKeys(data []byte) error {
	type frame struct {
		obj       bool
		expectKey bool
		keys      map[string]struct{}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey {
			top := stack[n-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			key, _ := tok.(string)
			if top.keys == nil {
				top.keys = map[string]struct{}{}
			}
			if _, dup := top.keys[key]; dup {
				return fmt.Errorf("duplicate member %q in an object", key)
			}
			top.keys[key] = struct{}{}
			top.expectKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'), json.Delim('}'):
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// deepCopy copies decoded JSON.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// equal compares decoded JSON values as RFC 6902 "test" does: numbers by
// their numeric value, objects regardless of member order.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numbersEqual(string(x), string(y))
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// decimal is a JSON number in a canonical form: value = ±digits × 10^exp
// with no leading or trailing zeros in digits (empty digits is zero).
type decimal struct {
	neg    bool
	digits string
	exp    *big.Int
}

// parseNumber reads JSON number text. It never expands the exponent, so
// 1e999999999 costs nothing.
func parseNumber(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	mant, expText := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	d.exp = new(big.Int)
	if expText != "" {
		expText = strings.TrimPrefix(expText, "+")
		if _, ok := d.exp.SetString(expText, 10); !ok {
			return d, false
		}
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return d, false
		}
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	d.exp.Sub(d.exp, big.NewInt(int64(len(frac))))
	trimmed := strings.TrimRight(digits, "0")
	d.exp.Add(d.exp, big.NewInt(int64(len(digits)-len(trimmed))))
	d.digits = trimmed
	if d.digits == "" {
		d.neg = false
		d.exp.SetInt64(0)
	}
	return d, true
}

// numbersEqual compares two JSON numbers numerically (1.50 == 1.5 == 15e-1).
func numbersEqual(a, b string) bool {
	if a == b {
		return true
	}
	x, ok1 := parseNumber(a)
	y, ok2 := parseNumber(b)
	if !ok1 || !ok2 {
		return false
	}
	return x.neg == y.neg && x.digits == y.digits && x.exp.Cmp(y.exp) == 0
}

// weight approximates the encoded size of v in bytes. It stops counting
// once the total exceeds limit, so measuring a huge value is cheap.
func weight(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			n += 2
			for k, e := range x {
				n += len(k) + 4
				walk(e)
				if n > limit {
					return
				}
			}
		case []any:
			n += 2
			for _, e := range x {
				n++
				walk(e)
				if n > limit {
					return
				}
			}
		case string:
			n += len(x) + 2
		case json.Number:
			n += len(x)
		default:
			n += 5
		}
	}
	walk(v)
	return n
}

// depthExceeds reports whether v nests more than limit levels deep.
func depthExceeds(v any, limit int) bool {
	if limit < 0 {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if depthExceeds(e, limit-1) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if depthExceeds(e, limit-1) {
				return true
			}
		}
	}
	return false
}

// growth tracks the data added by the operations of one patch.
type growth struct {
	left int
}

func newGrowth(resource, patch []byte) *growth {
	return &growth{left: max(growthFactor*(len(resource)+len(patch)), minGrowth)}
}

// take charges the addition of v; false when the budget is exhausted.
func (g *growth) take(v any) bool {
	w := weight(v, g.left)
	if w > g.left {
		g.left = 0
		return false
	}
	g.left -= w
	return true
}
