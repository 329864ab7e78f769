package search

import (
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/syntax"
	"github.com/kiln-fhir/kiln/profiles"
)

// stripBase turns an absolute reference to this server's base into the
// relative form the index stores ("https://host/fhir/Patient/1" →
// "Patient/1").
func (ps *parser) stripBase(v string) string {
	if b := strings.TrimSuffix(ps.opt.BaseURL, "/"); b != "" && strings.HasPrefix(v, b+"/") {
		return v[len(b)+1:]
	}
	return v
}

// referenceMatches makes the matches of a reference parameter: each value
// is Type/id, Type/id/_history/v, an absolute URL, or a bare id (Type/id
// for the type the modifier names, else for each target type: an index
// row always carries its reference's type, so no bare-id key is stored);
// :identifier takes token forms.
func (ps *parser) referenceMatches(p *Param, name, mod string, vals []string) ([]Match, error) {
	out := make([]Match, 0, len(vals))
	for _, v := range vals {
		var keys []string
		if mod == "identifier" {
			f, err := tokenForm(name, v)
			if err != nil {
				return nil, err
			}
			if m, ok := systemOnly(p.Code+":identifier", f); ok {
				out = append(out, m)
				continue
			}
			keys = []string{index.Key(p.Code+":identifier", f)}
		} else {
			forms, err := ps.referenceForms(p, name, mod, syntax.Unescape(v))
			if err != nil {
				return nil, err
			}
			for _, f := range forms {
				keys = append(keys, index.Key(p.Code, f))
			}
			if len(forms) > 1 {
				out = append(out, Match{Op: OpKey, Keys: keys, BareID: syntax.Unescape(v)})
				continue
			}
		}
		out = append(out, Match{Op: OpKey, Keys: keys})
	}
	return out, nil
}

// referenceForms are the key forms one reference value may be stored
// under: one, or a bare id's Type/id for every type it may name.
func (ps *parser) referenceForms(p *Param, name, mod, v string) ([]string, error) {
	f, err := ps.referenceForm(p, name, mod, v)
	if err != nil || strings.ContainsAny(f, "/:") {
		return []string{f}, err
	}
	types := p.Targets
	if len(types) == 0 {
		types = profiles.ResourceTypes()
	}
	forms := make([]string, len(types))
	for i, t := range types {
		forms[i] = t + "/" + f
	}
	return forms, nil
}

// referenceForm is the key form of one reference value; mod is "" or a
// target type. A bare id without a type to give it stays bare.
func (ps *parser) referenceForm(p *Param, name, mod, v string) (string, error) {
	v = ps.stripBase(v)
	if strings.Contains(v, ":") {
		if mod != "" {
			return "", errf(name, "an absolute reference cannot take a type modifier: "+syntax.Quote(v))
		}
		return v, nil // absolute URL, canonical or urn: stored as is
	}
	parts := strings.Split(v, "/")
	switch {
	case len(parts) == 1:
		if !syntax.ValidID(v) || v == "" {
			return "", errf(name, "not a resource id: "+syntax.Quote(v))
		}
		switch {
		case mod != "":
			return mod + "/" + v, nil
		case len(p.Targets) == 1:
			return p.Targets[0] + "/" + v, nil
		}
		return v, nil
	case len(parts) == 2 || len(parts) == 4 && parts[2] == "_history":
		t, id := parts[0], parts[1]
		if !profiles.IsResourceType(t) {
			return "", errf(name, "unknown resource type in reference "+syntax.Quote(v))
		}
		if id == "" || !syntax.ValidID(id) || len(parts) == 4 && (parts[3] == "" || !syntax.ValidID(parts[3])) {
			return "", errf(name, "not a reference: "+syntax.Quote(v))
		}
		if mod != "" && t != mod {
			return "", errf(name, "reference "+syntax.Quote(v)+" is not to a "+mod)
		}
		if !isTargetType(p, t) {
			return "", errf(name, p.Code+" cannot refer to a "+t)
		}
		return v, nil
	}
	return "", errf(name, "not a reference: "+syntax.Quote(v))
}

