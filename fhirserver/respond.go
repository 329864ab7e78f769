package fhirserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// writeBody sends JSON bytes as they are (stored resources are already
// compact), indenting only when the client asked for _pretty=true.
func writeBody(w http.ResponseWriter, f format, status int, body []byte) {
	body = formatted(f, body)
	h := w.Header()
	h.Set("Content-Type", f.contentType+"; charset=utf-8")
	h.Add("Vary", "Accept")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// formatted is body as the client asked for it: indented for _pretty=true.
func formatted(f format, body []byte) []byte {
	if f.pretty {
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err == nil {
			return buf.Bytes()
		}
	}
	return body
}

// versionHeaders sets ETag and Last-Modified of a stored version.
func versionHeaders(w http.ResponseWriter, v *store.Version) {
	h := w.Header()
	h.Set("ETag", etag(v.Version))
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
	switch preferReturn(r) {
	case returnMinimal:
		w.WriteHeader(status)
	case returnOutcome:
		writeBody(w, c.format, status, outcome.Render(outcome.Information(msg)))
	default:
		writeBody(w, c.format, status, v.Body)
	}
}

func (s *Server) resourceURL(typ, id string) string {
	return s.cfg.BaseURL + "/" + typ + "/" + id
}

func (s *Server) versionURL(v *store.Version) string {
	return s.resourceURL(v.Type, v.ID) + "/_history/" + strconv.FormatInt(v.Version, 10)
}
