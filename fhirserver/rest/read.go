package rest

import (
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
)

// Reading a request into the input of its interaction.

func readIn(r *http.Request) fhirserver.ReadIn {
	return fhirserver.ReadIn{Params: r.URL.Query(), IfNoneMatch: r.Header.Values("If-None-Match"), IfModifiedSince: r.Header.Get("If-Modified-Since")}
}

// conditions is what a write takes from the request's headers.
func conditions(r *http.Request) fhirserver.WriteIn {
	return fhirserver.WriteIn{IfMatch: r.Header.Values("If-Match"), IfNoneMatch: r.Header.Values("If-None-Match"),
		IfNoneExist: r.Header.Get("If-None-Exist"), Return: negotiate.PreferReturn(r)}
}

// writeIn reads a create's or update's request: its body is a resource of
// the path's type.
func (a *api) writeIn(r *http.Request, c *call) (fhirserver.WriteIn, error) {
	body, info, err := a.readBody(r, c.typ, false)
	if err != nil {
		return fhirserver.WriteIn{}, err
	}
	in := conditions(r)
	in.Body, in.Info = body, info
	return in, nil
}

// patchIn reads a patch's request: a JSON Patch, or a FHIRPath Patch (a
// Parameters resource, which passes the same structural validation as any
// other body).
func (a *api) patchIn(r *http.Request, _ *call) (fhirserver.WriteIn, error) {
	in := conditions(r)
	var err error
	in.Body, in.JSONPatch, err = negotiate.ReadPatch(r.Header.Get("Content-Type"), r.Body, a.cfg.Limits.MaxResourceBytes, func() ([]byte, error) {
		body, _, err := a.readBody(r, "Parameters", false)
		return body, err
	})
	return in, err
}

// operationIn reads an operation's request; the body of a POST is read
// only once the operation is authorized.
func (a *api) operationIn(r *http.Request) fhirserver.OperationIn {
	in := fhirserver.OperationIn{Params: r.URL.Query(), Strict: negotiate.PreferStrict(r)}
	if r.Method == http.MethodPost {
		in.Body = func() ([]byte, error) { return negotiate.ReadRaw(r, a.svc.Budget(), a.cfg.Limits.MaxResourceBytes) }
	}
	return in
}

// readBody reads and structurally validates a request body for the type in
// the URL (a Bundle posted to the base: asBundle). Bundles may be larger
// than other resources. The body's bytes are reserved from the validation
// budget while it is read and checked.
func (a *api) readBody(r *http.Request, typ string, asBundle bool) ([]byte, fhirjson.Info, error) {
	if err := negotiate.CheckContentType(r); err != nil {
		return nil, fhirjson.Info{}, err
	}
	limit := a.cfg.Limits.MaxResourceBytes
	if typ == "Bundle" {
		limit = a.cfg.Limits.MaxBundleBytes
	}
	// Refuse a declared oversize body before reading any of it.
	if r.ContentLength > limit {
		return nil, fhirjson.Info{}, fhirserver.TooLarge(r.ContentLength, limit)
	}
	src, release, err := a.svc.Budget().Body(r, limit)
	if err != nil {
		return nil, fhirjson.Info{}, err
	}
	defer release()
	body, err := fhirjson.ReadBody(src, limit, r.ContentLength)
	if err != nil {
		return nil, fhirjson.Info{}, err
	}
	var info fhirjson.Info
	if asBundle {
		info, err = a.svc.CheckBundle(body, nil)
	} else {
		info, err = a.svc.CheckResource(body, typ, nil)
	}
	if err != nil {
		return nil, info, err
	}
	return body, info, nil
}
