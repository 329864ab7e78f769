package validate

import (
	"encoding/json"
	"math/big"
	"strconv"
)

// equalJSON is deep equality of decoded JSON; numbers compare by value
// whether decoded as json.Number or float64.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number, float64:
		return numEqual(a, b)
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

// containsJSON reports whether inst contains pattern: objects
// recursively, arrays when every pattern item matches some instance item,
// other values by equality.
func containsJSON(inst, pattern any) bool {
	switch p := pattern.(type) {
	case map[string]any:
		m, ok := inst.(map[string]any)
		if !ok {
			return false
		}
		for k, pv := range p {
			iv, ok := m[k]
			if !ok || !containsJSON(iv, pv) {
				return false
			}
		}
		return true
	case []any:
		arr, ok := inst.([]any)
		if !ok {
			// a single instance value against a one-item pattern array
			if len(p) == 1 {
				return containsJSON(inst, p[0])
			}
			return false
		}
		for _, pv := range p {
			found := false
			for _, iv := range arr {
				if containsJSON(iv, pv) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return equalJSON(inst, pattern)
}

func numString(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return ""
}

func numEqual(a, b any) bool {
	sa, sb := numString(a), numString(b)
	if sa == "" || sb == "" {
		return false
	}
	if sa == sb {
		return true
	}
	ra, ok1 := new(big.Rat).SetString(sa)
	rb, ok2 := new(big.Rat).SetString(sb)
	return ok1 && ok2 && ra.Cmp(rb) == 0
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
