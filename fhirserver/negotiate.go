package fhirserver

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

const (
	mimeFHIRJSON = "application/fhir+json"
	mimeJSON     = "application/json"
)

// format is what the response looks like, from Accept and _format.
type format struct {
	contentType string // mimeFHIRJSON or mimeJSON
	pretty      bool
}

// negotiate picks the response format. Only JSON is served: a client that
// asks for XML (or only for types we cannot produce) gets 406.
func negotiate(r *http.Request) (format, error) {
	q := r.URL.Query()
	f := format{contentType: mimeFHIRJSON}
	switch q.Get("_pretty") {
	case "", "false":
	case "true":
		f.pretty = true
	default:
		return f, outcome.New(http.StatusBadRequest, "invalid", `_pretty must be "true" or "false"`)
	}
	if v := q.Get("_format"); v != "" {
		switch strings.TrimSpace(strings.SplitN(v, ";", 2)[0]) {
		case "json", mimeFHIRJSON:
		case mimeJSON:
			f.contentType = mimeJSON
		case "xml", "text/xml", "application/xml", "application/fhir+xml", "ttl", "text/turtle", "application/x-turtle":
			return f, notAcceptable(v)
		default:
			return f, outcome.New(http.StatusBadRequest, "invalid", "unknown _format "+strconv.Quote(v))
		}
		return f, nil
	}
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return f, nil
	}
	ok := false
	for _, h := range accept {
		for _, part := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || params["q"] == "0" {
				continue
			}
			switch mt {
			case mimeFHIRJSON, "application/json+fhir", "*/*", "application/*":
				return f, nil
			case mimeJSON:
				f.contentType = mimeJSON
				ok = true
			}
		}
	}
	if ok {
		return f, nil
	}
	return f, notAcceptable(strings.Join(accept, ", "))
}

func notAcceptable(asked string) error {
	return outcome.New(http.StatusNotAcceptable, "not-supported",
		"this server produces only JSON (application/fhir+json); requested: "+asked)
}

// checkContentType accepts JSON request bodies. A missing Content-Type is
// taken as JSON, because FHIR clients often omit it on simple writes.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == mimeFHIRJSON || mt == mimeJSON || mt == "application/json+fhir") {
		return nil
	}
	return outcome.New(http.StatusUnsupportedMediaType, "not-supported",
		"request bodies must be application/fhir+json or application/json; got "+strconv.Quote(ct))
}

// returnPref is the client's Prefer: return=… choice.
type returnPref int

const (
	returnRepresentation returnPref = iota
	returnMinimal
	returnOutcome
)

func preferReturn(r *http.Request) returnPref {
	for _, h := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.TrimSpace(k) != "return" {
				continue
			}
			switch strings.Trim(strings.TrimSpace(v), `"`) {
			case "minimal":
				return returnMinimal
			case "OperationOutcome":
				return returnOutcome
			}
		}
	}
	return returnRepresentation
}

// etag renders a version as a weak ETag.
func etag(version int64) string {
	return `W/"` + strconv.FormatInt(version, 10) + `"`
}

// parseETag reads a version from an If-Match / If-None-Match value:
// W/"3", "3" (quotes optional for lenient clients). ok=false when malformed.
func parseETag(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	v = strings.Trim(v, `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n > 0
}

// ifMatch returns the version named by If-Match, or 0 when absent.
func ifMatch(r *http.Request) (int64, error) {
	h := r.Header.Get("If-Match")
	if h == "" {
		return 0, nil
	}
	n, ok := parseETag(h)
	if !ok {
		return 0, outcome.New(http.StatusBadRequest, "invalid", "If-Match must be a version ETag such as W/\"3\"; got "+strconv.Quote(h))
	}
	return n, nil
}
