// Package bundlejson writes the Bundles the FHIR service answers with: a
// search's searchset, a history, and a batch's or transaction's response.
// Each is assembled around the stored bytes of its resources, which are
// copied in as they are (shaped by _summary and _elements when asked).
package bundlejson

import (
	"bytes"
	"strconv"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/internal/jsonquote"
	"github.com/kiln-fhir/kiln/fhirserver/internal/negotiate"
	"github.com/kiln-fhir/kiln/fhirserver/internal/shape"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Start writes the beginning of a Bundle of type typ, up to and with its
// type: its resourceType, id and meta.lastUpdated.
func Start(b *bytes.Buffer, id string, at time.Time, typ string) {
	b.WriteString(`{"resourceType":"Bundle","id":`)
	String(b, id)
	b.WriteString(`,"meta":{"lastUpdated":"`)
	b.WriteString(fhirjson.FormatInstant(at))
	b.WriteString(`"},"type":"`)
	b.WriteString(typ)
	b.WriteByte('"')
}

// String writes s as a JSON string. Unlike json.Marshal it leaves &, <
// and > as they are: links full of \u0026 are valid but unreadable.
func String(b *bytes.Buffer, s string) {
	b.Write(jsonquote.Append(b.AvailableBuffer(), s))
}

// Searchset is one page of a search.
type Searchset struct {
	ID string
	At time.Time
	// Total is the number of matches; < 0 when not counted.
	Total int64
	// Self, Next and Previous are the page's links ("": none).
	Self, Next, Previous string
	Matches, Included    []*store.Version
	// Summary and Elements shape each resource.
	Summary  search.Summary
	Elements []string
	// Warnings are about what the search ignored, answered as an
	// OperationOutcome entry.
	Warnings []outcome.Issue
	// Base is the service's base URL, of each entry's fullUrl.
	Base string
}

// SearchsetOf is the searchset Bundle of p.
func SearchsetOf(p *Searchset) []byte {
	var b bytes.Buffer
	Start(&b, p.ID, p.At, "searchset")
	if p.Total >= 0 {
		b.WriteString(`,"total":`)
		b.WriteString(strconv.FormatInt(p.Total, 10))
	}
	link := func(rel, u string) {
		b.WriteString(`{"relation":"` + rel + `","url":`)
		String(&b, u)
		b.WriteString(`}`)
	}
	b.WriteString(`,"link":[`)
	link("self", p.Self)
	if p.Next != "" {
		b.WriteByte(',')
		link("next", p.Next)
	}
	if p.Previous != "" {
		b.WriteByte(',')
		link("previous", p.Previous)
	}
	b.WriteString(`]`)
	n := 0
	next := func() {
		if n == 0 {
			b.WriteString(`,"entry":[`)
		} else {
			b.WriteByte(',')
		}
		n++
	}
	entry := func(v *store.Version, mode string) {
		next()
		b.WriteString(`{"fullUrl":`)
		String(&b, p.Base+"/"+v.Type+"/"+v.ID)
		b.WriteString(`,"resource":`)
		b.Write(shape.Apply(v.Type, v.Body, p.Summary, p.Elements))
		b.WriteString(`,"search":{"mode":"` + mode + `"}}`)
	}
	for _, v := range p.Matches {
		entry(v, "match")
	}
	for _, v := range p.Included {
		entry(v, "include")
	}
	if len(p.Warnings) > 0 {
		next()
		b.WriteString(`{"resource":`)
		b.Write(outcome.Render(p.Warnings))
		b.WriteString(`,"search":{"mode":"outcome"}}`)
	}
	if n > 0 {
		b.WriteString(`]`)
	}
	b.WriteString(`}`)
	return b.Bytes()
}

// History is one page of a history.
type History struct {
	ID string
	At time.Time
	// Self and Next are the page's links (Next "": none).
	Self, Next string
	Versions   []*store.Version
	// Shaped is what _summary and _elements do to a resource's body.
	Shaped func(typ string, body []byte) []byte
	// Base is the service's base URL, of each entry's fullUrl.
	Base string
}

// HistoryOf is the history Bundle of h.
func HistoryOf(h *History) []byte {
	var b bytes.Buffer
	Start(&b, h.ID, h.At, "history")
	b.WriteString(`,"link":[{"relation":"self","url":`)
	String(&b, h.Self)
	b.WriteString(`}`)
	if h.Next != "" {
		b.WriteString(`,{"relation":"next","url":`)
		String(&b, h.Next)
		b.WriteString(`}`)
	}
	b.WriteString(`]`)
	if len(h.Versions) > 0 {
		b.WriteString(`,"entry":[`)
		for i, v := range h.Versions {
			if i > 0 {
				b.WriteByte(',')
			}
			historyEntry(&b, v, h)
		}
		b.WriteString(`]`)
	}
	b.WriteString(`}`)
	return b.Bytes()
}

func historyEntry(b *bytes.Buffer, v *store.Version, h *History) {
	b.WriteString(`{"fullUrl":`)
	String(b, h.Base+"/"+v.Type+"/"+v.ID)
	if !v.Deleted {
		b.WriteString(`,"resource":`)
		b.Write(h.Shaped(v.Type, v.Body))
	}
	reqURL := v.Type + "/" + v.ID
	status := "200 OK"
	switch {
	case v.Method == store.MethodCreate:
		reqURL, status = v.Type, "201 Created"
	case v.Deleted:
		status = "204 No Content"
	case v.Version == 1:
		status = "201 Created" // create-on-update
	}
	b.WriteString(`,"request":{"method":"`)
	b.WriteString(string(v.Method))
	b.WriteString(`","url":`)
	String(b, reqURL)
	b.WriteString(`},"response":{"status":"`)
	b.WriteString(status)
	b.WriteString(`","etag":`)
	String(b, negotiate.ETag(v.Version))
	b.WriteString(`,"lastModified":"`)
	b.WriteString(fhirjson.FormatInstant(v.LastUpdated))
	b.WriteString(`"}}`)
}
