package patch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// jsonOp is one validated operation of a JSON Patch document.
type jsonOp struct {
	op       string
	path     []string
	pathText string
	from     []string
	fromText string
	value    any
}

func (o *jsonOp) desc() string {
	if o.op == "move" || o.op == "copy" {
		return fmt.Sprintf("%s %s to %s", o.op, quotePointer(o.fromText), quotePointer(o.pathText))
	}
	return o.op + " " + quotePointer(o.pathText)
}

func quotePointer(p string) string {
	if p == "" {
		return `""`
	}
	return p
}

// JSONPatch applies an RFC 6902 JSON Patch document to the JSON of a FHIR
// resource and returns the patched JSON. The patch is atomic: on error
// nothing is returned. Errors about the patch are *Error values.
func JSONPatch(resource, patch []byte) ([]byte, error) {
	ops, err := parseJSONPatch(patch)
	if err != nil {
		return nil, err
	}
	doc, err := decode(resource)
	if err != nil {
		return nil, fmt.Errorf("patch: the resource is not valid JSON: %w", err)
	}
	g := newGrowth(resource, patch)
	for i := range ops {
		if doc, err = applyJSONOp(doc, &ops[i], g); err != nil {
			if e, ok := err.(*Error); ok {
				e.Op, e.Desc = i, ops[i].desc()
			}
			return nil, err
		}
	}
	if err := checkResult(doc); err != nil {
		return nil, err
	}
	return encode(doc)
}

// checkResult applies the checks every patched resource must pass.
func checkResult(doc any) error {
	if _, ok := doc.(map[string]any); !ok {
		return unprocessable(-1, "", "the patched resource is not a JSON object")
	}
	if depthExceeds(doc, maxResultDepth) {
		return unprocessable(-1, "", "the patched resource nests more than %d levels deep", maxResultDepth)
	}
	return nil
}

// parseJSONPatch validates the whole document before anything is applied,
// so every syntax error is a 400 whatever the resource.
func parseJSONPatch(patch []byte) ([]jsonOp, error) {
	if err := checkDuplicateKeys(patch); err != nil {
		return nil, &Error{Status: 400, Op: -1, Msg: "the JSON Patch document is not valid JSON: " + err.Error(), Err: err}
	}
	v, err := decode(patch)
	if err != nil {
		return nil, &Error{Status: 400, Op: -1, Msg: "the JSON Patch document is not valid JSON: " + err.Error(), Err: err}
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest(-1, "", "a JSON Patch document must be a JSON array of operations")
	}
	if len(list) > MaxOperations {
		return nil, badRequest(-1, "", "the patch has %d operations, more than the limit of %d", len(list), MaxOperations)
	}
	ops := make([]jsonOp, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, badRequest(i, "", "an operation must be a JSON object")
		}
		o := &ops[i]
		opName, ok := m["op"].(string)
		if !ok {
			return nil, badRequest(i, "", `missing or non-string member "op"`)
		}
		o.op = opName
		switch opName {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return nil, badRequest(i, "", "unknown op %q (expected add, remove, replace, move, copy or test)", opName)
		}
		if o.pathText, ok = m["path"].(string); !ok {
			return nil, badRequest(i, "", `%s: missing or non-string member "path"`, opName)
		}
		if o.path, err = parsePointer(o.pathText); err != nil {
			return nil, badRequest(i, "", "%s: path %q: %v", opName, o.pathText, err)
		}
		switch opName {
		case "add", "replace", "test":
			if o.value, ok = m["value"]; !ok {
				return nil, badRequest(i, o.desc(), `missing member "value"`)
			}
		case "move", "copy":
			if o.fromText, ok = m["from"].(string); !ok {
				return nil, badRequest(i, "", `%s: missing or non-string member "from"`, opName)
			}
			if o.from, err = parsePointer(o.fromText); err != nil {
				return nil, badRequest(i, "", "%s: from %q: %v", opName, o.fromText, err)
			}
			if opName == "move" && len(o.from) < len(o.path) && isPrefix(o.from, o.path) {
				return nil, badRequest(i, o.desc(), "cannot move a value into one of its own children")
			}
		}
	}
	return ops, nil
}

func isPrefix(p, of []string) bool {
	if len(p) > len(of) {
		return false
	}
	for i := range p {
		if p[i] != of[i] {
			return false
		}
	}
	return true
}

// parsePointer splits an RFC 6901 JSON Pointer into unescaped tokens.
func parsePointer(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] != '/' {
		return nil, errors.New(`a JSON Pointer must be empty or start with "/"`)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if !strings.Contains(p, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			c := p[j]
			if c != '~' {
				b.WriteByte(c)
				continue
			}
			if j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return nil, errors.New(`"~" must be followed by "0" or "1"`)
			}
			if p[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return parts, nil
}

// pointerText renders tokens back as a pointer, for messages.
func pointerText(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return quotePointer(b.String())
}

// arrayIndex reads an array index token. With allowEnd, "-" and n (one
// past the last element) are accepted, as add needs.
func arrayIndex(tok string, n int, allowEnd bool) (int, error) {
	if tok == "-" {
		if allowEnd {
			return n, nil
		}
		return 0, errors.New(`"-" refers to the nonexistent element after the last one`)
	}
	if tok == "" || len(tok) > 10 {
		return 0, fmt.Errorf("%q is not an array index", tok)
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an array index", tok)
		}
	}
	if len(tok) > 1 && tok[0] == '0' {
		return 0, fmt.Errorf("array index %q has a leading zero", tok)
	}
	i, err := strconv.Atoi(tok)
	if err != nil {
		return 0, fmt.Errorf("%q is not an array index", tok)
	}
	limit := n - 1
	if allowEnd {
		limit = n
	}
	if i > limit {
		return 0, fmt.Errorf("index %d is out of bounds (array length %d)", i, n)
	}
	return i, nil
}

