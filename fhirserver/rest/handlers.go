package rest

import (
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
)

// handlers runs each route of fhirserver.Routes, by name: it reads the
// request into the interaction's input, runs it, and sends its Response.
var handlers = map[string]handlerFunc{
	"capabilities": func(_ *api, w http.ResponseWriter, _ *http.Request, c *call) error {
		res, err := c.svc.Capabilities()
		return send(w, c, res, err)
	},
	"bundle": (*api).bundle,
	"search": func(a *api, w http.ResponseWriter, r *http.Request, c *call) error {
		params, err := negotiate.SearchParams(r, a.cfg.Limits.MaxResourceBytes)
		if err != nil {
			return err
		}
		res, err := c.svc.Search(fhirserver.SearchIn{Params: params, Posted: r.Method == http.MethodPost, Strict: negotiate.PreferStrict(r)})
		return send(w, c, res, err)
	},
	"search-compartment": func(_ *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.SearchCompartment(fhirserver.SearchIn{Params: r.URL.Query(), Strict: negotiate.PreferStrict(r)})
		return send(w, c, res, err)
	},
	"history": func(_ *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.History(r.URL.Query())
		return send(w, c, res, err)
	},
	"read": func(_ *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.Read(readIn(r))
		return send(w, c, res, err)
	},
	"vread": func(_ *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.VRead(readIn(r))
		return send(w, c, res, err)
	},
	"create":             writing((*api).writeIn, (*fhirserver.Call).Create),
	"update":             writing((*api).writeIn, (*fhirserver.Call).Update),
	"conditional-update": writing((*api).writeIn, (*fhirserver.Call).ConditionalUpdate),
	"delete": func(_ *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.Delete(conditions(r))
		return send(w, c, res, err)
	},
	"conditional-delete": func(_ *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.ConditionalDelete(fhirserver.WriteIn{Return: negotiate.PreferReturn(r)})
		return send(w, c, res, err)
	},
	"patch":             writing((*api).patchIn, (*fhirserver.Call).Patch),
	"conditional-patch": writing((*api).patchIn, (*fhirserver.Call).ConditionalPatch),
	"validate": func(a *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.Validate(a.operationIn(r))
		return send(w, c, res, err)
	},
	"everything": func(a *api, w http.ResponseWriter, r *http.Request, c *call) error {
		res, err := c.svc.Everything(a.operationIn(r))
		return send(w, c, res, err)
	},
	"reindex": func(_ *api, w http.ResponseWriter, _ *http.Request, c *call) error {
		res, err := c.svc.ReindexOp()
		return send(w, c, res, err)
	},
}

// writing is the handler of a write: read reads its request, write
// runs it.
func writing(read func(*api, *http.Request, *call) (fhirserver.WriteIn, error),
	write func(*fhirserver.Call, fhirserver.WriteIn) (fhirserver.Response, error)) handlerFunc {
	return func(a *api, w http.ResponseWriter, r *http.Request, c *call) error {
		in, err := read(a, r, c)
		if err != nil {
			return err
		}
		res, err := write(&c.svc, in)
		return send(w, c, res, err)
	}
}

// bundle is POST [base] with a batch or transaction Bundle.
func (a *api) bundle(w http.ResponseWriter, r *http.Request, c *call) error {
	// A transaction's entries are validated with the Bundle (any failure
	// fails it all); a batch's only as each entry is processed.
	body, info, err := a.readBody(r, "Bundle", true)
	if err != nil {
		return err
	}
	out, err := a.bundles.Run(r, &c.svc, body, info)
	if err != nil {
		return err
	}
	negotiate.WriteBody(w, c.format, http.StatusOK, out)
	return nil
}
