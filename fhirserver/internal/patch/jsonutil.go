package patch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kiln-fhir/kiln/fhirserver/internal/decimal"
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

// numbersEqual compares two JSON numbers numerically (1.50 == 1.5 == 15e-1)
// without expanding their exponents.
func numbersEqual(a, b string) bool {
	if a == b {
		return true
	}
	x, ok1 := decimal.Parse(a)
	y, ok2 := decimal.Parse(b)
	return ok1 && ok2 && decimal.Equal(x, y)
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
