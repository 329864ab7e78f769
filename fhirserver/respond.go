package fhirserver

import (
	"net/http"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// versionHeaders sets ETag and Last-Modified of a stored version.
func versionHeaders(w http.ResponseWriter, v *store.Version) {
	h := w.Header()
	h.Set("ETag", negotiate.ETag(v.Version))
	h.Set("Last-Modified", v.LastUpdated.UTC().Format(http.TimeFormat))
}

// writeResult answers a write (create or update) as the client's Prefer
// header asks: the resource, nothing, or an OperationOutcome.
func (s *Server) writeResult(w http.ResponseWriter, r *http.Request, c *call, status int, v *store.Version, msg string) {
	c.named(v)
	versionHeaders(w, v)
	h := w.Header()
	if status == http.StatusCreated {
		h.Set("Location", s.versionURL(v))
	}
	switch negotiate.PreferReturn(r) {
	case negotiate.ReturnMinimal:
		w.WriteHeader(status)
	case negotiate.ReturnOutcome:
		negotiate.WriteBody(w, c.format, status, outcome.Render(outcome.Information(msg)))
	default:
		negotiate.WriteBody(w, c.format, status, v.Body)
	}
}

func (s *Server) resourceURL(typ, id string) string {
	return s.cfg.BaseURL + "/" + typ + "/" + id
}

func (s *Server) versionURL(v *store.Version) string {
	return s.resourceURL(v.Type, v.ID) + "/_history/" + strconv.FormatInt(v.Version, 10)
}
