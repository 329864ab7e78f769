package functions

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/datetime"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/eval"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/model"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/navigate"
	"github.com/kiln-fhir/kiln/fhirserver/fhirpath/internal/value"
)

var utilityFuncs = map[string]funcDef{
	"trace": {1, 2, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		name, _, err := ec.ArgString(args[0], "trace")
		if err != nil {
			return nil, err
		}
		shown := in
		if len(args) == 2 {
			var out value.Collection
			for i, v := range in {
				c, err := ec.WithItem(args[1], v, i)
				if err != nil {
					return nil, err
				}
				out = append(out, c...)
			}
			shown = out
		}
		l := ec.Logger
		if l == nil {
			l = slog.Default()
		}
		if l.Enabled(ec.Ctx(), slog.LevelDebug) {
			b, _ := shown.MarshalJSON()
			l.DebugContext(ec.Ctx(), "fhirpath trace", "name", name, "value", string(b))
		}
		return in, nil
	}},
	"now": {0, 0, func(ec *eval.Context, _ value.Collection, _ []eval.Node) (value.Collection, error) {
		return one(value.Date(datetime.FromTime(ec.Clock(), datetime.DateTime)))
	}},
	"today": {0, 0, func(ec *eval.Context, _ value.Collection, _ []eval.Node) (value.Collection, error) {
		return one(value.Date(datetime.FromTime(ec.Clock(), datetime.Date)))
	}},
	"timeOfDay": {0, 0, func(ec *eval.Context, _ value.Collection, _ []eval.Node) (value.Collection, error) {
		return one(value.Date(datetime.FromTime(ec.Clock(), datetime.Time)))
	}},
	"children": {0, 0, func(ec *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		var out value.Collection
		var err error
		for _, v := range in {
			if out, err = navigate.AllChildren(ec.Walk(), out, v); err != nil {
				return nil, err
			}
		}
		return out, nil
	}},
	"descendants": {0, 0, func(ec *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		var out value.Collection
		level := in
		for depth := 0; len(level) > 0; depth++ {
			if depth > ec.MaxDepth {
				return nil, eval.ErrTooDeep
			}
			var next value.Collection
			for _, v := range level {
				if err := ec.Check(); err != nil {
					return nil, err
				}
				var err error
				if next, err = navigate.AllChildren(ec.Walk(), next, v); err != nil {
					return nil, err
				}
			}
			out = append(out, next...)
			if len(out) > ec.MaxCollection {
				return nil, value.ErrTooLarge
			}
			level = next
		}
		return out, nil
	}},
	"type": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		out := make(value.Collection, 0, len(in))
		for _, v := range in {
			out = append(out, value.TypeInfo(v))
		}
		return out, nil
	}},
}

var fhirFuncs = map[string]funcDef{
	"extension": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		url, ok, err := ec.ArgString(args[0], "extension")
		if err != nil || !ok {
			return nil, err
		}
		var out value.Collection
		for _, v := range in {
			exts, err := navigate.Children(ec.Walk(), nil, v, "extension")
			if err != nil {
				return nil, err
			}
			for _, e := range exts {
				if m, ok := e.Raw().(map[string]any); ok && m["url"] == url {
					out = append(out, e)
				}
			}
		}
		return out, nil
	}},
	"hasValue": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) != 1 {
			return value.Bools(false), nil
		}
		return value.Bools(value.HasValue(in[0])), nil
	}},
	"getValue": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) != 1 {
			return nil, nil
		}
		v, ok := value.GetValue(in[0])
		if !ok {
			return nil, nil
		}
		return value.Collection{v}, nil
	}},
	"resolve": {0, 0, func(ec *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		var out value.Collection
		for _, v := range in {
			ref := ""
			switch x := v.Raw().(type) {
			case map[string]any:
				ref, _ = x["reference"].(string)
			case string:
				ref = x
			}
			if ref == "" {
				continue
			}
			if r := resolveRef(ec, ref); r != nil {
				out = append(out, value.Node(r, nil, model.ResourceType(r)))
			}
		}
		return out, nil
	}},
	"memberOf": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		vs, ok, err := ec.ArgString(args[0], "memberOf")
		if err != nil || !ok || ec.Terminology == nil || len(in) != 1 {
			return nil, err
		}
		m, ok := ec.Terminology.MemberOf(ec.Ctx(), in[0], vs)
		if !ok {
			return nil, nil
		}
		return value.Bools(m), nil
	}},
	"conformsTo": {1, 1, func(ec *eval.Context, in value.Collection, args []eval.Node) (value.Collection, error) {
		p, ok, err := ec.ArgString(args[0], "conformsTo")
		if err != nil || !ok || len(in) != 1 {
			return nil, err
		}
		if ec.ConformsTo == nil {
			// Without a validator hook, only core definitions are known: a
			// resource conforms to its own type and its base types.
			name, core := strings.CutPrefix(p, "http://hl7.org/fhir/StructureDefinition/")
			if !core || model.Lookup(name) == nil {
				return nil, fmt.Errorf("fhirpath: conformsTo(): unknown profile %q", p)
			}
			t := value.NodeType(in[0])
			return value.Bools(t != nil && t.DerivesFrom(name)), nil
		}
		c, ok := ec.ConformsTo(ec.Ctx(), in[0].Raw(), p)
		if !ok {
			return nil, nil
		}
		return value.Bools(c), nil
	}},
	"htmlChecks": {0, 0, func(_ *eval.Context, in value.Collection, _ []eval.Node) (value.Collection, error) {
		if len(in) != 1 {
			return nil, nil
		}
		s := in[0].String()
		return value.Bools(htmlOK(s)), nil
	}},
}

// resolveRef finds a referenced resource: contained (#id), a Bundle entry
// (by fullUrl or Type/id), then the pluggable resolver.
func resolveRef(ec *eval.Context, ref string) map[string]any {
	var root map[string]any
	if len(ec.Root()) == 1 {
		root, _ = ec.Root()[0].Raw().(map[string]any)
	}
	if strings.HasPrefix(ref, "#") && root != nil {
		cs, _ := root["contained"].([]any)
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok && "#"+str(m["id"]) == ref {
				return m
			}
		}
		return nil
	}
	if root != nil && root["resourceType"] == "Bundle" {
		entries, _ := root["entry"].([]any)
		for _, e := range entries {
			em, _ := e.(map[string]any)
			res, _ := em["resource"].(map[string]any)
			if res == nil {
				continue
			}
			full := str(em["fullUrl"])
			if full == ref || (full != "" && strings.HasSuffix(full, "/"+ref)) || str(res["resourceType"])+"/"+str(res["id"]) == ref {
				return res
			}
		}
	}
	if ec.Resolver != nil {
		r, err := ec.Resolver(ec.Ctx(), ref)
		if err == nil {
			if m, ok := r.(map[string]any); ok {
				return m
			}
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// htmlOK is a basic narrative check: no scripts, event handlers, or
// forbidden elements.
func htmlOK(s string) bool {
	l := strings.ToLower(s)
	for _, bad := range []string{"<script", "<iframe", "<object", "<embed", "<form", "<input", "javascript:", " onload=", " onclick=", " onerror=", " onmouseover="} {
		if strings.Contains(l, bad) {
			return false
		}
	}
	return strings.Contains(l, "<div")
}
