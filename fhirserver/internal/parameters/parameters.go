// Package parameters reads the Parameters bodies of operations invoked
// with POST.
package parameters

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// Of reads the Parameters body of an operation invoked with POST, which
// read returns: each parameter's name with its primitive value as text.
func Of(read func() ([]byte, error)) (url.Values, error) {
	body, err := read()
	if err != nil {
		return nil, err
	}
	out := url.Values{}
	if len(bytes.TrimSpace(body)) == 0 {
		return out, nil
	}
	var p struct {
		ResourceType string                       `json:"resourceType"`
		Parameter    []map[string]json.RawMessage `json:"parameter"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.ResourceType != "Parameters" {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "the body of an operation must be a Parameters resource")
	}
	for i, m := range p.Parameter {
		at := "Parameters.parameter[" + strconv.Itoa(i) + "]"
		var name string
		if err := json.Unmarshal(m["name"], &name); err != nil || name == "" {
			return nil, outcome.New(http.StatusBadRequest, "required", "a parameter has no name", at+".name")
		}
		value, ok, n := "", false, 0
		for k, raw := range m {
			if !strings.HasPrefix(k, "value") {
				continue
			}
			if n++; n > 1 {
				return nil, outcome.New(http.StatusBadRequest, "invalid", "the parameter "+outcome.Quote(name)+" has more than one value[x]", at)
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				break
			}
			switch v := v.(type) {
			case string:
				value, ok = v, true
			case float64, bool:
				value, ok = string(raw), true
			}
		}
		if !ok {
			return nil, outcome.New(http.StatusBadRequest, "invalid", "the parameter "+outcome.Quote(name)+" needs a primitive value[x]", at)
		}
		out.Add(name, value)
	}
	return out, nil
}

// Validate is what a $validate body asks.
type Validate struct {
	Resource      []byte
	Mode, Profile string
}

// OfValidate reads a $validate body: a Parameters resource (unless the
// type validated is Parameters itself) or the resource.
func OfValidate(raw []byte, typ string) (Validate, error) {
	var head struct {
		ResourceType string `json:"resourceType"`
		Parameter    []struct {
			Name           string          `json:"name"`
			Resource       json.RawMessage `json:"resource"`
			ValueCode      string          `json:"valueCode"`
			ValueURI       string          `json:"valueUri"`
			ValueCanonical string          `json:"valueCanonical"`
		} `json:"parameter"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Validate{}, outcome.New(http.StatusBadRequest, "structure", "the body is not a FHIR JSON resource: "+err.Error())
	}
	if head.ResourceType != "Parameters" || typ == "Parameters" {
		return Validate{Resource: raw}, nil
	}
	var p Validate
	for _, x := range head.Parameter {
		switch x.Name {
		case "resource":
			p.Resource = x.Resource
		case "mode":
			p.Mode = x.ValueCode
		case "profile":
			p.Profile = cmp.Or(x.ValueCanonical, x.ValueURI)
		}
	}
	if p.Resource == nil && p.Mode != "delete" {
		return p, outcome.New(http.StatusBadRequest, "required", "the Parameters body has no \"resource\" parameter")
	}
	return p, nil
}
