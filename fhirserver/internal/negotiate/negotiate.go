// Package negotiate is the FHIR API's HTTP vocabulary: the response
// format (Accept, _format, _pretty), the request body's media type and
// the reading of bodies that are not resources (a search form, an
// operation's Parameters), the Prefer header, version ETags and the size
// of an error's answer. The REST
// layer reads requests with it, and a Bundle reads its entries (each a
// request of its own) the same way.
package negotiate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/budget"
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

// Prepare checks what every request's URL must be and picks the response
// format. url.Values drops a malformed pair silently: a search would then
// run without the filter the client sent. Only an escape or a ';' can be
// malformed.
func Prepare(r *http.Request) (Format, error) {
	if q := r.URL.RawQuery; strings.ContainsAny(q, "%;") {
		if _, err := url.ParseQuery(q); err != nil {
			return Format{}, outcome.New(http.StatusBadRequest, "invalid", "malformed query string: "+err.Error())
		}
	}
	return Negotiate(r)
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

// PatchFormat reads the media type of a PATCH body: a JSON Patch
// (jsonPatch), or a FHIRPath Patch, which is a Parameters resource.
func PatchFormat(contentType string) (jsonPatch bool, err error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = ""
	}
	switch mt {
	case JSONPatch:
		return true, nil
	case FHIRJSON, JSON, "application/json+fhir":
		return false, nil
	}
	return false, outcome.New(http.StatusUnsupportedMediaType, "not-supported",
		"PATCH takes a JSON Patch ("+JSONPatch+") or a FHIRPath Patch Parameters resource ("+FHIRJSON+"); got "+outcome.Quote(contentType))
}

// ReadPatch reads a PATCH body of the media type contentType: a JSON Patch
// from src, at most limit bytes (not sized by a declared length: nothing
// is reserved from the budget for it, so memory follows the bytes that
// arrive), or a FHIRPath Patch with parameters, which reads and checks it
// as any resource body.
func ReadPatch(contentType string, src io.Reader, limit int64, parameters func() ([]byte, error)) (body []byte, jsonPatch bool, err error) {
	if jsonPatch, err = PatchFormat(contentType); err != nil {
		return nil, false, err
	}
	if jsonPatch {
		body, err = fhirjson.ReadBody(src, limit, -1)
	} else {
		body, err = parameters()
	}
	return body, jsonPatch, err
}

// SearchParams returns the parameters of a search: the query string, and
// the form body of POST _search, within limit bytes.
func SearchParams(r *http.Request, limit int64) (url.Values, error) {
	if r.Method != http.MethodPost {
		return r.URL.Query(), nil
	}
	switch ct := r.Header.Get("Content-Type"); {
	case ct == "":
		// The body of POST _search is a form, said or not; unsaid,
		// ParseForm would drop its criteria and widen the search.
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	case !strings.HasPrefix(ct, "application/x-www-form-urlencoded"):
		return nil, outcome.New(http.StatusUnsupportedMediaType, "not-supported", "POST _search takes an application/x-www-form-urlencoded body; got "+outcome.Quote(ct))
	}
	r.Body = http.MaxBytesReader(nil, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, outcome.New(http.StatusRequestEntityTooLarge, "too-costly",
				"the search form is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
		}
		return nil, outcome.New(http.StatusBadRequest, "invalid", "malformed search form: "+err.Error())
	}
	return r.Form, nil
}

// ReadRaw reads a request body of at most limit bytes, reserved from b
// while it is read, without structural checks (an operation's body: what
// $validate reports on).
func ReadRaw(r *http.Request, b *budget.Budget, limit int64) ([]byte, error) {
	if err := CheckContentType(r); err != nil {
		return nil, err
	}
	src, release, err := b.Body(r, limit)
	if err != nil {
		return nil, err
	}
	defer release()
	return fhirjson.ReadBody(src, limit, r.ContentLength)
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

// ParseETagSet reads the lines of an If-Match or If-None-Match header;
// ok=false when an entity tag is malformed.
func ParseETagSet(vals []string) (ETagSet, bool) {
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

// Failure is the answer to r when it failed with oe: its status, its
// format (JSON when r's own is not acceptable) and its OperationOutcome.
// An answer about a request is never larger than it (issue 22: 3.2 MB of
// identifiers drew 48.7 MB of issues), with room for a few issues about a
// small one.
func Failure(r *http.Request, oe *outcome.Error) (int, Format, []byte) {
	f, err := Negotiate(r)
	if err != nil {
		f = Format{ContentType: FHIRJSON}
	}
	limit := outcome.MaxBytes
	if r.ContentLength > 0 {
		limit = min(limit, max(int(r.ContentLength), minOutcomeBytes))
	}
	return oe.Status, f, oe.ResourceWithin(limit)
}

// minOutcomeBytes is what an OperationOutcome may list however small the
// request was.
const minOutcomeBytes = 4 << 10

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
