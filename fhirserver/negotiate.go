package fhirserver

import (
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/store"
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
		// An unescaped "+" in a query string arrives as a space:
		// ?_format=application/fhir+json is common and meant literally.
		switch strings.ReplaceAll(strings.TrimSpace(strings.SplitN(v, ";", 2)[0]), " ", "+") {
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
			if err != nil || refused(params["q"]) || !isR4(params["fhirversion"]) {
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
	for _, v := range preferValues(r, "return") {
		switch v {
		case "minimal":
			return returnMinimal
		case "OperationOutcome":
			return returnOutcome
		}
	}
	return returnRepresentation
}

// preferStrict reports Prefer: handling=strict.
func preferStrict(r *http.Request) bool {
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

// etag renders a version as a weak ETag.
func etag(version int64) string {
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

// etagSet is the value of If-Match or If-None-Match (RFC 9110 §13.1.1-2):
// "*" or a list of entity tags.
type etagSet struct {
	present  bool
	any      bool
	versions []int64
}

// parseETagSet reads a header; ok=false when an entity tag is malformed.
func parseETagSet(h http.Header, name string) (etagSet, bool) {
	vals := h.Values(name)
	if len(vals) == 0 {
		return etagSet{}, true
	}
	set := etagSet{present: true}
	for _, v := range vals {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" {
				set.any = true
				continue
			}
			n, ok := parseETag(tag)
			if !ok {
				return set, false
			}
			set.versions = append(set.versions, n)
		}
	}
	return set, true
}

// matches reports whether the current version v (nil: no resource) is in the
// set. "*" matches any current, non-deleted resource.
func (e etagSet) matches(v *store.Version) bool {
	if v == nil {
		return false
	}
	if e.any && !v.Deleted {
		return true
	}
	return slices.Contains(e.versions, v.Version)
}

// preconditions are a write's If-Match and If-None-Match headers.
type preconditions struct {
	ifMatch, ifNoneMatch etagSet
}

func writePreconditions(r *http.Request) (preconditions, error) {
	var p preconditions
	var ok bool
	if p.ifMatch, ok = parseETagSet(r.Header, "If-Match"); !ok {
		return p, outcome.New(http.StatusBadRequest, "invalid", `If-Match must be "*" or version ETags such as W/"3"; got `+strconv.Quote(r.Header.Get("If-Match")))
	}
	if p.ifNoneMatch, ok = parseETagSet(r.Header, "If-None-Match"); !ok {
		return p, outcome.New(http.StatusBadRequest, "invalid", `If-None-Match must be "*" or version ETags such as W/"3"; got `+strconv.Quote(r.Header.Get("If-None-Match")))
	}
	return p, nil
}

// strict reports whether the client made the write conditional on the
// version it saw; a lost race then fails with 412 instead of retrying.
func (p preconditions) strict() bool { return p.ifMatch.present || p.ifNoneMatch.present }

// check returns a 412 OperationOutcome when the current version cur (nil:
// none) fails the preconditions.
func (p preconditions) check(c *call, cur *store.Version) error {
	current := "the resource does not exist"
	if cur != nil {
		current = "the current version is " + strconv.FormatInt(cur.Version, 10)
		if cur.Deleted {
			current += " (deleted)"
		}
	}
	if p.ifMatch.present && !p.ifMatch.matches(cur) {
		return outcome.New(http.StatusPreconditionFailed, "conflict", "If-Match does not hold for "+c.typ+"/"+c.id+": "+current)
	}
	if p.ifNoneMatch.present && p.ifNoneMatch.matches(cur) {
		return outcome.New(http.StatusPreconditionFailed, "conflict", "If-None-Match does not hold for "+c.typ+"/"+c.id+": "+current)
	}
	return nil
}