// get returns the value a pointer refers to.
func get(doc any, tokens []string) (any, error) {
	cur := doc
	for i, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("%s does not exist", pointerText(tokens[:i+1]))
			}
			cur = v
		case []any:
			j, err := arrayIndex(t, len(c), false)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", pointerText(tokens[:i+1]), err)
			}
			cur = c[j]
		default:
			return nil, fmt.Errorf("%s does not exist: %s is not an object or array", pointerText(tokens[:i+1]), pointerText(tokens[:i]))
		}
	}
	return cur, nil
}

// update replaces the container the pointer's parent refers to with
// fn(container). Objects change in place; arrays may be reallocated, so
// the new value is stored back into its own parent.
func update(node any, tokens []string, done []string, fn func(any) (any, error)) (any, error) {
	if len(tokens) == 0 {
		return fn(node)
	}
	t := tokens[0]
	here := done[:len(done)+1]
	switch c := node.(type) {
	case map[string]any:
		child, ok := c[t]
		if !ok {
			return nil, fmt.Errorf("%s does not exist", pointerText(here))
		}
		v, err := update(child, tokens[1:], here, fn)
		if err != nil {
			return nil, err
		}
		c[t] = v
		return c, nil
	case []any:
		j, err := arrayIndex(t, len(c), false)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", pointerText(here), err)
		}
		v, err := update(c[j], tokens[1:], here, fn)
		if err != nil {
			return nil, err
		}
		c[j] = v
		return c, nil
	}
	return nil, fmt.Errorf("%s does not exist: %s is not an object or array", pointerText(here), pointerText(done))
}

// atParent runs fn on the container holding the last token of path.
func atParent(doc any, path []string, fn func(parent any, last string) (any, error)) (any, error) {
	parent, last := path[:len(path)-1], path[len(path)-1]
	return update(doc, parent, path[:0], func(p any) (any, error) { return fn(p, last) })
}

func addValue(doc any, path []string, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	return atParent(doc, path, func(p any, last string) (any, error) {
		switch c := p.(type) {
		case map[string]any:
			c[last] = value
			return c, nil
		case []any:
			j, err := arrayIndex(last, len(c), true)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", pointerText(path), err)
			}
			c = append(c, nil)
			copy(c[j+1:], c[j:])
			c[j] = value
			return c, nil
		}
		return nil, fmt.Errorf("cannot add %s: %s is not an object or array", pointerText(path), pointerText(path[:len(path)-1]))
	})
}

func removeValue(doc any, path []string) (any, error) {
	if len(path) == 0 {
		return nil, errors.New("cannot remove the whole resource")
	}
	return atParent(doc, path, func(p any, last string) (any, error) {
		switch c := p.(type) {
		case map[string]any:
			if _, ok := c[last]; !ok {
				return nil, fmt.Errorf("%s does not exist", pointerText(path))
			}
			delete(c, last)
			return c, nil
		case []any:
			j, err := arrayIndex(last, len(c), false)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", pointerText(path), err)
			}
			return append(c[:j:j], c[j+1:]...), nil
		}
		return nil, fmt.Errorf("%s does not exist: %s is not an object or array", pointerText(path), pointerText(path[:len(path)-1]))
	})
}

func replaceValue(doc any, path []string, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	return atParent(doc, path, func(p any, last string) (any, error) {
		switch c := p.(type) {
		case map[string]any:
			if _, ok := c[last]; !ok {
				return nil, fmt.Errorf("%s does not exist", pointerText(path))
			}
			c[last] = value
			return c, nil
		case []any:
			j, err := arrayIndex(last, len(c), false)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", pointerText(path), err)
			}
			c[j] = value
			return c, nil
		}
		return nil, fmt.Errorf("%s does not exist: %s is not an object or array", pointerText(path), pointerText(path[:len(path)-1]))
	})
}

// applyJSONOp applies one operation; errors about the resource are 422.
func applyJSONOp(doc any, o *jsonOp, g *growth) (any, error) {
	fail := func(err error) (any, error) {
		return nil, unprocessable(0, "", "%v", err)
	}
	tooBig := func() (any, error) {
		return nil, unprocessable(0, "", "the patch would make the resource too large")
	}
	var err error
	var res any
	switch o.op {
	case "add":
		if !g.take(o.value) {
			return tooBig()
		}
		res, err = addValue(doc, o.path, o.value)
	case "remove":
		res, err = removeValue(doc, o.path)
	case "replace":
		if !g.take(o.value) {
			return tooBig()
		}
		res, err = replaceValue(doc, o.path, o.value)
	case "move":
		var v any
		if v, err = get(doc, o.from); err != nil {
			return fail(err)
		}
		if isPrefix(o.from, o.path) && len(o.from) == len(o.path) {
			return doc, nil
		}
		if res, err = removeValue(doc, o.from); err != nil {
			return fail(err)
		}
		res, err = addValue(res, o.path, v)
	case "copy":
		var v any
		if v, err = get(doc, o.from); err != nil {
			return fail(err)
		}
		if !g.take(v) {
			return tooBig()
		}
		res, err = addValue(doc, o.path, deepCopy(v))
	case "test":
		var v any
		if v, err = get(doc, o.path); err != nil {
			return fail(err)
		}
		if !equal(v, o.value) {
			return nil, unprocessable(0, "", "test failed: the value at %s differs from the expected value", pointerText(o.path))
		}
		return doc, nil
	}
	if err != nil {
		return fail(err)
	}
	return res, nil
}