// chainMatches makes the matches of a chained parameter ref[:Type].rest:
// one OpChain per target type on which rest is a parameter (only Type
// with a type modifier). A chain that no target type understands is
// reported as an unknown parameter, like any other; without a type
// modifier, targets on which the rest of the chain is an error (another
// kind of parameter, a value it cannot take) are left out, and the error
// is returned only when every target fails.
func (ps *parser) chainMatches(p *Param, name, mod, rest, value string, depth int) ([]Match, string, error) {
	if p.Type != "reference" {
		return nil, "", errf(name, "only reference parameters can be chained, "+p.Code+" is a "+p.Type)
	}
	if depth >= maxDepth {
		return nil, "", errf(name, "chains are nested too deeply")
	}
	var targets []string
	switch {
	case mod != "":
		if !isTargetType(p, mod) {
			return nil, "", errf(name, "modifier :"+mod+" is not a target type of "+p.Code)
		}
		targets = []string{mod}
	case len(p.Targets) > 0:
		targets = p.Targets
	default:
		return nil, "", errf(name, "chaining "+p.Code+" needs a type modifier ("+p.Code+":Type."+rest+")")
	}
	var out []Match
	reason := ""
	var firstErr error
	for _, t := range targets {
		cs, why, err := ps.clause([]string{t}, rest, value, depth+1)
		if err != nil {
			// Without a type modifier, a target on which the chain does
			// not fit (the code is another kind of parameter there) is
			// left out; it is an error only if no target takes it.
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if why != "" {
			if reason == "" {
				reason = why
			}
			continue
		}
		for i := range cs {
			cs[i].Param = rest
		}
		out = append(out, Match{Op: OpChain, Param: p.Code, Chain: &Chain{RefParam: p.Code, Query: &Query{Types: []string{t}, Where: cs}}})
	}
	if len(out) == 0 && firstErr != nil {
		return nil, "", firstErr
	}
	if len(out) == 0 {
		return nil, "chain " + syntax.Quote(rest) + ": " + reason, nil
	}
	return out, "", nil
}

// hasClause parses _has:Type:ref:rest=value (rest may itself be a _has).
func (ps *parser) hasClause(types []string, name, value string, depth int) (Clause, string, error) {
	parts := strings.SplitN(name, ":", 4)
	if len(parts) != 4 || parts[1] == "" || parts[2] == "" || parts[3] == "" {
		return Clause{}, "", errf(name, "_has takes _has:Type:reference-parameter:parameter")
	}
	if depth >= maxDepth {
		return Clause{}, "", errf(name, "_has is nested too deeply")
	}
	t, ref, rest := parts[1], parts[2], parts[3]
	if !profiles.IsResourceType(t) {
		return Clause{}, "", errf(name, "unknown resource type "+syntax.Quote(t))
	}
	p, ok := ps.r.Lookup(t, ref)
	if !ok || p.Type != "reference" {
		return Clause{}, "", errf(name, t+" has no reference parameter "+syntax.Quote(ref))
	}
	if len(p.Targets) > 0 && len(types) > 0 {
		refers := false
		for _, x := range types {
			if isTargetType(p, x) {
				refers = true
			}
		}
		if !refers {
			return Clause{}, "", errf(name, t+"."+ref+" does not refer to "+strings.Join(types, " or "))
		}
	}
	cs, why, err := ps.clause([]string{t}, rest, value, depth+1)
	if err != nil || why != "" {
		return Clause{}, why, err
	}
	for i := range cs {
		cs[i].Param = rest
	}
	return Clause{Param: name, Any: []Match{{Op: OpHas, Has: &Has{Param: ref, Query: &Query{Types: []string{t}, Where: cs}}}}}, "", nil
}
