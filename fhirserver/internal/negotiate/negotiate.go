// Package negotiate is the FHIR API's HTTP vocabulary: the response
// format (Accept, _format, _pretty), the request body's media type, the
// Prefer header and version ETags.
package negotiate

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// The media types of the FHIR API.
const (
	FHIRJSON  = "application/fhir+json"
	JSON      = "application/json"
	JSONPatch = "application/json-patch+json"
)

// Format is what the response looks like, from Accept and _format.
type Format struct {
	ContentType string // FHIRJSON or JSON
	Pretty      bool
}

// Negotiate picks the response format. Only JSON is served: a client that
// asks for XML (or only for types we cannot produce) gets 406.
func Negotiate(r *http.Request) (Format, error) {
	q := r.URL.Query()
	f := Format{ContentType: FHIRJSON}
	switch q.Get("_pretty") {
	case "", "false":
	case "true":
		f.Pretty = true
	default:
		return f, outcome.New(http.StatusBadRequest, "invalid", `_pretty must be "true" or "false"`)
	}
	if v := q.Get("_format"); v != "" {
		// An unescaped "+" in a query string arrives as a space:
		// ?_format=application/fhir+json is common and meant literally.
		switch strings.ReplaceAll(strings.TrimSpace(strings.SplitN(v, ";", 2)[0]), " ", "+") {
		case "json", FHIRJSON:
		case JSON:
			f.ContentType = JSON
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
			if err != nil || refused(params["q"]) || !isR4(params["fhirversion"]) {
				continue
			}
			switch mt {
			case FHIRJSON, "application/json+fhir", "*/*", "application/*":
				return f, nil
			case JSON:
				f.ContentType = JSON
				ok = true
			}
		}
	}
	if ok {
		return f, nil
	}
	return f, notAcceptable(strings.Join(accept, ", "))
}

// refused reports whether a media range's quality value is zero, which
// means "not acceptable" (RFC 9110 §12.4.2).
func refused(q string) bool {
	if q == "" {
		return false
	}
	f, err := strconv.ParseFloat(q, 64)
	return err == nil && f <= 0
}

// isR4 reports whether a fhirVersion media-type parameter (absent: "")
// names the FHIR version this server speaks.
func isR4(v string) bool {
	return v == "" || v == "4.0" || v == "4.0.1"
}

func notAcceptable(asked string) error {
	return outcome.New(http.StatusNotAcceptable, "not-supported",
		"this server produces only JSON (application/fhir+json); requested: "+asked)
}

// CheckContentType accepts JSON request bodies. A missing Content-Type is
// taken as JSON, because FHIR clients often omit it on simple writes.
func CheckContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == FHIRJSON || mt == JSON || mt == "application/json+fhir") {
		return nil
	}
	return outcome.New(http.StatusUnsupportedMediaType, "not-supported",
		"request bodies must be application/fhir+json or application/json; got "+strconv.Quote(ct))
}

// Return is the client's Prefer: return=… choice.
type Return int

const (
	ReturnRepresentation Return = iota
	ReturnMinimal
	ReturnOutcome
)

// PreferReturn is what the client asked a write to return.
func PreferReturn(r *http.Request) Return {
	for _, v := range preferValues(r, "return") {
		switch v {
		case "minimal":
			return ReturnMinimal
		case "OperationOutcome":
			return ReturnOutcome
		}
	}
	return ReturnRepresentation
}

// PreferStrict reports Prefer: handling=strict.
func PreferStrict(r *http.Request) bool {
	return slices.Contains(preferValues(r, "handling"), "strict")
}

// preferValues lists the values the Prefer headers give key, in order
// (RFC 7240: comma-separated key=value, values optionally quoted).
func preferValues(r *http.Request, key string) []string {
	var out []string
	for _, h := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.TrimSpace(k) == key {
				out = append(out, strings.Trim(strings.TrimSpace(v), `"`))
			}
		}
	}
	return out
}

// ETag renders a version as a weak ETag.
func ETag(version int64) string {
	return `W/"` + strconv.FormatInt(version, 10) + `"`
}

// parseETag reads a version from one entity tag: W/"3" or "3" (quotes
// optional for lenient clients). ok=false when malformed.
func parseETag(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	v = strings.Trim(v, `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n > 0
}

// ETagSet is the value of If-Match or If-None-Match (RFC 9110 §13.1.1-2):
// "*" or a list of entity tags.
type ETagSet struct {
	Present  bool
	Any      bool
	Versions []int64
}

// ParseETagSet reads a header; ok=false when an entity tag is malformed.
func ParseETagSet(h http.Header, name string) (ETagSet, bool) {
	vals := h.Values(name)
	if len(vals) == 0 {
		return ETagSet{}, true
	}
	set := ETagSet{Present: true}
	for _, v := range vals {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" {
				set.Any = true
				continue
			}
			n, ok := parseETag(tag)
			if !ok {
				return set, false
			}
			set.Versions = append(set.Versions, n)
		}
	}
	return set, true
}

// Matches reports whether the current version v (nil: no resource) is in the
// set. "*" matches any current, non-deleted resource.
func (e ETagSet) Matches(v *store.Version) bool {
	if v == nil {
		return false
	}
	if e.Any && !v.Deleted {
		return true
	}
	return slices.Contains(e.Versions, v.Version)
}

// WriteBody sends JSON bytes as they are (stored resources are already
// compact), indenting only when the client asked for _pretty=true.
func WriteBody(w http.ResponseWriter, f Format, status int, body []byte) {
	body = Formatted(f, body)
	h := w.Header()
	h.Set("Content-Type", f.ContentType+"; charset=utf-8")
	h.Add("Vary", "Accept")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Formatted is body as the client asked for it: indented for _pretty=true.
func Formatted(f Format, body []byte) []byte {
	if f.Pretty {
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err == nil {
			return buf.Bytes()
		}
	}
	return body
}
